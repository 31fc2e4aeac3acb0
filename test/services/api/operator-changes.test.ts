import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApp } from '../../../services/api/app.js'
import { apiDepsFrom } from '../../../services/api/deps.js'
import { createContext, type Context } from '../../../shared/context.js'
import { createMetrics } from '../../../shared/metrics.js'
import { runCli } from '../../helpers/cli.js'
import { request, startTestEnv, type HttpResult, type TestEnv } from '../../helpers/harness.js'

/**
 * Two API processes on one database and one queue prefix, each with its own connections and
 * caches: every change made through A (or the CLI, which calls A) holds for the very next request
 * sent to B, with no waiting and no retrying.
 */
let env: TestEnv
let b: { baseUrl: string; ctx: Context; pgQueries: () => number; close(): Promise<void> }

/** A second API process in all that matters here: its own pools, Redis connections and caches. */
async function secondApi(env: TestEnv): Promise<typeof b> {
  const ctx = await createContext(env.config, env.ctx.logger, { clickhouse: false, migrate: false })
  // Counted in code: the queries this process sends to Postgres (pg_stat_statements is not installed).
  let queries = 0
  const query = ctx.pg.query.bind(ctx.pg) as (...a: unknown[]) => unknown
  ctx.pg.query = ((...a: unknown[]) => {
    queries++
    return query(...a)
  }) as typeof ctx.pg.query
  const server = createApp(apiDepsFrom(ctx, createMetrics(), env.adminToken)).listen(0, '127.0.0.1')
  await new Promise<void>((r) => server.once('listening', () => r()))
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ctx,
    pgQueries: () => queries,
    async close() {
      await new Promise<void>((r) => server.close(() => r()))
      await ctx.close()
    },
  }
}

const onB = (method: string, p: string, key: string, body?: unknown) => request(b.baseUrl, method, p, { token: key, body })
const track = (key: string, externalId: string, attrs: Record<string, unknown> = {}) =>
  onB('POST', '/users/track', key, { attributes: [{ external_id: externalId, ...attrs }] })
const admin = async (method: string, p: string, body?: unknown) => {
  const r = await env.admin(method, p, body)
  expect(r.status, r.text).toBeLessThan(300)
  return r
}
const keyIdOf = async (workspaceId: string) =>
  (await env.ctx.pg.query('SELECT id FROM api_keys WHERE workspace_id = $1 ORDER BY created_at LIMIT 1', [workspaceId])).rows[0].id as string

async function readBack(key: string, externalId: string) {
  return (await env.readUsers(key, { external_ids: [externalId] })).users[0]
}

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track'] })
  b = await secondApi(env)
})
afterAll(async () => {
  await b?.close()
  await env?.close()
})

describe('operator changes through process A hold on the next request to process B', () => {
  it('a deleted key: 401 and nothing written', async () => {
    const ws = await env.workspace()
    const other = await admin('POST', `/admin/v1/workspaces/${ws.id}/api_keys`, { name: 'other', permissions: ['users.track', 'users.export.ids'] })
    // B has the key in its cache.
    expect((await track(ws.key, 'kd-user', { first_name: 'Before' })).status).toBe(201)

    await admin('DELETE', `/admin/v1/api_keys/${await keyIdOf(ws.id)}`)
    const refused = await track(ws.key, 'kd-user', { first_name: 'Revoked' })
    expect(refused.status, refused.text).toBe(401)
    expect(refused.body.message).toBe('invalid API key')
    expect(refused.headers.get('x-request-id')).toBeNull()
    expect((await onB('GET', `/requests/${randomUUID()}`, ws.key)).status).toBe(401)

    // A later write of the same user (same partition, so applied after anything queued before it) is done:
    // the refused change never reached the profile.
    await env.writeAndWait(other.body.key, '/users/track', { attributes: [{ external_id: 'kd-user', last_name: 'Later' }] })
    const user = await readBack(other.body.key, 'kd-user')
    expect(user).toMatchObject({ external_id: 'kd-user', first_name: 'Before', last_name: 'Later' })
  })

  it("a key's permissions changed: refused and allowed at once", async () => {
    const ws = await env.workspace(['users.track', 'users.export.ids'])
    const keyId = await keyIdOf(ws.id)
    expect((await track(ws.key, 'perm-user')).status).toBe(201)

    await admin('PUT', `/admin/v1/api_keys/${keyId}/permissions`, { permissions: ['users.export.ids'] })
    const forbidden = await track(ws.key, 'perm-user')
    expect(forbidden.status, forbidden.text).toBe(403)
    expect(forbidden.body.message).toMatch(/users\.track/)
    expect((await onB('POST', '/users/export/ids', ws.key, { external_ids: ['x'] })).status).toBe(201)

    await admin('PUT', `/admin/v1/api_keys/${keyId}/permissions`, { permissions: ['users.track'] })
    expect((await track(ws.key, 'perm-user')).status).toBe(201)
    expect((await onB('POST', '/users/export/ids', ws.key, { external_ids: ['x'] })).status).toBe(403)
    const row = await env.ctx.pg.query('SELECT permissions FROM api_keys WHERE id = $1', [keyId])
    expect(row.rows[0].permissions).toEqual(['users.track'])
  })

  it('a lowered rate limit: 429 at the new limit, a raised one in force as well', async () => {
    const ws = await env.workspace()
    const status = () => onB('GET', `/requests/${randomUUID()}`, ws.key)
    expect((await status()).headers.get('x-ratelimit-limit')).toBe('250000')

    await admin('PUT', `/admin/v1/workspaces/${ws.id}/rate_limits`, { default_per_hour: 5 })
    const seen: [number, string | null][] = []
    for (let i = 0; i < 7; i++) {
      const r = await status()
      seen.push([r.status, r.headers.get('x-ratelimit-remaining')])
    }
    expect(seen).toEqual([[404, '4'], [404, '3'], [404, '2'], [404, '1'], [404, '0'], [429, '0'], [429, '0']])

    await admin('PUT', `/admin/v1/workspaces/${ws.id}/rate_limits`, { default_per_hour: 1000 })
    const raised = await status()
    expect(raised.status).toBe(404)
    expect(raised.headers.get('x-ratelimit-limit')).toBe('1000')
  })

  it('a blocked id: the fatal error of interface.md section 7, nothing written; unblocked: accepted', async () => {
    const ws = await env.workspace()
    expect((await track(ws.key, 'dummy-1', { first_name: 'Real' })).status).toBe(201)

    await admin('PUT', `/admin/v1/workspaces/${ws.id}/blocked_external_ids`, { external_ids: ['dummy-1', 'dummy-2'] })
    const refused = await onB('POST', '/users/track', ws.key, {
      attributes: [{ external_id: 'someone-else', first_name: 'X' }],
      events: [{ external_id: 'dummy-1', name: 'opened', time: new Date().toISOString() }],
    })
    expect(refused.status, refused.text).toBe(400)
    expect(refused.body).toEqual({
      message: 'provided external_id is blacklisted and disallowed',
      errors: ['provided external_id is blacklisted and disallowed'],
    })
    expect((await track(ws.key, 'dummy-2')).status).toBe(400)

    await admin('PUT', `/admin/v1/workspaces/${ws.id}/blocked_external_ids`, { external_ids: [] })
    await env.writeAndWait(ws.key, '/users/track', { attributes: [{ external_id: 'dummy-1', last_name: 'Unblocked' }] })
    expect(await readBack(ws.key, 'dummy-1')).toMatchObject({ first_name: 'Real', last_name: 'Unblocked' })
    expect((await env.readUsers(ws.key, { external_ids: ['someone-else'] })).users).toEqual([])
  })

  it('a revoked SCIM token: 401', async () => {
    const t = await admin('POST', '/admin/v1/scim_tokens', { request_origin: 'idp.example' })
    const scim = () => request(b.baseUrl, 'GET', '/scim/v2/Users', { token: t.body.token, headers: { 'x-request-origin': 'idp.example' } })
    expect((await scim()).status).toBe(200)

    const r = await env.admin('DELETE', `/admin/v1/scim_tokens/${t.body.id}`)
    expect(r.status).toBe(204)
    const refused = await scim()
    expect(refused.status).toBe(401)
    expect(refused.body.detail).toBe('invalid SCIM token')
    expect((await env.admin('DELETE', `/admin/v1/scim_tokens/${t.body.id}`)).status).toBe(404)
  })
})

