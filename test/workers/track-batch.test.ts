import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readSnapshots } from '../../shared/clickhouse/snapshot-repository.js'
import { loadStoredRecords } from '../../shared/db/repositories/user-record-repository.js'
import { submitRequest } from '../../shared/queue/jobs.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'

let env: TestEnv
beforeAll(async () => {
  // No workers yet: each test builds a backlog first, so the worker then applies it in batches.
  // One partition: every job is ordered after every earlier one, so a batched backlog must give
  // exactly what one-at-a-time gives (across partitions only each user's own order is defined).
  env = await startTestEnv({ env: { TRACK_PARTITIONS: '1' } })
})
afterAll(async () => {
  await env.close()
})

const t = (n: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString()

/**
 * Requests that depend on their order: creation by email then by external id, address moves, inc,
 * add/remove, events before and after, and now and then a job that must run alone (a subscription
 * group or email_subscribe: its rules touch every profile sharing the address).
 */
function requests(groupId: string): unknown[] {
  const out: unknown[] = []
  for (let n = 0; n < 60; n++) {
    const u = `ord-${n % 7}`
    out.push({
      attributes: [
        { external_id: u, visits: { inc: 1 }, tags: { add: [`t${n % 4}`], remove: [`t${(n + 2) % 4}`] }, plan: n % 3 ? 'gold' : 'free' },
        ...(n % 5 === 0 ? [{ external_id: u, email: `mail-${n % 3}@example.com`, first_name: `F${n}` }] : []),
        ...(n % 11 === 0 ? [{ email: `solo-${n}@example.com`, level: n }] : []),
        ...(n % 9 === 4 ? [{ external_id: u, subscription_groups: [{ subscription_group_id: groupId, subscription_state: n % 2 ? 'subscribed' : 'unsubscribed' }] }] : []),
        ...(n % 13 === 6 ? [{ external_id: u, email_subscribe: n % 2 ? 'opted_in' : 'unsubscribed' }] : []),
      ],
      events: [
        { external_id: u, name: 'played', time: t(n) },
        { email: `mail-${n % 3}@example.com`, name: 'mailed', time: t(100 - n) },
      ],
      purchases: n % 2 ? [{ external_id: u, product_id: `sku-${n % 3}`, currency: 'usd', price: n, time: t(n) }] : [],
    })
  }
  return out
}

/** Track requests the workers observed finishing (uds_request_done_seconds), by status. */
async function finishedRequests(status: 'done' | 'failed'): Promise<number> {
  const { values } = await env.metrics.requestDone.get()
  return values.find((v) => v.metricName === 'uds_request_done_seconds_count' && v.labels.queue === 'track' && v.labels.status === status)?.value ?? 0
}

/** The records of a workspace's users as /users/export/ids shows them, without the per-profile random parts. */
async function recordsOf(key: string): Promise<unknown[]> {
  const externalIds = Array.from({ length: 7 }, (_, i) => `ord-${i}`)
  const emails = [0, 1, 2].map((i) => `mail-${i}@example.com`)
  const read = [
    ...(await env.readUsers(key, { external_ids: externalIds })).users,
    ...(await Promise.all(emails.map(async (e) => (await env.readUsers(key, { email_address: e })).users))).flat(),
  ]
  return read
    .map(({ service_id: _s, created_at: _c, random_bucket: _r, ...rest }) => rest)
    .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))
}

