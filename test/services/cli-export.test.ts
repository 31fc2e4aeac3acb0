import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { progressLine, summary } from '../../services/cli/export-watch.js'
import type { ExportStatus } from '../../shared/db/repositories/export-repository.js'
import { cleanEnv, runCli } from '../helpers/cli.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { localServer } from '../helpers/ports.js'

/** Small files, so that a few users make several files and the progress moves in steps. */
const USERS_PER_FILE = 10
const USERS = 25

/** The CLI against the test service, `extraEnv` added to a clean environment. */
const cli = (args: string[], extraEnv: Record<string, string> = {}) =>
  runCli([...args, '--url', env.baseUrl, '--admin-token', env.adminToken], cleanEnv(extraEnv))

const ndjson = (text: string) => text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, any>)
const lines = (text: string) => text.split('\n').filter(Boolean)

let env: TestEnv

/** A workspace holding USERS tracked users (through the track worker) and a segment of them all. */
async function workspaceWithSegment(): Promise<{ id: string; key: string; segmentId: string }> {
  const ws = await env.workspace()
  const attributes = Array.from({ length: USERS }, (_, i) => ({ external_id: `cli-${i}`, email: `cli-${i}@example.com` }))
  const tracked = await env.call('POST', '/users/track', { key: ws.key, body: { attributes } })
  expect(tracked.status, tracked.text).toBe(201)
  expect((await env.waitForRequest(ws.key, tracked.headers.get('x-request-id')!)).status).toBe('done')
  const segment = await env.admin('POST', `/admin/v1/workspaces/${ws.id}/segments`, { name: 'everyone', filter: { all: [] } })
  expect(segment.status).toBe(201)
  return { ...ws, segmentId: segment.body.segment_id }
}

/** A stand-in bucket that refuses every upload, so that the export fails at once (a closed port would be retried for minutes). */
function refusingStore(): Promise<{ url: string; close(): Promise<void> }> {
  return localServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.statusCode = 403
      res.setHeader('content-type', 'application/xml')
      res.end('<Error><Code>AccessDenied</Code><Message>denied</Message></Error>')
    })
  })
}

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track', 'export'], env: { EXPORT_USERS_PER_FILE: String(USERS_PER_FILE) } })
})
afterAll(async () => {
  await env?.close()
})

