import { readFileSync } from 'node:fs'
import { Argument, Command, InvalidArgumentError, Option } from 'commander'
import { Permissions } from '../../shared/domain/permissions.js'
import { RateLimitedPaths } from '../../shared/domain/rate-limits.js'
import { adminRequest, apiKeyRequest, CliError, resolveApiKey, resolveConnection, seg, type Connection } from './connection.js'
import { watchExport, type ExportDestination } from './export-watch.js'
import { describe, print, type Outcome } from './output.js'

interface GlobalOptions {
  url?: string
  adminToken?: string
  json?: boolean
}

type Body = Record<string, any>

/**
 * Wraps a command body that prints for itself, as it goes: commander hands positional arguments,
 * then the command's options, then the command itself; the connection comes from the global
 * options and the environment.
 */
function actPrinting<A extends unknown[]>(fn: (session: { conn: Connection; json: boolean }, ...args: A) => Promise<void>) {
  return async (...params: unknown[]) => {
    const command = params[params.length - 1] as Command
    const globals = command.optsWithGlobals<GlobalOptions>()
    await fn({ conn: resolveConnection(globals), json: globals.json ?? false }, ...(params.slice(0, -1) as A))
  }
}

/** Wraps a command body whose outcome is printed once it is complete. */
function act<A extends unknown[]>(fn: (conn: Connection, ...args: A) => Promise<Outcome>) {
  return actPrinting(async ({ conn, json }, ...args: A) => print(await fn(conn, ...args), json))
}

function parsePermissions(value: string): string[] {
  const names = value.split(',').map((p) => p.trim()).filter(Boolean)
  const unknown = names.filter((p) => !(Permissions as readonly string[]).includes(p))
  if (unknown.length) throw new InvalidArgumentError(`unknown permission ${unknown.join(', ')}; choose from ${Permissions.join(', ')}`)
  if (!names.length) throw new InvalidArgumentError('name at least one permission')
  return names
}

function parsePositiveInt(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new InvalidArgumentError('expected a whole number of at least 1')
  return Number(value)
}

function parseList(value: string): string[] {
  const items = value.split(',').map((x) => x.trim()).filter(Boolean)
  if (!items.length) throw new InvalidArgumentError('name at least one')
  return items
}

function parsePercent(value: string): number {
  const n = Number(value)
  if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError('expected a number from 0 to 100')
  return n
}

type EndpointLimits = Record<string, { limit: number; window_seconds: number }>

/** `--endpoint /users/track=3000/3` (repeatable): LIMIT requests per WINDOW_SECONDS for that path's bucket. */
function collectEndpointLimit(value: string, previous: EndpointLimits = {}): EndpointLimits {
  const m = /^(\/[^=]+)=(\d+)\/(\d+)$/.exec(value)
  if (!m) throw new InvalidArgumentError('expected PATH=LIMIT/WINDOW_SECONDS, for example /users/track=3000/3')
  return { ...previous, [m[1]]: { limit: Number(m[2]), window_seconds: Number(m[3]) } }
}

function describePartitions(r: Body): string[] {
  const now = `${r.partitions} track partitions (layout generation ${r.generation})`
  return r.changing ? [now, `changing from ${r.changing.from_partitions}: ${r.changing.jobs_left} jobs of the old layout left`] : [now]
}

/** The filter of `segment create`, inline or from a file, parsed here so a typo fails before any request. */
function readFilter(opts: { filter?: string; filterFile?: string }): unknown {
  if ((opts.filter === undefined) === (opts.filterFile === undefined)) {
    throw new CliError('give the filter with exactly one of --filter <json> or --filter-file <path>')
  }
  const [source, text] = opts.filter !== undefined ? ['--filter', opts.filter] : [opts.filterFile!, readFileOrFail(opts.filterFile!)]
  try {
    return JSON.parse(text)
  } catch (e) {
    throw new CliError(`${source} is not valid JSON: ${(e as Error).message}`)
  }
}

