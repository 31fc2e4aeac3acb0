import { mkdtempSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { clickhouseCounts, exited, spawnWorkerProcess } from '../helpers/worker-process.js'

let env: TestEnv
beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
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

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('a worker killed with SIGKILL mid-load', () => {
  it('applies every accepted object exactly once after a new worker takes over', async () => {
    const ws = await env.workspace()
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'uds-crash-'))
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
    await waitUntil(async () => (await doneCount()) >= 5, 60_000, 'the first worker to apply some requests')
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
      `SELECT p.external_id, (p.custom_attributes->>'counter')::int AS counter, s.count AS events
         FROM profiles p LEFT JOIN profile_event_summaries s ON s.profile_id = p.id AND s.name = 'tick'
        WHERE p.workspace_id = $1`,
      [ws.id],
    )
    expect(rows.rows).toHaveLength(USERS)
    for (const r of rows.rows) {
      expect(r.counter, r.external_id).toBe(expectedInc.get(r.external_id))
      expect(r.events, r.external_id).toBe(expectedEvents.get(r.external_id))
    }
    const ch = await clickhouseCounts(dataDir, env.dbName, ws.id)
    expect(ch.visible.map((v) => ({ kind: v.kind, n: Number(v.n) }))).toEqual([{ kind: 'event', n: REQUESTS * 10 }])
    // A job retried after the crash may have written its rows twice; they collapse under FINAL.
    expect(ch.physical).toBeGreaterThanOrEqual(REQUESTS * 10)
    expect(ch.snapshots).toBe(USERS)
  }, 180_000)
})
