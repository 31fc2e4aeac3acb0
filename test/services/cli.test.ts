import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Permissions } from '../../shared/domain/permissions.js'
import { cleanEnv, runCli } from '../helpers/cli.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'

let env: TestEnv
/** The CLI against the test service, asking for JSON. */
const cli = (...args: string[]) => runCli([...args, '--url', env.baseUrl, '--admin-token', env.adminToken, '--json'])

/** Workspaces for the other commands come straight from the operator API: one child process less each. */
async function newWorkspace(): Promise<string> {
  const r = await env.admin('POST', '/admin/v1/workspaces', { name: `cli-${randomUUID().slice(0, 8)}` })
  expect(r.status).toBe(201)
  return r.body.id
}

beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env.close()
})

describe('command-line tool', () => {
  it('creates a workspace, and reports a duplicate name with the server message and a non-zero exit', async () => {
    const r = await cli('workspace', 'create', 'cli-acme')
    expect(r.code).toBe(0)
    expect(r.json).toEqual({ id: expect.any(String), name: 'cli-acme' })
    const row = await env.ctx.pg.query('SELECT name FROM workspaces WHERE id = $1', [r.json.id])
    expect(row.rows[0].name).toBe('cli-acme')

    const again = await cli('workspace', 'create', 'cli-acme')
    expect(again.code).toBe(1)
    expect(again.stderr).toContain('409: a workspace named cli-acme already exists')
    expect(again.stdout).toBe('')
  })

  it('creates keys with all permissions by default or the listed ones, and revokes them', async () => {
    const ws = await newWorkspace()
    const all = await cli('key', 'create', ws, '--name', 'ops')
    expect(all.code).toBe(0)
    expect(all.json.permissions).toEqual([...Permissions])
    const some = await cli('key', 'create', ws, '--name', 'tracker', '--permissions', 'users.track, email.status')
    expect(some.code).toBe(0)
    const rows = await env.ctx.pg.query('SELECT name, permissions, revoked_at FROM api_keys WHERE id = $1', [some.json.id])
    expect(rows.rows[0]).toEqual({ name: 'tracker', permissions: ['users.track', 'email.status'], revoked_at: null })
    // The printed key authenticates: an unknown request id is 404, not 401.
    expect((await env.call('GET', `/requests/${randomUUID()}`, { key: some.json.key })).status).toBe(404)

    const revoke = await cli('key', 'revoke', some.json.id)
    expect(revoke.code).toBe(0)
    expect(revoke.json).toEqual({ id: some.json.id, revoked: true })
    const after = await env.ctx.pg.query('SELECT revoked_at FROM api_keys WHERE id = $1', [some.json.id])
    expect(after.rows[0].revoked_at).toBeInstanceOf(Date)
  })

  it('refuses an unknown permission before calling the server', async () => {
    const ws = await newWorkspace()
    const r = await cli('key', 'create', ws, '--name', 'bad', '--permissions', 'users.fly')
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain('unknown permission users.fly')
    const rows = await env.ctx.pg.query('SELECT count(*)::int AS n FROM api_keys WHERE workspace_id = $1', [ws])
    expect(rows.rows[0].n).toBe(0)
  })

  it('creates a SCIM token bound to its origin', async () => {
    const r = await cli('scim-token', 'create', '--origin', 'idp.example')
    expect(r.code).toBe(0)
    expect(r.json.token).toEqual(expect.any(String))
    const row = await env.ctx.pg.query('SELECT request_origin FROM scim_tokens WHERE id = $1', [r.json.id])
    expect(row.rows[0].request_origin).toBe('idp.example')
  })

  it('creates a subscription group, and passes on the 400 for a bad channel', async () => {
    const ws = await newWorkspace()
    const r = await cli('subscription-group', 'create', ws, '--name', 'news', '--channel', 'sms')
    expect(r.code).toBe(0)
    const row = await env.ctx.pg.query('SELECT workspace_id, name, channel FROM subscription_groups WHERE id = $1', [r.json.subscription_group_id])
    expect(row.rows[0]).toEqual({ workspace_id: ws, name: 'news', channel: 'sms' })

    const bad = await cli('subscription-group', 'create', ws, '--name', 'x', '--channel', 'pigeon')
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/400: channel:/)
  })

  it('creates segments from inline JSON or a file and reads them back', async () => {
    const ws = await newWorkspace()
    const filter = { all: [{ field: 'country', op: 'eq', value: 'FR' }] }
    const inline = await cli('segment', 'create', ws, '--name', 'french', '--filter', JSON.stringify(filter))
    expect(inline.code).toBe(0)
    const got = await cli('segment', 'get', ws, inline.json.segment_id)
    expect(got.code).toBe(0)
    expect(got.json).toMatchObject({ segment_id: inline.json.segment_id, name: 'french', filter, size: 0 })

    const dir = mkdtempSync(path.join(os.tmpdir(), 'uds-cli-'))
    try {
      const file = path.join(dir, 'filter.json')
      writeFileSync(file, JSON.stringify({ random_bucket: { lt: 500 } }))
      const fromFile = await cli('segment', 'create', ws, '--name', 'sample', '--filter-file', file)
      expect(fromFile.code).toBe(0)
      const row = await env.ctx.pg.query('SELECT filter FROM segments WHERE id = $1', [fromFile.json.segment_id])
      expect(row.rows[0].filter).toEqual({ random_bucket: { lt: 500 } })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }

    const notJson = await cli('segment', 'create', ws, '--name', 'typo', '--filter', '{all: []}')
    expect(notJson.code).toBe(1)
    expect(notJson.stderr).toContain('--filter is not valid JSON')
    const badShape = await cli('segment', 'create', ws, '--name', 'typo', '--filter', '{"field":"email","op":"like"}')
    expect(badShape.code).toBe(1)
    expect(badShape.stderr).toMatch(/400: /)
    const names = await env.ctx.pg.query('SELECT name FROM segments WHERE workspace_id = $1 ORDER BY name', [ws])
    expect(names.rows.map((r) => r.name)).toEqual(['french', 'sample'])
  })

  it('sets the global control group', async () => {
    const ws = await newWorkspace()
    const r = await cli('global-control-group', 'set', ws, '7.5')
    expect(r.code).toBe(0)
    expect(r.json.random_bucket_below).toBe(750)
    const row = await env.ctx.pg.query('SELECT global_control_percent::float8 AS p FROM workspaces WHERE id = $1', [ws])
    expect(row.rows[0].p).toBe(7.5)
    const bad = await cli('global-control-group', 'set', ws, 'lots')
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain('expected a number from 0 to 100')
  })

  it('sets and removes export storage, taking the secret from the environment', async () => {
    const ws = await newWorkspace()
    const args = ['export-storage', 'set', ws, '--bucket', 'exports-bucket', '--region', 'eu-west-1', '--endpoint', 'http://127.0.0.1:9000']
    const r = await runCli(
      [...args, '--force-path-style', '--url', env.baseUrl, '--admin-token', env.adminToken, '--json'],
      cleanEnv({ AWS_ACCESS_KEY_ID: 'AKID', AWS_SECRET_ACCESS_KEY: 'SECRET' }),
    )
    expect(r.code).toBe(0)
    expect(r.stdout).not.toContain('SECRET')
    const row = await env.ctx.pg.query('SELECT export_storage FROM workspaces WHERE id = $1', [ws])
    expect(row.rows[0].export_storage).toEqual({
      bucket: 'exports-bucket',
      region: 'eu-west-1',
      endpoint: 'http://127.0.0.1:9000',
      force_path_style: true,
      access_key_id: 'AKID',
      secret_access_key: 'SECRET',
    })

    const removed = await cli('export-storage', 'remove', ws)
    expect(removed.code).toBe(0)
    const after = await env.ctx.pg.query('SELECT export_storage FROM workspaces WHERE id = $1', [ws])
    expect(after.rows[0].export_storage).toBeNull()
  })

  it('sets rate limits from --default-per-hour and repeated --endpoint', async () => {
    const ws = await newWorkspace()
    const r = await cli('rate-limits', 'set', ws, '--default-per-hour', '900', '--endpoint', '/users/track=10/2', '--endpoint', '/users/export/ids=5/60')
    expect(r.code).toBe(0)
    expect(r.json.in_force['/users/track']).toMatchObject({ limit: 10, window_seconds: 2 })
    const row = await env.ctx.pg.query('SELECT rate_limits FROM workspaces WHERE id = $1', [ws])
    expect(row.rows[0].rate_limits).toEqual({
      default_per_hour: 900,
      endpoints: { '/users/track': { limit: 10, window_seconds: 2 }, '/users/export/ids': { limit: 5, window_seconds: 60 } },
    })
    const unknownPath = await cli('rate-limits', 'set', ws, '--endpoint', '/nope=1/1')
    expect(unknownPath.code).toBe(1)
    expect(unknownPath.stderr).toMatch(/400: endpoints/)
  })

  it('replaces the blocked external ids', async () => {
    const ws = await newWorkspace()
    expect((await cli('blocked-ids', 'set', ws, 'dummy-1', 'dummy-2')).code).toBe(0)
    const r = await cli('blocked-ids', 'set', ws, 'dummy-2', 'dummy-3')
    expect(r.json).toEqual({ external_ids: ['dummy-2', 'dummy-3'] })
    const rows = await env.ctx.pg.query('SELECT external_id FROM blocked_external_ids WHERE workspace_id = $1 ORDER BY external_id', [ws])
    expect(rows.rows.map((x) => x.external_id)).toEqual(['dummy-2', 'dummy-3'])
  })

  it('shows an export, and 404s an unknown one', async () => {
    const ws = await newWorkspace()
    const id = randomUUID()
    await env.ctx.pg.query(
      `INSERT INTO exports (id, workspace_id, kind, status, request, object_prefix, users_exported, files)
       VALUES ($1, $2, 'global_control_group', 'done', '{}', 'p', 3, '["a.zip"]')`,
      [id, ws],
    )
    const r = await cli('export', 'get', ws, id)
    expect(r.code).toBe(0)
    expect(r.json).toMatchObject({ id, kind: 'global_control_group', status: 'done', users_exported: 3, files: ['a.zip'] })

    const missing = await cli('export', 'get', ws, randomUUID())
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain('404: unknown export')
  })

  it('prints for people by default, and finds the service and token through PUBLIC_URL and DATA_DIR', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'uds-cli-data-'))
    try {
      writeFileSync(path.join(dataDir, 'admin-token'), `${env.adminToken}\n`)
      const r = await runCli(['workspace', 'create', 'cli-human'], cleanEnv({ PUBLIC_URL: env.baseUrl, DATA_DIR: dataDir }))
      expect(r.code).toBe(0)
      const row = await env.ctx.pg.query("SELECT id FROM workspaces WHERE name = 'cli-human'")
      expect(r.stdout).toContain('created workspace cli-human')
      expect(r.stdout).toContain(row.rows[0].id)
      expect(() => JSON.parse(r.stdout)).toThrow()
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })

  it('names the wrong admin token and an unreachable service', async () => {
    const wrong = await runCli(['workspace', 'create', 'x', '--url', env.baseUrl, '--admin-token', 'wrong'], cleanEnv())
    expect(wrong.code).toBe(1)
    expect(wrong.stderr).toContain('401: missing or wrong admin token')
    const away = await runCli(['workspace', 'create', 'x', '--url', 'http://127.0.0.1:9', '--admin-token', 'x'], cleanEnv())
    expect(away.code).toBe(1)
    expect(away.stderr).toContain('cannot reach http://127.0.0.1:9')
  })
})
