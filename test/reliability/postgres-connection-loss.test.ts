import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { countEvents } from '../../shared/clickhouse/event-repository.js'
import { withDefaultUser } from '../../shared/db/pool.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { occurrenceCounts } from '../helpers/occurrences.js'
import { sleep, until } from '../helpers/wait.js'

// A track worker applies a load of `inc` attributes and events while every backend of the test
// database is terminated again and again (the worker's and the API's alike). Every request must
// end `done`, with each inc and each event applied exactly once.

let env: TestEnv
let killer: pg.Client | undefined
let stopKilling: (() => Promise<void>) | undefined
beforeAll(async () => {
  env = await startTestEnv({ workers: ['track'] })
})
afterAll(async () => {
  await stopKilling?.()
  await killer?.end().catch(() => {})
  await env?.close()
})

const USERS = 16
const REQUESTS = 120
const LANES = 4

/** One request: `inc` for 4 users and 8 events among them. */
function makeRequest(n: number) {
  const users = Array.from({ length: 4 }, (_, i) => `pgloss-${(n * 4 + i) % USERS}`)
  const time = new Date(Date.now() - n * 1000).toISOString()
  return {
    users,
    body: {
      attributes: users.map((u) => ({ external_id: u, counter: { inc: 1 } })),
      events: Array.from({ length: 8 }, (_, i) => ({ external_id: users[i % 4], name: 'tick', time, properties: { n, i } })),
    },
  }
}


interface Kills {
  rounds: number
  backends: number
  /** Backends killed while a transaction was open or a query was running (work in flight). */
  midWork: number
  /** Of those, the ones in the middle of the exactly-once ledger's transaction (a job's apply). */
  midJob: number
}

/**
 * Terminates every other backend of the database about every `everyMs` until stopped: after each
 * quiet spell it watches for up to `everyMs` for a backend with work in flight and strikes then
 * (or at the end of the watch), so the kills land inside the worker's short batch transactions
 * rather than mostly between them.
 */
function startKilling(client: pg.Client, dbName: string, everyMs: number) {
  const kills: Kills = { rounds: 0, backends: 0, midWork: 0, midJob: 0 }
  let stopped = false
  // Terminates every other backend when one has work in flight, or regardless with `force`; one
  // statement, so what it counts is what it struck.
  const strike = (force: boolean) =>
    client.query<{ state: string | null; xact: boolean; explicit: boolean; killed: boolean }>(
      `WITH busy AS (
         SELECT coalesce(bool_or(xact_start IS NOT NULL OR state = 'active'), false) AS any
           FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid())
       SELECT a.state, a.xact_start IS NOT NULL AS xact, coalesce(a.xact_start < a.query_start, false) AS explicit,
              pg_terminate_backend(a.pid) AS killed
         FROM pg_stat_activity a, busy
        WHERE a.datname = $1 AND a.pid <> pg_backend_pid() AND (busy.any OR $2)`,
      [dbName, force],
    )
  const loop = (async () => {
    while (!stopped) {
      const watchUntil = Date.now() + everyMs
      // (The killer's own connection is never terminated: pid <> pg_backend_pid().)
      let r = await strike(false)
      while (!stopped && r.rows.length === 0 && Date.now() < watchUntil) {
        await sleep(5)
        r = await strike(false)
      }
      if (stopped) break
      if (r.rows.length === 0) r = await strike(true)
      kills.rounds++
      for (const row of r.rows) {
        if (!row.killed) continue
        kills.backends++
        if (row.xact || row.state === 'active') kills.midWork++
        // Inside a transaction begun before its current statement: the worker's exactly-once
        // transaction (the API's track path runs single statements only).
        if (row.explicit) kills.midJob++
      }
      await sleep(everyMs * (0.5 + Math.random()))
    }
  })()
  return {
    kills,
    async stop() {
      stopped = true
      await loop
    },
  }
}