/** The operator CLI against process A, as a person at a shell runs it. */
const cli = (...args: string[]) => runCli([...args, '--url', env.baseUrl, '--admin-token', env.adminToken, '--json'])

describe('the same changes made with the CLI hold on the next request to process B', () => {
  it('rate limits, blocked ids, permissions, key and SCIM token revocation', async () => {
    const ws = await env.workspace()
    const status = () => onB('GET', `/requests/${randomUUID()}`, ws.key)
    expect((await track(ws.key, 'cli-dummy')).status).toBe(201)
    expect((await status()).status).toBe(404)

    expect((await cli('rate-limits', 'set', ws.id, '--default-per-hour', '2')).code).toBe(0)
    expect([(await status()).status, (await status()).status, (await status()).status]).toEqual([404, 404, 429])

    expect((await cli('blocked-ids', 'set', ws.id, 'cli-dummy')).code).toBe(0)
    const blocked = await track(ws.key, 'cli-dummy')
    expect(blocked.status).toBe(400)
    expect(blocked.body.message).toBe('provided external_id is blacklisted and disallowed')

    const keyId = await keyIdOf(ws.id)
    expect((await cli('key', 'set-permissions', keyId, '--permissions', 'users.export.ids')).code).toBe(0)
    expect((await track(ws.key, 'cli-other')).status).toBe(403)

    expect((await cli('key', 'revoke', keyId)).code).toBe(0)
    expect((await track(ws.key, 'cli-other')).status).toBe(401)

    const t = await admin('POST', '/admin/v1/scim_tokens', { request_origin: 'cli.example' })
    const scim = () => request(b.baseUrl, 'GET', '/scim/v2/Users', { token: t.body.token, headers: { 'x-request-origin': 'cli.example' } })
    expect((await scim()).status).toBe(200)
    const revoked = await cli('scim-token', 'revoke', t.body.id)
    expect(revoked.code, revoked.stderr).toBe(0)
    expect(JSON.parse(revoked.stdout)).toEqual({ id: t.body.id, revoked: true })
    expect((await scim()).status).toBe(401)
  })
})

describe('the cost of coherence', () => {
  it('sends no Postgres query per request once warm, also for a workspace that blocks ids', async () => {
    const ws = await env.workspace()
    await admin('PUT', `/admin/v1/workspaces/${ws.id}/blocked_external_ids`, { external_ids: ['nobody-real'] })
    expect((await track(ws.key, 'warm')).status).toBe(201)
    const before = b.pgQueries()
    const answers: HttpResult[] = []
    for (let i = 0; i < 20; i++) answers.push(await track(ws.key, `cost-${i}`))
    expect(answers.map((r) => r.status)).toEqual(Array(20).fill(201))
    expect(b.pgQueries() - before).toBe(0)
  })
})