describe('batched apply of a partition backlog', () => {
  it('gives the same profiles as applying each request alone, with snapshots equal to a read back', async () => {
    const batched = await env.workspace()
    const alone = await env.workspace()
    const group = async (ws: string) =>
      (await env.admin('POST', `/admin/v1/workspaces/${ws}/subscription_groups`, { name: 'news', channel: 'email' })).body.subscription_group_id as string
    const batchedGroup = await group(batched.id)
    const aloneGroup = await group(alone.id)
    const batchedIds: string[] = []
    for (const body of requests(batchedGroup)) {
      const r = await env.call('POST', '/users/track', { key: batched.key, body })
      expect(r.status).toBe(201)
      batchedIds.push(r.headers.get('x-request-id')!)
    }
    await env.startWorkers(['track'])
    for (const id of batchedIds) expect((await env.waitForRequest(batched.key, id)).status).toBe('done')
    for (const body of requests(aloneGroup)) await env.writeAndWait(alone.key, '/users/track', body)

    const groupless = (records: unknown[], groupId: string) => JSON.parse(JSON.stringify(records).replaceAll(groupId, 'the-group'))
    const batchedRecords = groupless(await recordsOf(batched.key), batchedGroup)
    expect(batchedRecords.length).toBeGreaterThan(7)
    expect(batchedRecords.some((r: { subscription_groups?: unknown }) => r.subscription_groups)).toBe(true)
    expect(batchedRecords).toEqual(groupless(await recordsOf(alone.key), aloneGroup))

    // The backlog was applied in batches of several jobs.
    const sizes = await env.ctx.pg.query(
      'SELECT count(*)::int AS n FROM applied_jobs WHERE workspace_id = $1 GROUP BY batch_key ORDER BY n DESC LIMIT 1',
      [batched.id],
    )
    expect(sizes.rows[0].n).toBeGreaterThan(1)
    // Each request observed once when its job was reported, in a batch or alone.
    expect(await finishedRequests('done')).toBe(120)
    expect(await finishedRequests('failed')).toBe(0)

    // Snapshots built in memory equal the stored records read back from Postgres (those
    // /users/export/ids answers, with the summaries both read from the history).
    const ids = (await env.ctx.pg.query('SELECT id FROM profiles WHERE workspace_id = $1', [batched.id])).rows.map((r) => Number(r.id))
    const stored = await readSnapshots(env.clickhouse, batched.id, ids)
    const fromPostgres = new Map((await loadStoredRecords(env.ctx.pg, ids)).map((r) => [r.profile.id, r.record]))
    expect(stored.size).toBe(ids.length)
    for (const id of ids) expect(stored.get(id), `profile ${id}`).toEqual(fromPostgres.get(id))
  }, 120_000)

  it('fails a job that cannot apply alone, never its batch neighbours', async () => {
    const ws = await env.workspace()
    const [doneBefore, failedBefore] = [await finishedRequests('done'), await finishedRequests('failed')]
    const requestIds: string[] = []
    const partitions = env.config.TRACK_PARTITIONS
    await Promise.all(Array.from({ length: partitions }, (_, p) => env.ctx.queues.get(`track-${p}`).pause()))
    const send = async (n: number, time: string) => {
      const requestId = `req-poison-${ws.id}-${n}`
      // Straight onto partition 0 (as the API would for a user hashing there), so the jobs share a batch.
      await submitRequest(env.ctx, {
        workspaceId: ws.id,
        requestId,
        jobs: [
          {
            name: 'applyTrackBatch',
            partition: 0,
            data: {
              workspaceId: ws.id,
              requestId,
              attributes: [{ index: 0, identifier: { kind: 'external_id', value: `p-${n}` }, pushTokenImport: false, fields: {}, custom: { n }, pushTokens: [], subscriptionGroups: [] }],
              events: [{ index: 0, identifier: { kind: 'external_id', value: `p-${n}` }, name: 'x', time, properties: {} }],
              purchases: [],
              subscriptionChanges: [],
              emailStateChanges: [],
            },
          },
        ],
      })
      requestIds.push(requestId)
    }
    for (let n = 0; n < 6; n++) await send(n, n === 3 ? 'not a time' : new Date().toISOString())
    await Promise.all(Array.from({ length: partitions }, (_, p) => env.ctx.queues.get(`track-${p}`).resume()))
    if (!(await env.ctx.queues.get('track-0').getWorkers()).length) await env.startWorkers(['track'])

    const statuses = []
    for (const id of requestIds) statuses.push((await env.waitForRequest(ws.key, id)).status)
    expect(statuses).toEqual(['done', 'done', 'done', 'failed', 'done', 'done'])
    expect(await finishedRequests('done')).toBe(doneBefore + 5)
    expect(await finishedRequests('failed')).toBe(failedBefore + 1)
    const users = (await env.readUsers(ws.key, { external_ids: [0, 1, 2, 3, 4, 5].map((n) => `p-${n}`) })).users
    expect(users.map((u) => u.external_id).sort()).toEqual(['p-0', 'p-1', 'p-2', 'p-4', 'p-5'])
    for (const u of users) expect(u.custom_events).toEqual([expect.objectContaining({ name: 'x', count: 1 })])
  }, 60_000)
})