describe('Postgres connections terminated under a track load', () => {
  it('retries the interrupted jobs: every request done, nothing lost, nothing doubled', async () => {
    const ws = await env.workspace()
    killer = new pg.Client({ connectionString: withDefaultUser(env.config.DATABASE_URL) })
    await killer.connect()

    const expectedInc = new Map<string, number>()
    const expectedEvents = new Map<string, number>()
    const requestIds: string[] = []
    const refused = new Map<number, number>()
    const started = Date.now()
    const killing = startKilling(killer, env.dbName, 400)
    stopKilling = killing.stop

    // Lanes of sequential senders; a request the API refused (its Postgres reads were cut) is
    // sent again, and only accepted ones (201) count as sent.
    let next = 0
    const lane = async () => {
      for (let n = next++; n < REQUESTS; n = next++) {
        const { body, users } = makeRequest(n)
        for (let attempt = 0; ; attempt++) {
          const r = await env.call('POST', '/users/track', { key: ws.key, body })
          if (r.status === 201) {
            requestIds.push(r.headers.get('x-request-id')!)
            for (const u of users) expectedInc.set(u, (expectedInc.get(u) ?? 0) + 1)
            for (const e of body.events) expectedEvents.set(e.external_id, (expectedEvents.get(e.external_id) ?? 0) + 1)
            break
          }
          refused.set(r.status, (refused.get(r.status) ?? 0) + 1)
          // Refused before anything was queued: JSON with a message, and only a server-side status.
          expect(r.status, r.text).toBe(503)
          expect(r.body?.message, r.text).toEqual(expect.any(String))
          if (attempt > 50) throw new Error(`request ${n} refused ${attempt} times: ${r.status} ${r.text}`)
          await sleep(20)
        }
        await sleep(15)
      }
    }
    await Promise.all(Array.from({ length: LANES }, lane))

    // Keep cutting connections while the worker catches up, until at least half is applied (and
    // for at least 15 rounds).
    const doneCount = async () => {
      let done = 0
      for (const id of requestIds) if ((await env.ctx.tracker.get(id, ws.id))?.status === 'done') done++
      return done
    }
    await until('half of the requests to be applied under the kills', async () => killing.kills.rounds >= 15 && (await doneCount()) >= REQUESTS / 2, (ok) => ok, 60_000)
    await killing.stop()
    const { kills } = killing

    for (const id of requestIds) expect((await env.waitForRequest(ws.key, id, 60_000)).status).toBe('done')

    // The kills did strike work in flight, in the worker's job transactions among it.
    expect(kills.rounds).toBeGreaterThanOrEqual(15)
    expect(kills.midWork).toBeGreaterThan(0)
    expect(kills.midJob).toBeGreaterThan(0)

    const rows = await env.ctx.pg.query(
      `SELECT p.id, p.external_id, (p.custom_attributes->>'counter')::int AS counter FROM profiles p WHERE p.workspace_id = $1`,
      [ws.id],
    )
    const ticks = await occurrenceCounts(env.clickhouse, ws.id, rows.rows.map((r) => Number(r.id)), 'event', 'tick')
    expect(requestIds).toHaveLength(REQUESTS)
    expect(rows.rows).toHaveLength(USERS)
    for (const r of rows.rows) {
      expect(r.counter, r.external_id).toBe(expectedInc.get(r.external_id))
      expect(ticks(Number(r.id)), r.external_id).toBe(expectedEvents.get(r.external_id))
    }
    expect(await countEvents(env.clickhouse, ws.id)).toEqual([{ kind: 'event', n: REQUESTS * 8 }])
    const ledger = await env.ctx.pg.query(`SELECT count(*)::int AS n, count(*) FILTER (WHERE completed)::int AS completed FROM applied_jobs WHERE workspace_id = $1`, [ws.id])
    expect(ledger.rows[0].n).toBe(ledger.rows[0].completed)

    console.log(
      `postgres-connection-loss: ${REQUESTS} requests in ${Date.now() - started} ms; ${kills.rounds} kill rounds, ` +
        `${kills.backends} backends terminated (${kills.midWork} mid-work, ${kills.midJob} mid-job); refused by the API: ${JSON.stringify(Object.fromEntries(refused))}`,
    )
  }, 150_000)
})
