import { randomUUID } from 'node:crypto'
import { existsSync, readdirSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ExportableFields } from '../../../shared/domain/user-record.js'
import { downloadKey, downloadUrl } from '../../../shared/storage/download-link.js'
import { localExportDir } from '../../../shared/storage/export-layout.js'
import { purgeExpiredExportFiles } from '../../../workers/export/expired-files.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'
import { until } from '../../helpers/wait.js'
import { unzip } from '../../helpers/zip.js'

const TTL_SECONDS = 60
let env: TestEnv

beforeAll(async () => {
  // No workers at first: exports stay queued, so the one-per-segment and per-workspace limits can be seen.
  env = await startTestEnv({ env: { EXPORT_URL_TTL_SECONDS: String(TTL_SECONDS) } })
})
afterAll(async () => {
  await env.close()
})

async function segment(workspaceId: string, name = `s-${Math.random()}`): Promise<string> {
  const r = await env.admin('POST', `/admin/v1/workspaces/${workspaceId}/segments`, { name, filter: { all: [] } })
  expect(r.status).toBe(201)
  return r.body.segment_id
}

const exportSegment = (key: string, body: unknown, headers?: Record<string, string>) => env.call('POST', '/users/export/segment', { key, body, headers })

describe('export request validation', () => {
  it('names the problem in a 400', async () => {
    const ws = await env.workspace()
    const id = await segment(ws.id)
    const cases: [unknown, RegExp][] = [
      [{ segment_id: id }, /^fields_to_export: is required/],
      [{ segment_id: id, fields_to_export: [] }, /^fields_to_export: is required: name at least one field/],
      [{ segment_id: id, fields_to_export: ['email', 'shoe_size'] }, /^fields_to_export\.1: unknown field "shoe_size"; expected one of apps, /],
      [{ segment_id: id, fields_to_export: ['email'], custom_attributes_to_export: Array.from({ length: 501 }, (_, i) => `a${i}`) }, /^custom_attributes_to_export: may name at most 500 custom attributes/],
      [{ segment_id: id, fields_to_export: ['email'], output_format: 'tar' }, /^output_format: must be zip or gzip/],
      [{ segment_id: id, fields_to_export: ['email'], callback_endpoint: 'ftp://example.com/x' }, /^callback_endpoint: must be an http or https URL/],
      [{ segment_id: id, fields_to_export: ['email'], callback_endpoint: 'not a url' }, /^callback_endpoint: must be an http or https URL/],
      [{ fields_to_export: ['email'] }, /^segment_id: is required/],
      [{ segment_id: id, fields_to_export: ['email'], colour: 'red' }, /Unrecognized key: "colour"/],
    ]
    for (const [body, message] of cases) {
      const r = await exportSegment(ws.key, body)
      expect(r.status, JSON.stringify(body)).toBe(400)
      expect(r.body.message).toMatch(message)
    }
    const gcg = await env.call('POST', '/users/export/global_control_group', { key: ws.key, body: { segment_id: id, fields_to_export: ['email'] } })
    expect(gcg.status).toBe(400)
    expect(gcg.body.message).toMatch(/Unrecognized key: "segment_id"/)
  })

  it('answers 404 for an unknown segment and 403 without the permission', async () => {
    const ws = await env.workspace()
    const unknown = await exportSegment(ws.key, { segment_id: 'no-such-segment', fields_to_export: ['email'] })
    expect(unknown.status).toBe(404)
    expect(unknown.body.message).toBe('unknown segment_id no-such-segment')
    const other = await env.workspace()
    const foreign = await exportSegment(ws.key, { segment_id: await segment(other.id), fields_to_export: ['email'] })
    expect(foreign.status).toBe(404)
    const limited = await env.workspace(['users.track'])
    const denied = await exportSegment(limited.key, { segment_id: 'x', fields_to_export: ['email'] })
    expect(denied.status).toBe(403)
  })
})

