import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { gunzipSync } from 'node:zlib'
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3'
import S3rver from 's3rver'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { insertEvents } from '../../shared/clickhouse/event-repository.js'
import { writeSnapshots } from '../../shared/clickhouse/snapshot-repository.js'
import { projectRecord, type UserRecord } from '../../shared/domain/user-record.js'
import { s3Uploader, StorageRefusedError } from '../../shared/storage/s3-uploader.js'
import { writeExportFile } from '../../workers/export/file-writer.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { localServer } from '../helpers/ports.js'
import { sleep, until } from '../helpers/wait.js'
import { unzip } from '../helpers/zip.js'

const BUCKET = 'uds-exports.test'
const S3_KEY = 'S3RVER'

let env: TestEnv
let s3rver: S3rver
let s3: S3Client
let s3Dir: string
let s3Endpoint: string

beforeAll(async () => {
  s3Dir = mkdtempSync(path.join(os.tmpdir(), 'uds-s3rver-'))
  s3rver = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: s3Dir, configureBuckets: [{ name: BUCKET, configs: [] }] })
  const { port } = await s3rver.run()
  s3Endpoint = `http://127.0.0.1:${port}`
  s3 = new S3Client({ region: 'us-east-1', endpoint: s3Endpoint, forcePathStyle: true, credentials: { accessKeyId: S3_KEY, secretAccessKey: S3_KEY } })
  env = await startTestEnv({ workers: ['export', 'callback'] })
})

afterAll(async () => {
  await env?.close()
  s3?.destroy()
  await s3rver?.close()
  rmSync(s3Dir, { recursive: true, force: true })
})

