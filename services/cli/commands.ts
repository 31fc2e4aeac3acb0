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
function actPrinting<A extends unknown[]>(fn: (conn: Connection, json: boolean, ...args: A) => Promise<void>) {
  return async (...params: unknown[]) => {
    const command = params[params.length - 1] as Command
    const globals = command.optsWithGlobals<GlobalOptions>()
    await fn(resolveConnection(globals), globals.json ?? false, ...(params.slice(0, -1) as A))
  }
}

/** Wraps a command body whose outcome is printed once it is complete. */
function act<A extends unknown[]>(fn: (conn: Connection, ...args: A) => Promise<Outcome>) {
  return actPrinting(async (conn, json, ...args: A) => print(await fn(conn, ...args), json))
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

function workspaceCommands(program: Command) {
  const workspace = program.command('workspace').description('workspaces')
  workspace
    .command('create <name>')
    .description('create a workspace')
    .action(
      act(async (conn, name: string) => {
        const ws = (await adminRequest(conn, 'POST', '/workspaces', { name })) as Body
        return { data: ws, lines: describe(`created workspace ${ws.name}`, { id: ws.id }) }
      }),
    )
}

function keyCommands(program: Command) {
  const key = program.command('key').description('API keys')
  key
    .command('create <workspace-id>')
    .description('create an API key (the key is shown once)')
    .requiredOption('--name <name>', 'a name that says who uses the key')
    .addOption(
      new Option('--permissions <list>', `comma-separated, from: ${Permissions.join(', ')}`)
        .argParser(parsePermissions)
        .default([...Permissions], 'all of them'),
    )
    .action(
      act(async (conn, ws: string, opts: { name: string; permissions: string[] }) => {
        const k = (await adminRequest(conn, 'POST', `/workspaces/${seg(ws)}/api_keys`, opts)) as Body
        return {
          data: k,
          lines: describe('created API key (store it now: it is shown only once)', { id: k.id, key: k.key, permissions: k.permissions }),
        }
      }),
    )
  key
    .command('revoke <id>')
    .description('revoke an API key; it stops working at once, in every API process')
    .action(
      act(async (conn, id: string) => {
        await adminRequest(conn, 'DELETE', `/api_keys/${seg(id)}`)
        return { data: { id, revoked: true }, lines: [`revoked API key ${id}`] }
      }),
    )
  key
    .command('set-permissions <id>')
    .description("replace an API key's permissions; in force at once")
    .requiredOption('--permissions <list>', `comma-separated, from: ${Permissions.join(', ')}`, parsePermissions)
    .action(
      act(async (conn, id: string, opts: { permissions: string[] }) => {
        const k = (await adminRequest(conn, 'PUT', `/api_keys/${seg(id)}/permissions`, opts)) as Body
        return { data: k, lines: describe(`API key ${k.id}`, { permissions: k.permissions }) }
      }),
    )
}

function scimTokenCommands(program: Command) {
  const token = program.command('scim-token').description('SCIM tokens')
  token
    .command('create')
    .description('create a SCIM token (shown once); SCIM calls must send X-Request-Origin equal to --origin')
    .requiredOption('--origin <origin>', 'the request origin SCIM clients will send')
    .action(
      act(async (conn, opts: { origin: string }) => {
        const t = (await adminRequest(conn, 'POST', '/scim_tokens', { request_origin: opts.origin })) as Body
        return {
          data: t,
          lines: describe('created SCIM token (store it now: it is shown only once)', { id: t.id, token: t.token, origin: opts.origin }),
        }
      }),
    )
  token
    .command('revoke <id>')
    .description('revoke a SCIM token; it stops working at once')
    .action(
      act(async (conn, id: string) => {
        await adminRequest(conn, 'DELETE', `/scim_tokens/${seg(id)}`)
        return { data: { id, revoked: true }, lines: [`revoked SCIM token ${id}`] }
      }),
    )
}

function subscriptionGroupCommands(program: Command) {
  program
    .command('subscription-group')
    .description('subscription groups')
    .command('create <workspace-id>')
    .description('create a subscription group')
    .requiredOption('--name <name>', 'group name')
    .requiredOption('--channel <channel>', 'email, sms or whatsapp')
    .action(
      act(async (conn, ws: string, opts: { name: string; channel: string }) => {
        const g = (await adminRequest(conn, 'POST', `/workspaces/${seg(ws)}/subscription_groups`, opts)) as Body
        return { data: g, lines: describe(`created subscription group ${g.name}`, { id: g.subscription_group_id, channel: g.channel }) }
      }),
    )
}

function segmentCommands(program: Command) {
  const segment = program.command('segment').description('segments')
  segment
    .command('create <workspace-id>')
    .description('create a segment from a filter (operator.md section 3)')
    .requiredOption('--name <name>', 'segment name')
    .option('--filter <json>', 'the filter as JSON, for example \'{"all": []}\'')
    .option('--filter-file <path>', 'a file holding the filter as JSON')
    .action(
      act(async (conn, ws: string, opts: { name: string; filter?: string; filterFile?: string }) => {
        const body = { name: opts.name, filter: readFilter(opts) }
        const s = (await adminRequest(conn, 'POST', `/workspaces/${seg(ws)}/segments`, body)) as Body
        return { data: s, lines: describe(`created segment ${s.name}`, { id: s.segment_id }) }
      }),
    )
  segment
    .command('get <workspace-id> <segment-id>')
    .description('show a segment, with its current member count')
    .action(
      act(async (conn, ws: string, id: string) => {
        const s = (await adminRequest(conn, 'GET', `/workspaces/${seg(ws)}/segments/${seg(id)}`)) as Body
        return { data: s, lines: describe(`segment ${s.name}`, { id: s.segment_id, size: s.size ?? 'unknown', filter: s.filter }) }
      }),
    )
}

function globalControlGroupCommands(program: Command) {
  program
    .command('global-control-group')
    .description('the global control group')
    .command('set')
    .description('set the share of users held out of messaging')
    .argument('<workspace-id>')
    .addArgument(new Argument('<percent>', '0 to 100').argParser(parsePercent))
    .action(
      act(async (conn, ws: string, percent: number) => {
        const g = (await adminRequest(conn, 'PUT', `/workspaces/${seg(ws)}/global_control_group`, { percent })) as Body
        return { data: g, lines: [`global control group: ${g.percent}% (users with random_bucket below ${g.random_bucket_below})`] }
      }),
    )
}

function exportStorageCommands(program: Command) {
  const storage = program.command('export-storage').description("where a workspace's exports go")
  storage
    .command('set <workspace-id>')
    .description("send this workspace's exports to an S3 bucket")
    .requiredOption('--bucket <bucket>', 'bucket name')
    .requiredOption('--region <region>', 'bucket region')
    .option('--endpoint <url>', 'an S3-compatible endpoint other than AWS')
    .option('--force-path-style', 'address the bucket in the path (most S3-compatible servers need this)')
    // From the environment too, so the secret need not appear in the shell history or process list.
    .addOption(new Option('--access-key-id <id>').env('AWS_ACCESS_KEY_ID').makeOptionMandatory())
    .addOption(new Option('--secret-access-key <secret>').env('AWS_SECRET_ACCESS_KEY').makeOptionMandatory())
    .action(
      act(async (conn, ws: string, opts: Body) => {
        const body = {
          bucket: opts.bucket,
          region: opts.region,
          endpoint: opts.endpoint,
          force_path_style: opts.forcePathStyle,
          access_key_id: opts.accessKeyId,
          secret_access_key: opts.secretAccessKey,
        }
        const s = (await adminRequest(conn, 'PUT', `/workspaces/${seg(ws)}/export_storage`, body)) as Body
        return { data: s, lines: describe(`exports now go to bucket ${s.bucket}`, { region: s.region, endpoint: s.endpoint }) }
      }),
    )
  storage
    .command('remove <workspace-id>')
    .description('exports go back to download URLs')
    .action(
      act(async (conn, ws: string) => {
        await adminRequest(conn, 'DELETE', `/workspaces/${seg(ws)}/export_storage`)
        return { data: { workspace_id: ws, export_storage: null }, lines: ['export storage removed: exports answer with download URLs'] }
      }),
    )
}

function rateLimitCommands(program: Command) {
  program
    .command('rate-limits')
    .description("a workspace's rate limits")
    .command('set <workspace-id>')
    .description('replace the rate-limit overrides; anything not given returns to its default')
    .option('--default-per-hour <n>', 'the shared default bucket, requests per hour', parsePositiveInt)
    .option(
      '--endpoint <path=limit/window>',
      `override a bucket, repeatable (LIMIT requests per WINDOW_SECONDS); paths: ${RateLimitedPaths.join(', ')}`,
      collectEndpointLimit,
    )
    .action(
      act(async (conn, ws: string, opts: { defaultPerHour?: number; endpoint?: EndpointLimits }) => {
        const body = { default_per_hour: opts.defaultPerHour, endpoints: opts.endpoint }
        const r = (await adminRequest(conn, 'PUT', `/workspaces/${seg(ws)}/rate_limits`, body)) as Body
        const inForce = Object.entries(r.in_force as Record<string, { paths: string[]; limit: number; window_seconds: number }>)
        const lines = inForce.map(([name, b]) => `  ${name.padEnd(26)} ${b.limit} per ${b.window_seconds} s${b.paths.length ? `  (${b.paths.join(', ')})` : ''}`)
        return { data: r, lines: ['rate limits in force:', ...lines] }
      }),
    )
}

function blockedIdCommands(program: Command) {
  program
    .command('blocked-ids')
    .description('external ids that /users/track refuses')
    .command('set <workspace-id> [external-ids...]')
    .description('replace the list of blocked external ids (none given: the list is emptied)')
    .action(
      act(async (conn, ws: string, ids: string[]) => {
        const r = (await adminRequest(conn, 'PUT', `/workspaces/${seg(ws)}/blocked_external_ids`, { external_ids: ids })) as Body
        return { data: r, lines: describe(`${r.external_ids.length} blocked external id(s)`, { ids: r.external_ids }) }
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
  const exportGroup = program.command('export').description('exports')
  exportGroup
    .command('get <workspace-id> <export-id>')
    .description('show the progress and files of an export')
    .action(
      act(async (conn, ws: string, id: string) => {
        const e = (await adminRequest(conn, 'GET', `/workspaces/${seg(ws)}/exports/${seg(id)}`)) as Body
        const fields = {
          kind: e.kind,
          segment: e.segment_id,
          status: e.status,
          users: e.users_exported,
          files: e.files,
          started: e.started_at,
          finished: e.finished_at,
          error: e.error,
        }
        return { data: e, lines: describe(`export ${e.id}`, fields) }
      }),
    )
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
      actPrinting(async (conn, json, ws: string, opts: ExportStartOptions) => {
        const body = { segment_id: opts.segment, fields_to_export: opts.fields, output_format: opts.format }
        const accepted = (await apiKeyRequest(conn, resolveApiKey(ws, opts.apiKey), 'POST', '/users/export/segment', body)) as ExportAccepted
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
      actPrinting(async (conn, json, ws: string, id: string, opts: { timeout?: number }) => {
        await watchExport(conn, ws, id, { json, timeoutSeconds: opts.timeout })
      }),
    )
}

function acceptedLines(a: ExportAccepted): string[] {
  return describe(`export ${a.export_id} accepted`, { 'object prefix': a.object_prefix, 'download URL': a.url })
}

/** Every operator job of operator.md section 2, one command group per resource. */
export function registerCommands(program: Command): void {
  for (const register of [
    workspaceCommands,
    keyCommands,
    scimTokenCommands,
    subscriptionGroupCommands,
    segmentCommands,
    globalControlGroupCommands,
    exportStorageCommands,
    rateLimitCommands,
    blockedIdCommands,
    exportCommands,
  ]) {
    register(program)
  }
}