describe('callback_endpoint with CALLBACK_ALLOW_PRIVATE off', () => {
  // A service of its own, as deployed: private callback targets refused. No worker ever runs on its
  // queues, so an accepted callback is never delivered, and no name is resolved but localhost.
  let strict: TestEnv
  beforeAll(async () => {
    strict = await startTestEnv({ env: { CALLBACK_ALLOW_PRIVATE: 'false' } })
  })
  afterAll(async () => {
    await strict?.close()
  })

  it('refuses a target that is not a public address with a 400 naming callback_endpoint, and stores nothing', async () => {
    const ws = await strict.workspace()
    const seg = await strict.admin('POST', `/admin/v1/workspaces/${ws.id}/segments`, { name: 'all', filter: { all: [] } })
    const cases: [string, RegExp][] = [
      ['http://100.64.0.1/', /^callback_endpoint: 100\.64\.0\.1 is in the shared address space of RFC 6598; callbacks go to public addresses only unless CALLBACK_ALLOW_PRIVATE is true$/],
      ['http://100.100.100.200/latest/meta-data/', /^callback_endpoint: 100\.100\.100\.200 is in the shared address space/],
      ['http://169.254.169.254/', /^callback_endpoint: 169\.254\.169\.254 is a link-local address/],
      ['http://224.0.0.1/', /^callback_endpoint: 224\.0\.0\.1 is a multicast address; no callback can be delivered there$/],
      ['http://255.255.255.255/', /^callback_endpoint: 255\.255\.255\.255 is the broadcast address/],
      ['http://198.18.0.1/', /^callback_endpoint: 198\.18\.0\.1 is in a reserved, benchmarking or documentation range/],
      ['http://[64:ff9b::a00:1]/', /^callback_endpoint: 64:ff9b::a00:1 is a NAT64 address/],
      ['http://[2002:a00:1::1]/', /^callback_endpoint: 2002:a00:1::1 is a 6to4 address/],
      ['http://[::ffff:127.0.0.1]/', /^callback_endpoint: ::ffff:7f00:1 is a loopback address/],
      ['http://localhost:9/hook', /^callback_endpoint: localhost resolves to 127\.0\.0\.1, a loopback address/],
    ]
    for (const [callback_endpoint, message] of cases) {
      const r = await strict.call('POST', '/users/export/segment', { key: ws.key, body: { segment_id: seg.body.segment_id, fields_to_export: ['email'], callback_endpoint } })
      expect(r.status, callback_endpoint).toBe(400)
      expect(r.body.message, callback_endpoint).toMatch(message)
      expect(r.body.errors).toEqual([r.body.message])
      const gcg = await strict.call('POST', '/users/export/global_control_group', { key: ws.key, body: { fields_to_export: ['email'], callback_endpoint } })
      expect(gcg.status, callback_endpoint).toBe(400)
      expect(gcg.body.message).toBe(r.body.message)
    }
    // Nothing was recorded or queued: the segment is free for the next export.
    expect(await strict.ctx.queues.get('export').getJobCounts('waiting')).toEqual({ waiting: 0 })
    const accepted = await strict.call('POST', '/users/export/segment', { key: ws.key, body: { segment_id: seg.body.segment_id, fields_to_export: ['email'], callback_endpoint: 'https://1.1.1.1/hook' } })
    expect(accepted.status).toBe(201)
    expect(await strict.ctx.queues.get('export').getJobCounts('waiting')).toEqual({ waiting: 1 })
  })
})