describe('export start and export watch', () => {
  it('starts an export and follows it as NDJSON: the answer, then each changed status, the last one done', async () => {
    const ws = await workspaceWithSegment()
    const r = await cli(['export', 'start', ws.id, '--segment', ws.segmentId, '--fields', 'external_id,email', '--api-key', ws.key, '--watch', '--json'])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const [accepted, ...statuses] = ndjson(r.stdout)
    expect(accepted).toMatchObject({ message: 'success', export_id: expect.any(String), object_prefix: expect.stringMatching(/^segment-export\//), url: expect.any(String) })
    expect(statuses.length).toBeGreaterThan(0)
    for (const s of statuses) expect(s).toMatchObject({ id: accepted.export_id, kind: 'segment', segment_id: ws.segmentId })
    // Only polls that changed something are printed.
    const serialized = statuses.map((s) => JSON.stringify(s))
    expect(new Set(serialized).size).toBe(serialized.length)
    const last = statuses.at(-1)!
    expect(last).toMatchObject({ status: 'done', users_exported: USERS, finished_at: expect.any(String) })
    // The service's own store keeps gzip files whatever the format (docs/exports.md).
    expect(last.files.map((f: { name: string; users: number }) => [f.name, f.users])).toEqual([
      ['users-00000.gz', 10],
      ['users-00001.gz', 10],
      ['users-00002.gz', 5],
    ])
    expect((await fetch(accepted.url)).status).toBe(200)
  })

  it('prints a line per change when not on a terminal and ends with the files, then where they are', async () => {
    const ws = await workspaceWithSegment()
    const r = await cli(['export', 'start', ws.id, '--segment', ws.segmentId, '--fields', 'email', '--watch'], { API_KEY: ws.key })
    expect(r.code).toBe(0)
    const out = lines(r.stdout)
    expect(out[0]).toMatch(/^export \S+ accepted$/)
    const exportId = out[0].split(' ')[1]
    // The segment's size was read once, so progress is shown out of it.
    expect(out).toContain(`done: ${USERS} of ${USERS} users, 3 files`)
    expect(out.slice(-6)).toEqual([
      `export ${exportId} done: ${USERS} users in 3 files`,
      expect.stringMatching(/^ {2}users-00000\.gz {2}10 users {2}[\d,]+ bytes$/),
      expect.stringMatching(/^ {2}users-00001\.gz {2}10 users {2}[\d,]+ bytes$/),
      expect.stringMatching(/^ {2}users-00002\.gz {3}5 users {2}[\d,]+ bytes$/),
      expect.stringMatching(/^object prefix: segment-export\/.+/),
      expect.stringMatching(/^download URL: http:\/\/127\.0\.0\.1:\d+\/exports\/.+\/download\?signature=/),
    ])

    // Watching a finished export prints its files at once; the status alone does not know the URL, and says so.
    const again = await cli(['export', 'watch', ws.id, exportId])
    expect(again.code).toBe(0)
    expect(lines(again.stdout)).toEqual([
      `done: ${USERS} of ${USERS} users, 3 files`,
      `export ${exportId} done: ${USERS} users in 3 files`,
      ...out.slice(-5, -2),
      expect.stringMatching(/^the export status does not carry the download URL or object prefix/),
    ])
  })

  it('exits 1 with the reason when the export fails, the last NDJSON line being the failed status', async () => {
    const ws = await workspaceWithSegment()
    const store = await refusingStore()
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'uds-cli-export-'))
    try {
      const storage = { bucket: 'refused', region: 'us-east-1', endpoint: store.url, force_path_style: true, access_key_id: 'A', secret_access_key: 'S' }
      expect((await env.admin('PUT', `/admin/v1/workspaces/${ws.id}/export_storage`, storage)).status).toBe(200)
      // The key comes from the first start's credentials file when it is for this workspace.
      writeFileSync(path.join(dataDir, 'credentials.json'), JSON.stringify({ workspace_id: ws.id, api_key: ws.key }))
      const r = await cli(['export', 'start', ws.id, '--segment', ws.segmentId, '--fields', 'email', '--watch', '--json'], { DATA_DIR: dataDir })
      expect(r.code).toBe(1)
      const last = ndjson(r.stdout).at(-1)!
      expect(last).toMatchObject({ status: 'failed', error: expect.stringMatching(/^storage refused the upload of .*users-00000\.zip to bucket refused: AccessDenied \(HTTP 403\)/) })
      expect(r.stderr).toContain(`error: export ${last.id} failed: storage refused the upload`)
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
      await store.close()
    }
  })

  it('refuses to start without an API key for the workspace, naming the key it found for another', async () => {
    const ws = await env.workspace()
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'uds-cli-export-'))
    try {
      writeFileSync(path.join(dataDir, 'credentials.json'), JSON.stringify({ workspace_id: 'other-ws', api_key: 'k' }))
      const r = await cli(['export', 'start', ws.id, '--segment', 's', '--fields', 'email'], { DATA_DIR: dataDir })
      expect(r.code).toBe(1)
      expect(r.stderr).toContain(`no API key for workspace ${ws.id}: pass --api-key or set API_KEY`)
      expect(r.stderr).toContain('holds the key of workspace other-ws')
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })

  it('gives up after --timeout with exit code 2 while the export still runs', async () => {
    const ws = await env.workspace()
    const id = randomUUID()
    await env.ctx.pg.query(
      `INSERT INTO exports (id, workspace_id, kind, status, request, object_prefix, users_exported, files)
       VALUES ($1, $2, 'global_control_group', 'running', '{}', 'p', 4, '[]')`,
      [id, ws.id],
    )
    const r = await cli(['export', 'watch', ws.id, id, '--timeout', '1'])
    expect(r.code).toBe(2)
    expect(lines(r.stdout)).toEqual(['running: 4 users, 0 files'])
    expect(r.stderr).toContain(`export ${id} is still running after 1 s`)
  })
})

describe('progress line', () => {
  const status = (over: Partial<ExportStatus>): ExportStatus => ({
    id: 'e1',
    kind: 'segment',
    segment_id: 's1',
    status: 'running',
    users_exported: 0,
    files: [],
    started_at: '2024-01-01T00:00:00.000Z',
    ...over,
  })

  it('draws a bar out of the segment size, capped at 100%, and a count without it', () => {
    const file = { name: 'users-00000.zip', users: 3000, bytes: 10 }
    expect(progressLine({ status: status({ users_exported: 3000, files: [file] }), segmentSize: 10_000, elapsedMs: 4200 })).toBe(
      `[#########.....................]  30%  3,000 of 10,000 users, 1 file  running  4s`,
    )
    expect(progressLine({ status: status({ users_exported: 12 }), segmentSize: 10, elapsedMs: 0 })).toMatch(/^\[#{30}\] 100% {2}12 of 10 users/)
    expect(progressLine({ status: status({ kind: 'global_control_group', users_exported: 7 }), elapsedMs: 61_000 })).toBe('7 users, 0 files  running  61s')
  })

  it('lists the files with their keys, and finds the object prefix in them', () => {
    const files = [
      { name: 'users-00000.zip', users: 5000, bytes: 123_456, key: 'segment-export/s1/2024-01-01/u-1/users-00000.zip' },
      { name: 'users-00001.zip', users: 2, bytes: 99, key: 'segment-export/s1/2024-01-01/u-1/users-00001.zip' },
    ]
    expect(summary(status({ status: 'done', users_exported: 5002, files }), undefined)).toEqual([
      'export e1 done: 5,002 users in 2 files',
      '  users-00000.zip  5,000 users  123,456 bytes  segment-export/s1/2024-01-01/u-1/users-00000.zip',
      '  users-00001.zip      2 users       99 bytes  segment-export/s1/2024-01-01/u-1/users-00001.zip',
      'object prefix: segment-export/s1/2024-01-01/u-1',
    ])
  })
})
