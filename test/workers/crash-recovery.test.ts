import { mkdtempSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { until } from '../helpers/wait.js'
import { clickhouseCounts, exited, killSpawnedWorkers, occurrencesOf, spawnWorkerProcess } from '../helpers/worker-process.js'

let env: TestEnv
/** The deployment's one engine, held by whichever worker process runs. */
let dataDir: string
beforeAll(async () => {
  env = await startTestEnv({ engine: false })
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'uds-crash-'))
})
afterAll(async () => {
  killSpawnedWorkers()
  await env.close()
})

const USERS = 12
const REQUESTS = 90

/** One request: an `inc` for 5 users and 10 events among them; returns what it adds per user. */
function makeRequest(n: number) {
  const users = Array.from({ length: 5 }, (_, i) => `crash-${(n * 5 + i) % USERS}`)
  const time = new Date(Date.now() - n * 1000).toISOString()
  return {
    body: {
      attributes: users.map((u) => ({ external_id: u, counter: { inc: 1 } })),
      events: Array.from({ length: 10 }, (_, i) => ({ external_id: users[i % 5], name: 'tick', time, properties: { n, i } })),
    },
    users,
  }
}


describe('a worker killed with SIGKILL mid-load', () => {
  it('applies every accepted object exactly once after a new worker takes over', async () => {
    const ws = await env.workspace()
    const expectedInc = new Map<string, number>()
    const expectedEvents = new Map<string, number>()
    const requestIds: string[] = []

    let worker = spawnWorkerProcess(env, dataDir)
    const send = async (n: number) => {
      const { body, users } = makeRequest(n)
      const r = await env.call('POST', '/users/track', { key: ws.key, body })
      expect(r.status).toBe(201)
      requestIds.push(r.headers.get('x-request-id')!)
      for (const u of users) expectedInc.set(u, (expectedInc.get(u) ?? 0) + 1)
      body.events.forEach((e) => expectedEvents.set(e.external_id, (expectedEvents.get(e.external_id) ?? 0) + 1))
    }
    const doneCount = async () => {
      let done = 0
      for (const id of requestIds) if ((await env.call('GET', `/requests/${id}`, { key: ws.key })).body.status === 'done') done++
      return done
    }

    for (let n = 0; n < REQUESTS / 2; n++) await send(n)
    await until('the first worker to apply some requests', async () => (await doneCount()) >= 5, (ok) => ok, 60_000)
    worker.kill('SIGKILL')
    await exited(worker)
    const doneAtKill = await doneCount()
    expect(doneAtKill).toBeLessThan(REQUESTS)

    for (let n = REQUESTS / 2; n < REQUESTS; n++) await send(n)
    worker = spawnWorkerProcess(env, dataDir)
    for (const id of requestIds) expect((await env.waitForRequest(ws.key, id, 90_000)).status).toBe('done')
    worker.kill('SIGTERM')
    expect(await exited(worker)).toBe(0)

    const rows = await env.ctx.pg.query(
      `SELECT p.id, p.external_id, (p.custom_attributes->>'counter')::int AS counter FROM profiles p WHERE p.workspace_id = $1`,
      [ws.id],
    )
    const ch = await clickhouseCounts(dataDir, env.dbName, ws.id)
    const ticks = occurrencesOf(ch, 'event', 'tick')
    expect(rows.rows).toHaveLength(USERS)
    for (const r of rows.rows) {
      expect(r.counter, r.external_id).toBe(expectedInc.get(r.external_id))
      expect(ticks(Number(r.id)), r.external_id).toBe(expectedEvents.get(r.external_id))
    }
    expect(ch.visible.map((v) => ({ kind: v.kind, n: Number(v.n) }))).toEqual([{ kind: 'event', n: REQUESTS * 10 }])
    // A job retried after the crash may have written its rows twice; they collapse under FINAL.
    expect(ch.physical).toBeGreaterThanOrEqual(REQUESTS * 10)
    expect(ch.snapshots).toBe(USERS)
  }, 180_000)

  it('applies a backlog exactly once and in order per user when the worker is killed inside batches, again and again', async () => {
    const ws = await env.workspace()
    const users = 20
    const requests = 1200
    const expectedSeq = new Map<string, number[]>()
    const expectedEvents = new Map<string, number>()
    const expectedPurchases = new Map<string, number>()
    const requestIds: string[] = []
    // Accepted while no worker runs: the partitions hold a backlog, so every run below applies batches.
    for (let n = 0; n < requests; n++) {
      const named = Array.from({ length: 4 }, (_, i) => `batch-${(n * 3 + i) % users}`)
      const time = new Date(Date.now() - n * 1000).toISOString()
      const body = {
        attributes: named.map((u) => ({ external_id: u, counter: { inc: 1 }, seq: { add: [n] }, last: n })),
        events: named.map((u, i) => ({ external_id: u, name: 'tick', time, properties: { n, i } })),
        purchases: named.slice(0, 2).map((u) => ({ external_id: u, product_id: 'sku', currency: 'EUR', price: 2, time })),
      }
      const r = await env.call('POST', '/users/track', { key: ws.key, body })
      expect(r.status).toBe(201)
      requestIds.push(r.headers.get('x-request-id')!)
      for (const u of named) expectedSeq.set(u, [...(expectedSeq.get(u) ?? []), n])
      for (const e of body.events) expectedEvents.set(e.external_id, (expectedEvents.get(e.external_id) ?? 0) + 1)
      for (const p of body.purchases) expectedPurchases.set(p.external_id, (expectedPurchases.get(p.external_id) ?? 0) + 1)
    }
    // Jobs committed so far (a ledger row each): cheap enough to poll while the worker runs.
    const committed = async () =>
      Number((await env.ctx.pg.query('SELECT count(*) AS n FROM applied_jobs WHERE workspace_id = $1', [ws.id])).rows[0].n)
    const trackQueues = env.ctx.queues.allNames().filter((q) => q.startsWith('track-'))
    const totalJobs = (await Promise.all(trackQueues.map((q) => env.ctx.queues.get(q).count()))).reduce((a, b) => a + b, 0)

    // Batches of a few hundred objects: each partition's share of the backlog takes several, so a kill lands between and inside them.
    const smallBatches = { TRACK_BATCH_MAX_OBJECTS: '400' }
    const killedMidway: number[] = []
    for (let round = 0; round < 5; round++) {
      const worker = spawnWorkerProcess(env, dataDir, ['track'], smallBatches)
      const before = await committed()
      // Killed at a random instant soon after it has started applying (the whole backlog drains in well
      // under a second here): inside a batch more often than not, and with work left for the next round.
      await until(`round ${round} to apply something`, async () => (await committed()) > before, (ok) => ok, 60_000)
      await new Promise((r) => setTimeout(r, Math.random() * 50))
      worker.kill('SIGKILL')
      await exited(worker)
      const progress = await committed()
      if (progress >= totalJobs) break
      killedMidway.push(progress)
    }
    expect(killedMidway.length).toBeGreaterThanOrEqual(2)

    const worker = spawnWorkerProcess(env, dataDir, ['track'], smallBatches)
    for (const id of requestIds) expect((await env.waitForRequest(ws.key, id, 120_000)).status).toBe('done')
    // The kills may have left nothing to do: the stop must still find a started worker, not one loading its modules.
    await until('the last worker to start', () => env.ctx.queues.get(trackQueues[0]).getWorkersCount(), (n) => n > 0, 60_000)
    worker.kill('SIGTERM')
    expect(await exited(worker)).toBe(0)

    const rows = await env.ctx.pg.query(
      `SELECT p.id, p.external_id, (p.custom_attributes->>'counter')::int AS counter, p.custom_attributes->'seq' AS seq,
              (p.custom_attributes->>'last')::int AS last
         FROM profiles p WHERE p.workspace_id = $1`,
      [ws.id],
    )
    const ch = await clickhouseCounts(dataDir, env.dbName, ws.id)
    const [ticks, skus] = [occurrencesOf(ch, 'event', 'tick'), occurrencesOf(ch, 'purchase', 'sku')]
    expect(rows.rows).toHaveLength(users)
    for (const r of rows.rows) {
      const seq = expectedSeq.get(r.external_id)!
      // Every request applied once, in acceptance order.
      expect(r.seq, r.external_id).toEqual(seq)
      expect(r.counter, r.external_id).toBe(seq.length)
      expect(r.last, r.external_id).toBe(seq[seq.length - 1])
      expect(ticks(Number(r.id)), r.external_id).toBe(expectedEvents.get(r.external_id))
      expect(skus(Number(r.id)), r.external_id).toBe(expectedPurchases.get(r.external_id) ?? 0)
    }
    const batches = await env.ctx.pg.query(`SELECT count(*)::int AS n FROM applied_jobs WHERE workspace_id = $1 GROUP BY batch_key ORDER BY n DESC LIMIT 1`, [ws.id])
    expect(batches.rows[0].n).toBeGreaterThan(1)
    expect(ch.visible.map((v) => ({ kind: v.kind, n: Number(v.n) }))).toEqual([
      { kind: 'event', n: requests * 4 },
      { kind: 'purchase', n: requests * 2 },
    ])
    expect(ch.snapshots).toBe(users)
  }, 300_000)
})