describe('export acceptance', () => {
  it('answers success with the object prefix and a download URL only without storage credentials', async () => {
    const ws = await env.workspace()
    const id = await segment(ws.id)
    const r = await exportSegment(ws.key, { segment_id: id, fields_to_export: ['email', 'custom_attributes'] })
    expect(r.status).toBe(201)
    expect(r.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
    expect(r.body).toEqual({ message: 'success', object_prefix: expect.stringMatching(new RegExp(`^segment-export/${id}/\\d{4}-\\d{2}-\\d{2}/[0-9a-f-]{36}-\\d{10}$`)), url: expect.any(String), export_id: expect.any(String) })
    const day = new Date().toISOString().slice(0, 10)
    expect(r.body.object_prefix.split('/')[2]).toBe(day)
    const stamp = Number(r.body.object_prefix.split('-').pop())
    expect(Math.abs(stamp - Date.now() / 1000)).toBeLessThan(60)
    expect(r.body.url).toBe(downloadUrl(env.ctx.config.PUBLIC_URL, downloadKey(env.adminToken), r.body.export_id))

    const status = await env.admin('GET', `/admin/v1/workspaces/${ws.id}/exports/${r.body.export_id}`)
    expect(status.body).toMatchObject({ id: r.body.export_id, kind: 'segment', segment_id: id, status: 'queued', users_exported: 0, files: [] })

    const withStorage = await env.workspace()
    const storage = { bucket: 'some-bucket', region: 'us-east-1', endpoint: 'http://127.0.0.1:9', force_path_style: true, access_key_id: 'A', secret_access_key: 'S' }
    await env.admin('PUT', `/admin/v1/workspaces/${withStorage.id}/export_storage`, storage)
    const gcg = await env.call('POST', '/users/export/global_control_group', { key: withStorage.key, body: { fields_to_export: ['email'], output_format: 'gzip' } })
    expect(gcg.status).toBe(201)
    expect(gcg.body.url).toBeUndefined()
    expect(gcg.body.object_prefix).toMatch(new RegExp(`^global-control-group-export/${withStorage.id}/`))
    // Queued toward a bucket that does not exist: once workers start, this export fails on its own.
    await env.admin('DELETE', `/admin/v1/workspaces/${withStorage.id}/export_storage`)
  })

  it('answers 429 to a second export of a segment while the first is queued', async () => {
    const ws = await env.workspace()
    const id = await segment(ws.id)
    const first = await exportSegment(ws.key, { segment_id: id, fields_to_export: ['email'] })
    expect(first.status).toBe(201)
    const second = await exportSegment(ws.key, { segment_id: id, fields_to_export: ['email'] })
    expect(second.status).toBe(429)
    expect(second.body.message).toBe(`an export of segment ${id} is already queued or running; retry when it is done`)
    expect((await exportSegment(ws.key, { segment_id: await segment(ws.id), fields_to_export: ['email'] })).status).toBe(201)
  })

  it('replays the first answer for a repeated Idempotency-Key instead of a 429', async () => {
    const ws = await env.workspace()
    const body = { segment_id: await segment(ws.id), fields_to_export: ['email'] }
    const first = await exportSegment(ws.key, body, { 'Idempotency-Key': 'export-once' })
    const again = await exportSegment(ws.key, body, { 'Idempotency-Key': 'export-once' })
    expect(again.status).toBe(201)
    expect(again.body).toEqual(first.body)
  })

  it('answers 429 past 100 exports queued or running in one workspace', async () => {
    const ws = await env.workspace()
    const ids = await Promise.all(Array.from({ length: 100 }, (_, i) => segment(ws.id, `limit-${i}`)))
    const statuses = await Promise.all(ids.map(async (id) => (await exportSegment(ws.key, { segment_id: id, fields_to_export: ['email'] })).status))
    expect(statuses.filter((s) => s === 201)).toHaveLength(100)
    const over = await env.call('POST', '/users/export/global_control_group', { key: ws.key, body: { fields_to_export: ['email'] } })
    expect(over.status).toBe(429)
    expect(over.body.message).toMatch(/already has 100 exports queued or running/)
  })
})

describe('download link', () => {
  it('refuses a bad signature with 403 and a queued export with 409', async () => {
    const ws = await env.workspace()
    const r = await exportSegment(ws.key, { segment_id: await segment(ws.id), fields_to_export: ['email'] })
    const tampered = r.body.url.replace(/signature=.{4}/, 'signature=AAAA')
    expect((await fetch(tampered)).status).toBe(403)
    expect((await fetch(r.body.url.split('?')[0])).status).toBe(403)
    const notReady = await fetch(r.body.url)
    expect(notReady.status).toBe(409)
    expect((await notReady.json()).message).toMatch(/not finished yet \(status queued\)/)
    // The signature covers the export id: another id, a traversal among them, is refused with it
    // (or matches no route at all once the URL's dot segments are resolved).
    const signature = new URL(r.body.url).searchParams.get('signature')!
    for (const [id, status] of [['..%2F..%2Fadmin-token', 403], [`${r.body.export_id}%2F..`, 403], [randomUUID(), 403], ['%2E%2E', 404]] as const) {
      expect((await fetch(`${env.baseUrl}/exports/${id}/download?signature=${encodeURIComponent(signature)}`)).status, id).toBe(status)
    }
  })
})

describe('end to end: tracked users exported, compared with /users/export/ids', () => {
  const USERS = 12_000
  const BATCH = 75

  it('exports 12,000 tracked users as three files whose records match /users/export/ids, until the link expires', async () => {
    await env.startWorkers(['track', 'export', 'callback'])
    const ws = await env.workspace()
    const time = new Date(Date.now() - 3600_000).toISOString()
    const requests: Record<string, unknown>[] = []
    for (let start = 0; start < USERS; start += BATCH) {
      const ids = Array.from({ length: BATCH }, (_, i) => `e2e-${start + i}`)
      requests.push({
        attributes: ids.map((external_id, i) => ({ external_id, first_name: `N${start + i}`, email: `${external_id}@example.com`, country: 'FR', tier: (start + i) % 3, tags: ['a', `t${i % 4}`] })),
        events: ids.slice(0, 10).map((external_id) => ({ external_id, app_id: 'app', name: 'opened', time })),
        purchases: ids.slice(0, 5).map((external_id) => ({ external_id, app_id: 'app', product_id: 'sku', currency: 'USD', price: 2.5, quantity: 1, time })),
      })
    }
    for (let i = 0; i < requests.length; i += 20) {
      await Promise.all(
        requests.slice(i, i + 20).map(async (body) => {
          const r = await env.call('POST', '/users/track', { key: ws.key, body })
          expect(r.status, r.text).toBe(201)
          expect((await env.waitForRequest(ws.key, r.headers.get('x-request-id')!, 120_000)).status).toBe('done')
        }),
      )
    }

    const segmentId = await segment(ws.id)
    const fields = [...ExportableFields]
    const r = await exportSegment(ws.key, { segment_id: segmentId, fields_to_export: fields })
    expect(r.status).toBe(201)
    expect((await env.waitForRequest(ws.key, r.headers.get('x-request-id')!, 120_000)).status).toBe('done')
    const download = await fetch(r.body.url)
    expect(download.status).toBe(200)
    const entries = await unzip(Buffer.from(await download.arrayBuffer()))
    expect([...entries.keys()]).toEqual(['users-00000.json', 'users-00001.json', 'users-00002.json'])
    const files = [...entries.values()].map((text) => text.split('\n').filter(Boolean).map((l) => JSON.parse(l)))
    expect(files.map((f) => f.length)).toEqual([5000, 5000, 2000])

    const exported = new Map(files.flat().map((u) => [u.external_id as string, u]))
    expect(exported.size).toBe(USERS)
    const ids = [...exported.keys()]
    for (let i = 0; i < ids.length; i += 50) {
      const read = await env.call('POST', '/users/export/ids', { key: ws.key, body: { external_ids: ids.slice(i, i + 50), fields_to_export: fields } })
      expect(read.status).toBe(201)
      for (const user of read.body.users) expect(exported.get(user.external_id)).toEqual(user)
    }
    expect(exported.get('e2e-0')).toMatchObject({ custom_events: [{ name: 'opened', count: 1 }], purchases: [{ name: 'sku', count: 1 }], custom_attributes: { tier: 0, tags: ['a', 't0'] } })

    // The files stay while the link is valid.
    const dir = localExportDir(env.config.DATA_DIR, r.body.object_prefix)
    expect(readdirSync(dir)).toHaveLength(3)
    await purgeExpiredExportFiles({ pg: env.ctx.pg, config: env.config })
    expect(readdirSync(dir)).toHaveLength(3)

    // The link is valid for the TTL after the export finished, then refused with 410.
    const linkStatus = async () => {
      const again = await fetch(r.body.url)
      await again.arrayBuffer()
      return again.status
    }
    expect(await until('the download link to expire', linkStatus, (status) => status !== 200, (TTL_SECONDS + 30) * 1000, 1000)).toBe(410)

    // Then its files are deleted by the sweep; the link keeps answering 410.
    expect(await purgeExpiredExportFiles({ pg: env.ctx.pg, config: env.config })).toBeGreaterThanOrEqual(1)
    expect(existsSync(dir)).toBe(false)
    const gone = await fetch(r.body.url)
    await gone.arrayBuffer()
    expect(gone.status).toBe(410)
  }, 300_000)
})