/** A workspace whose exports go to the s3rver bucket (or to `secret` as a wrong key). */
async function bucketWorkspace(secret = S3_KEY) {
  const ws = await env.workspace()
  const storage = { bucket: BUCKET, region: 'us-east-1', endpoint: s3Endpoint, force_path_style: true, access_key_id: secret, secret_access_key: secret }
  expect((await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/export_storage`, storage)).status).toBe(200)
  return ws
}

let nextProfile = 1
function seedUser(i: number, extra: Partial<UserRecord> = {}): UserRecord {
  return {
    created_at: '2024-03-01T10:00:00.000Z',
    service_id: `svc-${i}`,
    external_id: `user-${i}`,
    random_bucket: (i * 37) % 10000,
    email: `user${i}@example.com`,
    first_name: `First${i}`,
    country: 'FR',
    custom_attributes: { plan: i % 2 ? 'pro' : 'free', visits: i, secret: 'hidden' },
    ...extra,
  }
}

async function seed(workspaceId: string, records: UserRecord[]): Promise<number[]> {
  const ids = records.map(() => nextProfile++)
  for (let i = 0; i < records.length; i += 5000) {
    const batch = records.slice(i, i + 5000)
    await writeSnapshots(env.clickhouse, batch.map((record, j) => ({ workspace_id: workspaceId, profile_id: ids[i + j], version: 1, random_bucket: record.random_bucket, record })))
  }
  return ids
}

async function segment(workspaceId: string, filter: unknown): Promise<string> {
  const r = await env.admin('POST', `/admin/v1/workspaces/${workspaceId}/segments`, { name: `s-${Math.random()}`, filter })
  expect(r.status).toBe(201)
  return r.body.segment_id
}

async function exportAndWait(key: string, p: string, body: unknown) {
  const r = await env.call('POST', p, { key, body })
  expect(r.status).toBe(201)
  const done = await env.waitForRequest(key, r.headers.get('x-request-id')!, 60_000)
  return { response: r.body, request: done }
}

async function exportStatus(workspaceId: string, exportId: string) {
  return (await env.admin('GET', `/admin/v1/workspaces/${workspaceId}/exports/${exportId}`)).body
}

async function objectKeys(prefix: string): Promise<string[]> {
  const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: `${prefix}/` }))
  return (listed.Contents ?? []).map((c) => c.Key!).sort()
}

async function objectBytes(key: string): Promise<Buffer> {
  const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }))
  return Buffer.from(await got.Body!.transformToByteArray())
}

const lines = (text: string) => text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>)

describe('segment export to a bucket', () => {
  it('splits 12,000 users into three ZIP files of at most 5,000 under the documented key layout', async () => {
    const ws = await bucketWorkspace()
    const records = Array.from({ length: 12_000 }, (_, i) => seedUser(i))
    await seed(ws.id, records)
    const segmentId = await segment(ws.id, { all: [] })
    const fields = ['external_id', 'email', 'custom_attributes', 'random_bucket']
    const { response, request } = await exportAndWait(ws.key, '/users/export/segment', { segment_id: segmentId, fields_to_export: fields })
    expect(request.status).toBe('done')
    expect(response.url).toBeUndefined()
    expect(response.object_prefix).toMatch(new RegExp(`^segment-export/${segmentId}/\\d{4}-\\d{2}-\\d{2}/[0-9a-f-]{36}-\\d{10}$`))

    const keys = await objectKeys(response.object_prefix)
    expect(keys).toEqual(['users-00000.zip', 'users-00001.zip', 'users-00002.zip'].map((f) => `${response.object_prefix}/${f}`))
    const byExternalId = new Map(records.map((r) => [r.external_id, r]))
    const counts: number[] = []
    const seen = new Set<unknown>()
    for (const key of keys) {
      const entries = await unzip(await objectBytes(key))
      const name = path.basename(key).replace('.zip', '.json')
      expect([...entries.keys()]).toEqual([name])
      const users = lines(entries.get(name)!)
      counts.push(users.length)
      for (const u of users) {
        seen.add(u.external_id)
        expect(u).toEqual(projectRecord(byExternalId.get(u.external_id as string)!, { fields, now: new Date() }))
      }
    }
    expect(counts).toEqual([5000, 5000, 2000])
    expect(seen.size).toBe(12_000)

    const status = await exportStatus(ws.id, response.export_id)
    expect(status).toMatchObject({ kind: 'segment', segment_id: segmentId, status: 'done', users_exported: 12_000 })
    expect(status.files.map((f: { users: number; key: string }) => [f.users, f.key])).toEqual(keys.map((k, i) => [counts[i], k]))
  })

  it('writes gzip files and honors fields_to_export and custom_attributes_to_export field by field', async () => {
    const ws = await bucketWorkspace()
    const recent = new Date(Date.now() - 86400_000).toISOString()
    const records = [
      // A summary a snapshot stored before summaries left it: the history's replace it.
      seedUser(1, { custom_events: [{ name: 'stale', first: '2020-01-01T00:00:00.000Z', last: recent, count: 9 }] }),
      seedUser(2, { custom_attributes: { plan: 'free' } }),
      seedUser(3, { country: 'DE' }),
    ]
    const [first] = await seed(ws.id, records)
    const occurrence = (event_id: string, name: string, time: string) =>
      ({ workspace_id: ws.id, profile_id: first, event_id, kind: 'event' as const, name, app_id: 'a', time, properties: '{}', currency: '', price: 0, quantity: 0 })
    await insertEvents(env.clickhouse, [
      occurrence('e-1', 'open', recent),
      occurrence('e-2', 'open', '2020-01-01T00:00:00.000Z'),
      occurrence('e-3', 'open', '2023-05-01T00:00:00.000Z'),
      occurrence('e-4', 'open', '2023-05-02T00:00:00.000Z'),
      // Older than 90 days: counted in its summary, which the window then leaves out.
      occurrence('e-5', 'old', '2020-02-01T00:00:00.000Z'),
    ])
    // A retried insert writes an occurrence again under the same id: still counted once.
    await insertEvents(env.clickhouse, [occurrence('e-1', 'open', recent)])
    const segmentId = await segment(ws.id, { field: 'country', op: 'eq', value: 'FR' })
    const { response } = await exportAndWait(ws.key, '/users/export/segment', {
      segment_id: segmentId,
      fields_to_export: ['external_id', 'first_name', 'custom_events'],
      custom_attributes_to_export: ['plan', 'missing'],
      output_format: 'gzip',
    })
    const keys = await objectKeys(response.object_prefix)
    expect(keys).toEqual([`${response.object_prefix}/users-00000.gz`])
    const users = lines(gunzipSync(await objectBytes(keys[0])).toString('utf8'))
    expect(users).toEqual([
      { external_id: 'user-1', first_name: 'First1', custom_attributes: { plan: 'pro' }, custom_events: [{ name: 'open', first: '2020-01-01T00:00:00.000Z', last: recent, count: 4 }] },
      { external_id: 'user-2', first_name: 'First2', custom_attributes: { plan: 'free' } },
    ])
  })

  it('fails the export with the reason when the bucket refuses the upload, and frees the segment', async () => {
    const ws = await bucketWorkspace('WRONG-KEY')
    await seed(ws.id, [seedUser(1)])
    const segmentId = await segment(ws.id, { all: [] })
    const { response, request } = await exportAndWait(ws.key, '/users/export/segment', { segment_id: segmentId, fields_to_export: ['email'] })
    expect(request.status).toBe('failed')
    const status = await exportStatus(ws.id, response.export_id)
    expect(status.status).toBe('failed')
    expect(status.error).toMatch(/storage refused the upload of .*users-00000\.zip to bucket uds-exports\.test: InvalidAccessKeyId \(HTTP 403\)/)
    expect(status.finished_at).toBeDefined()
    const again = await env.call('POST', '/users/export/segment', { key: ws.key, body: { segment_id: segmentId, fields_to_export: ['email'] } })
    expect(again.status).toBe(201)
  })
})

describe('global control group export', () => {
  it('exports exactly the users whose random bucket is below percent * 100, with the fields up to apps', async () => {
    const ws = await bucketWorkspace()
    const buckets = [0, 999, 1000, 2499, 2500, 9999]
    const records = buckets.map((b, i) => seedUser(i, { random_bucket: b, subscription_groups: [{ subscription_group_id: 'g', subscription_state: 'subscribed' }] }))
    await seed(ws.id, records)
    expect((await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/global_control_group`, { percent: 25 })).status).toBe(200)
    const { response } = await exportAndWait(ws.key, '/users/export/global_control_group', {
      fields_to_export: ['external_id', 'random_bucket', 'subscription_groups', 'campaigns_received'],
    })
    expect(response.object_prefix).toMatch(new RegExp(`^global-control-group-export/${ws.id}/\\d{4}-\\d{2}-\\d{2}/[0-9a-f-]{36}-\\d{10}$`))
    const keys = await objectKeys(response.object_prefix)
    expect(keys).toHaveLength(1)
    const users = lines((await unzip(await objectBytes(keys[0]))).get('users-00000.json')!)
    expect(users).toEqual([
      { external_id: 'user-0', random_bucket: 0 },
      { external_id: 'user-1', random_bucket: 999 },
      { external_id: 'user-2', random_bucket: 1000 },
      { external_id: 'user-3', random_bucket: 2499 },
    ])
  })
})

