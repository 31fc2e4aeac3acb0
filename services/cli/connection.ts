import { readFileSync } from 'node:fs'
import path from 'node:path'

/** A failure the CLI reports as one line on stderr before exiting with `exitCode`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly details: string[] = [],
    readonly exitCode = 1,
  ) {
    super(message)
  }
}

export interface Connection {
  baseUrl: string
  adminToken: string
}

export interface ConnectionOptions {
  url?: string
  adminToken?: string
}

const DEFAULT_URL = 'http://127.0.0.1:3000'

/**
 * Where the service is and how to prove we are its operator. The CLI is its own entry point and
 * must work without the service's full configuration, so it reads only the three variables it needs.
 */
export function resolveConnection(opts: ConnectionOptions, env: NodeJS.ProcessEnv = process.env): Connection {
  const baseUrl = (opts.url ?? env.PUBLIC_URL ?? DEFAULT_URL).replace(/\/+$/, '')
  const adminToken = opts.adminToken ?? env.ADMIN_TOKEN ?? readAdminTokenFile(env.DATA_DIR || './.data')
  if (!adminToken) {
    throw new CliError(
      'no admin token: pass --admin-token, set ADMIN_TOKEN, or start the service once so that it writes DATA_DIR/admin-token',
    )
  }
  return { baseUrl, adminToken }
}

/** The token a first start generated; absent when the service never ran with this DATA_DIR. */
function readAdminTokenFile(dataDir: string): string | undefined {
  try {
    return readFileSync(path.resolve(dataDir, 'admin-token'), 'utf8').trim() || undefined
  } catch {
    return undefined
  }
}

/** One call to the operator API; a non-2xx answer becomes a CliError carrying the server's message. */
export function adminRequest(conn: Connection, method: string, apiPath: string, body?: unknown): Promise<unknown> {
  return callService(conn, conn.adminToken, { method, apiPath: `/admin/v1${apiPath}`, body })
}

/** One HTTP call: `body`, when given, is sent as JSON. */
interface ServiceCall {
  method: string
  apiPath: string
  body?: unknown
}

/** One call to the public API, authenticated by a workspace's API key instead of the admin token. */
export function apiKeyRequest(conn: Connection, apiKey: string, call: ServiceCall): Promise<unknown> {
  return callService(conn, apiKey, call)
}

async function callService(conn: Connection, token: string, { method, apiPath, body }: ServiceCall): Promise<unknown> {
  const url = `${conn.baseUrl}${apiPath}`
  const headers: Record<string, string> = { authorization: `Bearer ${token}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  let res: Response
  try {
    res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause
    throw new CliError(`cannot reach ${conn.baseUrl}: ${cause?.code ?? cause?.message ?? (e as Error).message}`)
  }
  const text = await res.text()
  const parsed = parseJson(text)
  if (!res.ok) throw serverError(res.status, parsed, text)
  return parsed
}

/**
 * The API key for calls of the public API on a workspace's behalf. The first start's key in
 * DATA_DIR/credentials.json is used only for the workspace it belongs to: a key authenticates
 * one workspace, and using it for another would act on the wrong one.
 */
export function resolveApiKey(workspaceId: string, given: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (given) return given
  const file = path.resolve(env.DATA_DIR || './.data', 'credentials.json')
  const credentials = readCredentials(file)
  if (credentials?.workspace_id === workspaceId && credentials.api_key) return credentials.api_key
  const other = credentials?.workspace_id ? ` (${file} holds the key of workspace ${credentials.workspace_id})` : ''
  throw new CliError(`no API key for workspace ${workspaceId}: pass --api-key or set API_KEY${other}`)
}

function readCredentials(file: string): { workspace_id?: string; api_key?: string } | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8'))
  } catch {
    return undefined
  }
}

function parseJson(text: string): unknown {
  if (!text) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

function serverError(status: number, body: unknown, text: string): CliError {
  const b = body as { message?: unknown; errors?: unknown } | undefined
  const message = typeof b?.message === 'string' ? b.message : text.trim().slice(0, 200) || 'no message'
  // The first of `errors` repeats `message`; the rest name further bad fields.
  const details = Array.isArray(b?.errors) ? b.errors.map(String).filter((e) => e !== message) : []
  return new CliError(`${status}: ${message}`, details)
}

/** Ids end up inside URL paths; encoding keeps a stray slash from addressing another resource. */
export function seg(id: string): string {
  return encodeURIComponent(id)
}
