import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { request, startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env.close()
})

describe('operator API', () => {
  it('refuses a missing or wrong admin token with 401 JSON', async () => {
    const none = await request(env.baseUrl, 'POST', '/admin/v1/workspaces', { body: { name: 'x' } })
    expect(none.status).toBe(401)
    expect(none.body.message).toMatch(/admin token/)
    const wrong = await request(env.baseUrl, 'POST', '/admin/v1/workspaces', { token: 'nope', body: { name: 'x' } })
    expect(wrong.status).toBe(401)
  })

  it('creates a workspace once; the same name again is 409', async () => {
    const a = await env.admin('POST', '/admin/v1/workspaces', { name: 'acme' })
    expect(a.status).toBe(201)
    expect(a.body).toEqual({ id: expect.any(String), name: 'acme' })
    const b = await env.admin('POST', '/admin/v1/workspaces', { name: 'acme' })
    expect(b.status).toBe(409)
    expect(b.body.message).toMatch(/acme/)
  })

  it('validates bodies with a 400 naming the field', async () => {
    const r = await env.admin('POST', '/admin/v1/workspaces', { name: 7 })
    expect(r.status).toBe(400)
    expect(r.body.message).toMatch(/^name:/)
    const ws = await env.admin('POST', '/admin/v1/workspaces', { name: 'perm-check' })
    const bad = await env.admin('POST', `/admin/v1/workspaces/${ws.body.id}/api_keys`, { name: 'k', permissions: ['users.fly'] })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toMatch(/^permissions\.0:/)
  })

  it('answers 404 for unknown workspaces and keys', async () => {
    const r = await env.admin('POST', '/admin/v1/workspaces/nope/api_keys', { name: 'k', permissions: ['users.track'] })
    expect(r.status).toBe(404)
    const d = await env.admin('DELETE', '/admin/v1/api_keys/00000000-0000-0000-0000-000000000000')
    expect(d.status).toBe(404)
  })

  it('creates subscription groups and segments, 409 on duplicate names, 400 on a bad filter', async () => {
    const ws = await env.workspace()
    const g = await env.admin('POST', `/admin/v1/workspaces/${ws.id}/subscription_groups`, { name: 'news', channel: 'email' })
    expect(g.status).toBe(201)
    expect(g.body).toEqual({ subscription_group_id: expect.any(String), name: 'news', channel: 'email' })
    expect((await env.admin('POST', `/admin/v1/workspaces/${ws.id}/subscription_groups`, { name: 'news', channel: 'sms' })).status).toBe(409)
    expect((await env.admin('POST', `/admin/v1/workspaces/${ws.id}/subscription_groups`, { name: 'x', channel: 'pigeon' })).status).toBe(400)

    const s = await env.admin('POST', `/admin/v1/workspaces/${ws.id}/segments`, { name: 'all', filter: { all: [] } })
    expect(s.status).toBe(201)
    const got = await env.admin('GET', `/admin/v1/workspaces/${ws.id}/segments/${s.body.segment_id}`)
    expect(got.status).toBe(200)
    expect(got.body).toMatchObject({ segment_id: s.body.segment_id, name: 'all', filter: { all: [] }, size: 0 })
    const bad = await env.admin('POST', `/admin/v1/workspaces/${ws.id}/segments`, { name: 'b', filter: { field: 'email', op: 'like', value: 'x' } })
    expect(bad.status).toBe(400)
    expect((await env.admin('POST', `/admin/v1/workspaces/${ws.id}/segments`, { name: 'all', filter: { all: [] } })).status).toBe(409)
  })

  it('stores export storage without echoing the secret, and removes it', async () => {
    const ws = await env.workspace()
    const body = { bucket: 'my-bucket', region: 'us-east-1', endpoint: 'http://127.0.0.1:9', force_path_style: true, access_key_id: 'A', secret_access_key: 'S' }
    const put = await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/export_storage`, body)
    expect(put.status).toBe(200)
    expect(put.body.secret_access_key).toBeUndefined()
    const row = await env.ctx.pg.query('SELECT export_storage FROM workspaces WHERE id = $1', [ws.id])
    expect(row.rows[0].export_storage).toEqual(body)
    expect((await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/export_storage`, { ...body, bucket: 'Bad_Bucket' })).status).toBe(400)
    expect((await env.admin('DELETE', `/admin/v1/workspaces/${ws.id}/export_storage`)).status).toBe(204)
    const after = await env.ctx.pg.query('SELECT export_storage FROM workspaces WHERE id = $1', [ws.id])
    expect(after.rows[0].export_storage).toBeNull()
  })

  it('sets the global control group percent and rate limits, reporting the limits in force', async () => {
    const ws = await env.workspace()
    const g = await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/global_control_group`, { percent: 12.5 })
    expect(g.status).toBe(200)
    expect(g.body.random_bucket_below).toBe(1250)
    expect((await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/global_control_group`, { percent: 101 })).status).toBe(400)
    const rl = await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/rate_limits`, {
      default_per_hour: 1000,
      endpoints: { '/users/merge': { limit: 7, window_seconds: 30 } },
    })
    expect(rl.status).toBe(200)
    expect(rl.body.in_force['/users/identity']).toEqual({ paths: ['/users/merge', '/users/identify', '/users/delete', '/users/alias/new', '/users/alias/update'], limit: 7, window_seconds: 30 })
    expect(rl.body.in_force.default.limit).toBe(1000)
    expect(rl.body.in_force['/users/track']).toMatchObject({ limit: 3000, window_seconds: 3 })
    const bad = await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/rate_limits`, { endpoints: { '/nope': { limit: 1, window_seconds: 1 } } })
    expect(bad.status).toBe(400)
  })

  it('creates SCIM tokens stored only as hashes', async () => {
    const t = await env.admin('POST', '/admin/v1/scim_tokens', { request_origin: 'corp.example' })
    expect(t.status).toBe(201)
    const rows = await env.ctx.pg.query('SELECT token_hash, request_origin FROM scim_tokens WHERE id = $1', [t.body.id])
    expect(rows.rows[0].request_origin).toBe('corp.example')
    expect(rows.rows[0].token_hash.toString('utf8')).not.toContain(t.body.token)
  })
})