function readFileOrFail(file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch (e) {
    throw new CliError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`)
  }
}

/** A call to the operator API: the path under /admin/v1 and the body to send. */
interface AdminCall {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE'
  path: string
  body?: unknown
}

/**
 * One operator command: where it sits (`group` and the command line after it), what it asks of
 * the operator API, and what it prints (`data` for --json, the response by default).
 */
interface AdminCommand {
  group: keyof typeof Groups
  usage: string
  description: string
  arguments?: Argument[]
  options?: Option[]
  call(args: any[], opts: Body): AdminCall
  show(response: Body, args: any[], opts: Body): { lines: string[]; data?: unknown }
}

const Groups = {
  workspace: 'workspaces',
  key: 'API keys',
  'scim-token': 'SCIM tokens',
  'subscription-group': 'subscription groups',
  segment: 'segments',
  'global-control-group': 'the global control group',
  'export-storage': "where a workspace's exports go",
  'rate-limits': "a workspace's rate limits",
  'blocked-ids': 'external ids that /users/track refuses',
  export: 'exports',
  partitions: 'the track partitions (changed online)',
} as const

const required = (flags: string, description: string) => new Option(flags, description).makeOptionMandatory()
const permissionsHelp = `comma-separated, from: ${Permissions.join(', ')}`

/** Every operator job of operator.md section 2 that is one call and one answer. */
const AdminCommands: AdminCommand[] = [
  {
    group: 'workspace',
    usage: 'create <name>',
    description: 'create a workspace',
    call: ([name]) => ({ method: 'POST', path: '/workspaces', body: { name } }),
    show: (ws) => ({ lines: describe(`created workspace ${ws.name}`, { id: ws.id }) }),
  },
  {
    group: 'key',
    usage: 'create <workspace-id>',
    description: 'create an API key (the key is shown once)',
    options: [
      required('--name <name>', 'a name that says who uses the key'),
      new Option('--permissions <list>', permissionsHelp).argParser(parsePermissions).default([...Permissions], 'all of them'),
    ],
    call: ([ws], opts) => ({ method: 'POST', path: `/workspaces/${seg(ws)}/api_keys`, body: { name: opts.name, permissions: opts.permissions } }),
    show: (k) => ({ lines: describe('created API key (store it now: it is shown only once)', { id: k.id, key: k.key, permissions: k.permissions }) }),
  },
  {
    group: 'key',
    usage: 'revoke <id>',
    description: 'revoke an API key; it stops working at once, in every API process',
    call: ([id]) => ({ method: 'DELETE', path: `/api_keys/${seg(id)}` }),
    show: (_, [id]) => ({ data: { id, revoked: true }, lines: [`revoked API key ${id}`] }),
  },
  {
    group: 'key',
    usage: 'set-permissions <id>',
    description: "replace an API key's permissions; in force at once",
    options: [required('--permissions <list>', permissionsHelp).argParser(parsePermissions)],
    call: ([id], opts) => ({ method: 'PUT', path: `/api_keys/${seg(id)}/permissions`, body: { permissions: opts.permissions } }),
    show: (k) => ({ lines: describe(`API key ${k.id}`, { permissions: k.permissions }) }),
  },
  {
    group: 'scim-token',
    usage: 'create',
    description: 'create a SCIM token (shown once); SCIM calls must send X-Request-Origin equal to --origin',
    options: [required('--origin <origin>', 'the request origin SCIM clients will send')],
    call: (_, opts) => ({ method: 'POST', path: '/scim_tokens', body: { request_origin: opts.origin } }),
    show: (t, _, opts) => ({ lines: describe('created SCIM token (store it now: it is shown only once)', { id: t.id, token: t.token, origin: opts.origin }) }),
  },
  {
    group: 'scim-token',
    usage: 'revoke <id>',
    description: 'revoke a SCIM token; it stops working at once',
    call: ([id]) => ({ method: 'DELETE', path: `/scim_tokens/${seg(id)}` }),
    show: (_, [id]) => ({ data: { id, revoked: true }, lines: [`revoked SCIM token ${id}`] }),
  },
  {
    group: 'subscription-group',
    usage: 'create <workspace-id>',
    description: 'create a subscription group',
    options: [required('--name <name>', 'group name'), required('--channel <channel>', 'email, sms or whatsapp')],
    call: ([ws], opts) => ({ method: 'POST', path: `/workspaces/${seg(ws)}/subscription_groups`, body: { name: opts.name, channel: opts.channel } }),
    show: (g) => ({ lines: describe(`created subscription group ${g.name}`, { id: g.subscription_group_id, channel: g.channel }) }),
  },
  {
    group: 'segment',
    usage: 'create <workspace-id>',
    description: 'create a segment from a filter (operator.md section 3)',
    options: [
      required('--name <name>', 'segment name'),
      new Option('--filter <json>', 'the filter as JSON, for example \'{"all": []}\''),
      new Option('--filter-file <path>', 'a file holding the filter as JSON'),
    ],
    call: ([ws], opts) => ({ method: 'POST', path: `/workspaces/${seg(ws)}/segments`, body: { name: opts.name, filter: readFilter(opts) } }),
    show: (s) => ({ lines: describe(`created segment ${s.name}`, { id: s.segment_id }) }),
  },
  {
    group: 'segment',
    usage: 'get <workspace-id> <segment-id>',
    description: 'show a segment, with its current member count',
    call: ([ws, id]) => ({ method: 'GET', path: `/workspaces/${seg(ws)}/segments/${seg(id)}` }),
    show: (s) => ({ lines: describe(`segment ${s.name}`, { id: s.segment_id, size: s.size, filter: s.filter }) }),
  },
  {
    group: 'global-control-group',
    usage: 'set',
    description: 'set the share of users held out of messaging',
    arguments: [new Argument('<workspace-id>'), new Argument('<percent>', '0 to 100').argParser(parsePercent)],
    call: ([ws, percent]) => ({ method: 'PUT', path: `/workspaces/${seg(ws)}/global_control_group`, body: { percent } }),
    show: (g) => ({ lines: [`global control group: ${g.percent}% (users with random_bucket below ${g.random_bucket_below})`] }),
  },
  {
    group: 'export-storage',
    usage: 'set <workspace-id>',
    description: "send this workspace's exports to an S3 bucket",
    options: [
      required('--bucket <bucket>', 'bucket name'),
      required('--region <region>', 'bucket region'),
      new Option('--endpoint <url>', 'an S3-compatible endpoint other than AWS'),
      new Option('--force-path-style', 'address the bucket in the path (most S3-compatible servers need this)'),
      // From the environment too, so the secret need not appear in the shell history or process list.
      new Option('--access-key-id <id>').env('AWS_ACCESS_KEY_ID').makeOptionMandatory(),
      new Option('--secret-access-key <secret>').env('AWS_SECRET_ACCESS_KEY').makeOptionMandatory(),
    ],
    call: ([ws], opts) => ({
      method: 'PUT',
      path: `/workspaces/${seg(ws)}/export_storage`,
      body: {
        bucket: opts.bucket,
        region: opts.region,
        endpoint: opts.endpoint,
        force_path_style: opts.forcePathStyle,
        access_key_id: opts.accessKeyId,
        secret_access_key: opts.secretAccessKey,
      },
    }),
    show: (s) => ({ lines: describe(`exports now go to bucket ${s.bucket}`, { region: s.region, endpoint: s.endpoint }) }),
  },
  {
    group: 'export-storage',
    usage: 'remove <workspace-id>',
    description: 'exports go back to download URLs',
    call: ([ws]) => ({ method: 'DELETE', path: `/workspaces/${seg(ws)}/export_storage` }),
    show: (_, [ws]) => ({ data: { workspace_id: ws, export_storage: null }, lines: ['export storage removed: exports answer with download URLs'] }),
  },
  {
    group: 'partitions',
    usage: 'show',
    description: 'the track partitions in force, and a change still draining',
    call: () => ({ method: 'GET', path: '/track_partitions' }),
    show: (r) => ({ lines: describePartitions(r) }),
  },
  {
    group: 'partitions',
    usage: 'set <count>',
    description: 'change the number of track partitions under load: new requests go to the new ones, which apply once the old have drained',
    arguments: [new Argument('<count>', 'partitions, 1 to 256').argParser(parsePositiveInt)],
    call: ([count]) => ({ method: 'PUT', path: '/track_partitions', body: { partitions: count } }),
    show: (r) => ({ lines: describePartitions(r) }),
  },
  {
    group: 'rate-limits',
    usage: 'set <workspace-id>',
    description: 'replace the rate-limit overrides; anything not given returns to its default',
    options: [
      new Option('--default-per-hour <n>', 'the shared default bucket, requests per hour').argParser(parsePositiveInt),
      new Option(
        '--endpoint <path=limit/window>',
        `override a bucket, repeatable (LIMIT requests per WINDOW_SECONDS); paths: ${RateLimitedPaths.join(', ')}`,
      ).argParser(collectEndpointLimit),
    ],
    call: ([ws], opts) => ({ method: 'PUT', path: `/workspaces/${seg(ws)}/rate_limits`, body: { default_per_hour: opts.defaultPerHour, endpoints: opts.endpoint } }),
    show: (r) => {
      const inForce = Object.entries(r.in_force as Record<string, { paths: string[]; limit: number; window_seconds: number }>)
      const lines = inForce.map(([name, b]) => `  ${name.padEnd(26)} ${b.limit} per ${b.window_seconds} s${b.paths.length ? `  (${b.paths.join(', ')})` : ''}`)
      return { lines: ['rate limits in force:', ...lines] }
    },
  },
  {
    group: 'blocked-ids',
    usage: 'set <workspace-id> [external-ids...]',
    description: 'replace the list of blocked external ids (none given: the list is emptied)',
    call: ([ws, ids]) => ({ method: 'PUT', path: `/workspaces/${seg(ws)}/blocked_external_ids`, body: { external_ids: ids } }),
    show: (r) => ({ lines: describe(`${r.external_ids.length} blocked external id(s)`, { ids: r.external_ids }) }),
  },
  {
    group: 'export',
    usage: 'get <workspace-id> <export-id>',
    description: 'show the progress and files of an export',
    call: ([ws, id]) => ({ method: 'GET', path: `/workspaces/${seg(ws)}/exports/${seg(id)}` }),
    show: (e) => ({
      lines: describe(`export ${e.id}`, {
        kind: e.kind,
        segment: e.segment_id,
        status: e.status,
        users: e.users_exported,
        files: e.files,
        started: e.started_at,
        finished: e.finished_at,
        error: e.error,
      }),
    }),
  },
]

/** The command group of that name, made on first use. */
function groupOf(program: Command, name: keyof typeof Groups): Command {
  return program.commands.find((c) => c.name() === name) ?? program.command(name).description(Groups[name])
}

function registerAdminCommand(program: Command, spec: AdminCommand) {
  const command = groupOf(program, spec.group).command(spec.usage).description(spec.description)
  for (const a of spec.arguments ?? []) command.addArgument(a)
  for (const o of spec.options ?? []) command.addOption(o)
  command.action(
    act(async (conn, ...params: unknown[]) => {
      const opts = params.pop() as Body
      const { method, path, body } = spec.call(params, opts)
      const response = ((await adminRequest(conn, method, path, body)) ?? {}) as Body
      const shown = spec.show(response, params, opts)
      return { data: shown.data ?? response, lines: shown.lines }
    }),
  )
}

interface ExportStartOptions {
  segment: string
  fields: string[]
  format?: 'zip' | 'gzip'
  apiKey?: string
  watch?: boolean
  timeout?: number
}

interface ExportAccepted extends ExportDestination {
  message: string
  export_id: string
}

function exportCommands(program: Command) {
  const exportGroup = groupOf(program, 'export')
  exportGroup
    .command('start <workspace-id>')
    .description("export a segment's users (POST /users/export/segment); with --watch, follow it until done")
    .requiredOption('--segment <id>', 'the segment to export')
    .requiredOption('--fields <list>', 'comma-separated fields to export, for example external_id,email', parseList)
    .addOption(new Option('--format <format>', 'file format (default zip)').choices(['zip', 'gzip']))
    // An export is a public API call, made with one of the workspace's keys rather than the admin token.
    .addOption(new Option('--api-key <key>', "the workspace's API key (default: $DATA_DIR/credentials.json for its workspace)").env('API_KEY'))
    .option('--watch', 'follow the export until it is done, as `export watch` does')
    .option('--timeout <seconds>', 'with --watch: give up after this long (exit 2)', parsePositiveInt)
    .action(
      actPrinting(async ({ conn, json }, ws: string, opts: ExportStartOptions) => {
        const body = { segment_id: opts.segment, fields_to_export: opts.fields, output_format: opts.format }
        const accepted = (await apiKeyRequest(conn, resolveApiKey(ws, opts.apiKey), { method: 'POST', apiPath: '/users/export/segment', body })) as ExportAccepted
        if (!opts.watch) return print({ data: accepted, lines: acceptedLines(accepted) }, json)
        // Followed by status lines, so one compact line like them: the whole output stays NDJSON.
        console.log(json ? JSON.stringify(accepted) : acceptedLines(accepted)[0])
        await watchExport(conn, ws, accepted.export_id, { json, timeoutSeconds: opts.timeout, destination: accepted })
      }),
    )
  exportGroup
    .command('watch <workspace-id> <export-id>')
    .description('follow an export with a progress bar until it is done, then list its files')
    .option('--timeout <seconds>', 'give up after this long (exit 2)', parsePositiveInt)
    .action(
      actPrinting(async ({ conn, json }, ws: string, id: string, opts: { timeout?: number }) => {
        await watchExport(conn, ws, id, { json, timeoutSeconds: opts.timeout })
      }),
    )
}

function acceptedLines(a: ExportAccepted): string[] {
  return describe(`export ${a.export_id} accepted`, { 'object prefix': a.object_prefix, 'download URL': a.url })
}

/** Every operator job of operator.md section 2, one command group per resource. */
export function registerCommands(program: Command): void {
  for (const spec of AdminCommands) registerAdminCommand(program, spec)
  exportCommands(program)
}