describe('export without storage credentials', () => {
  it('answers a signed URL that downloads one ZIP of every file, and posts the callback when ready', async () => {
    const received: { body: unknown }[] = []
    const server = await localServer((req, res) => {
      let data = ''
      req.on('data', (c) => (data += c))
      req.on('end', () => {
        received.push({ body: JSON.parse(data) })
        res.end('ok')
      })
    })
    try {
      const ws = await env.workspace()
      const records = Array.from({ length: 7 }, (_, i) => seedUser(i))
      await seed(ws.id, records)
      const segmentId = await segment(ws.id, { all: [] })
      const callback = `${server.url}/hook`
      const { response } = await exportAndWait(ws.key, '/users/export/segment', {
        segment_id: segmentId, fields_to_export: ['external_id'], callback_endpoint: callback, output_format: 'gzip',
      })
      const link = new URL(response.url)
      expect(link.pathname).toBe(`/exports/${response.export_id}/download`)
      const download = await fetch(`${env.baseUrl}${link.pathname}${link.search}`)
      expect(download.status).toBe(200)
      expect(download.headers.get('content-type')).toBe('application/zip')
      const entries = await unzip(Buffer.from(await download.arrayBuffer()))
      expect([...entries.keys()]).toEqual(['users-00000.json'])
      expect(lines(entries.get('users-00000.json')!)).toEqual(records.map((r) => ({ external_id: r.external_id })))

      await until('the export callback', () => received.length, (n) => n > 0, 30_000)
      expect(received).toEqual([{ body: { success: true, url: response.url } }])
    } finally {
      await server.close()
    }
  })
})

describe('export file writer', () => {
  it('rejects, never crashes, when the rows stop coming midway through a file', async () => {
    async function* failing(): AsyncGenerator<Buffer> {
      yield Buffer.from('{"external_id":"a"}\n')
      await sleep(5)
      throw new Error('clickhouse went away')
    }
    for (const format of ['zip', 'gzip'] as const) {
      await expect(writeExportFile(path.join(s3Dir, `broken.${format}`), format, 'broken.json', failing())).rejects.toThrow('clickhouse went away')
    }
  })
})

describe('bucket uploads', () => {
  /** A stand-in store answering PUTs with the given statuses in turn, recording the bytes received. */
  async function fakeStore(statuses: number[]) {
    const bodies: number[] = []
    const server = await localServer((req, res) => {
      let size = 0
      req.on('data', (c: Buffer) => (size += c.length))
      req.on('end', () => {
        bodies.push(size)
        res.statusCode = statuses[Math.min(bodies.length - 1, statuses.length - 1)]
        if (res.statusCode >= 400) res.setHeader('content-type', 'application/xml')
        res.end(res.statusCode === 403 ? '<Error><Code>AccessDenied</Code><Message>denied</Message></Error>' : res.statusCode >= 400 ? '<Error><Code>InternalError</Code><Message>oops</Message></Error>' : '')
      })
    })
    const storage = { bucket: 'fake-bucket', region: 'us-east-1', endpoint: server.url, force_path_style: true, access_key_id: 'A', secret_access_key: 'S' }
    return { bodies, storage, close: server.close }
  }

  it('retries a server error with the whole file again, and fails at once on a refusal', async () => {
    const file = path.join(s3Dir, 'upload.bin')
    writeFileSync(file, Buffer.alloc(200_000, 1))
    const flaky = await fakeStore([500, 200])
    try {
      const uploader = s3Uploader(flaky.storage)
      await uploader.upload('k/users-00000.zip', file, 'application/zip')
      uploader.close()
      expect(flaky.bodies).toEqual([200_000, 200_000])
    } finally {
      await flaky.close()
    }
    const refusing = await fakeStore([403])
    try {
      const uploader = s3Uploader(refusing.storage)
      await expect(uploader.upload('k/users-00000.zip', file, 'application/zip')).rejects.toThrow(StorageRefusedError)
      uploader.close()
      expect(refusing.bodies).toHaveLength(1)
    } finally {
      await refusing.close()
    }
  })
})
