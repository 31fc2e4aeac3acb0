import { spawn, type ChildProcess } from 'node:child_process'
import net from 'node:net'
import { performance } from 'node:perf_hooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { occurrenceCounts } from '../helpers/occurrences.js'
import { freePort } from '../helpers/ports.js'
import { sleep, until } from '../helpers/wait.js'
import { exited } from '../helpers/worker-process.js'

// The API under a steady /users/track load while its Redis (a private redis-server, without
// persistence) is killed and started again on the same port: while Redis is away every request
// gets a quick, clear 503 in JSON; once it is back the API accepts work again by itself, and a
// worker started afterwards applies what was accepted after the recovery.

/** True when a redis-server answers PING on the port. */
function pings(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1')
    const done = (ok: boolean) => {
      sock.destroy()
      resolve(ok)
    }
    sock.setTimeout(500, () => done(false))
    sock.once('error', () => done(false))
    sock.once('connect', () => sock.write('PING\r\n'))
    sock.once('data', (d) => done(d.toString().startsWith('+PONG')))
  })
}


let port: number
let redis: ChildProcess | undefined
let env: TestEnv | undefined

async function startRedis(): Promise<void> {
  redis = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no', '--bind', '127.0.0.1'], { stdio: 'ignore' })
  await until(`redis-server on port ${port}`, () => pings(port), (ok) => ok, 10_000)
}

async function killRedis(): Promise<void> {
  if (!redis || redis.exitCode !== null || redis.signalCode !== null) return
  redis.kill('SIGKILL')
  await exited(redis)
}

beforeAll(async () => {
  port = await freePort()
  await startRedis()
  env = await startTestEnv({ env: { REDIS_URL: `redis://127.0.0.1:${port}` } })
})
afterAll(async () => {
  // The env closes its queues through Redis: bring it back first if a failure left it down.
  if (env && redis && (redis.exitCode !== null || redis.signalCode !== null)) await startRedis().catch(() => {})
  await env?.close()
  await killRedis()
})

interface Sent {
  n: number
  /** When it was sent, against the outage: before the kill, while down, after the restart. */
  phase: 'before' | 'down' | 'after'
  status: number
  ms: number
  body: any
  contentType: string | null
  retryAfter: string | null
  requestId: string | null
}

describe('Redis killed and restarted while the API is under load', () => {
  it('answers a quick JSON 503 while Redis is away and recovers by itself', async () => {
    const e = env!
    expect(e.config.REDIS_URL).toBe(`redis://127.0.0.1:${port}`)
    const ws = await e.workspace()
    const sent: Sent[] = []
    let phase: Sent['phase'] = 'before'
    let stopped = false

    // One request after another, every few milliseconds, each for a user of its own.
    const stream = (async () => {
      for (let n = 0; !stopped; n++) {
        const at = phase
        const t0 = performance.now()
        const r = await e.call('POST', '/users/track', {
          key: ws.key,
          body: {
            attributes: [{ external_id: `redis-${n}`, counter: { inc: 1 } }],
            events: [1, 2].map((i) => ({ external_id: `redis-${n}`, name: 'tick', time: new Date().toISOString(), properties: { i } })),
          },
        })
        sent.push({ n, phase: at, status: r.status, ms: performance.now() - t0, body: r.body, contentType: r.headers.get('content-type'), retryAfter: r.headers.get('retry-after'), requestId: r.headers.get('x-request-id') })
        await sleep(10)
      }
    })()
    const count = (p: (s: Sent) => boolean) => sent.filter(p).length

    try {
      await until('the API to accept requests', () => count((s) => s.status === 201) >= 20, (ok) => ok, 20_000)

      await killRedis()
      phase = 'down'
      const killedAt = Date.now()
      await until('503s while Redis is away', () => count((s) => s.phase === 'down' && s.status === 503) >= 20 && Date.now() - killedAt >= 2000, (ok) => ok, 20_000)

      await startRedis()
      phase = 'after'
      const restartedAt = Date.now()
      await until('the API to accept requests again', () => count((s) => s.phase === 'after' && s.status === 201) >= 1, (ok) => ok, 15_000)
      const recoveredMs = Date.now() - restartedAt
      await until('more accepted requests after the recovery', () => count((s) => s.phase === 'after' && s.status === 201) >= 30, (ok) => ok, 20_000)
      stopped = true
      await stream

      // Nothing but 201 and 503, every answer quick; every 503 a JSON message.
      const statuses = [...new Set(sent.map((s) => s.status))].sort()
      expect(statuses).toEqual([201, 503])
      const slowest = Math.max(...sent.map((s) => s.ms))
      expect(slowest).toBeLessThan(2000)
      const refused = sent.filter((s) => s.status === 503)
      for (const s of refused) {
        expect(s.contentType, `request ${s.n}`).toMatch(/^application\/json/)
        expect(s.body?.message, `request ${s.n}`).toMatch(/unavailable/i)
        expect(s.retryAfter, `request ${s.n}`).toBe('1')
      }
      // Redis went away at the kill: from then until the restart nothing was accepted.
      expect(count((s) => s.phase === 'down' && s.status === 201)).toBe(0)

      // A worker started now applies every request accepted after the recovery, exactly once.
      const accepted = sent.filter((s) => s.phase === 'after' && s.status === 201)
      await e.startWorkers(['track'])
      for (const s of accepted) expect((await e.waitForRequest(ws.key, s.requestId!, 30_000)).status).toBe('done')
      const rows = await e.ctx.pg.query<{ id: string; external_id: string; counter: number }>(
        `SELECT p.id, p.external_id, (p.custom_attributes->>'counter')::int AS counter FROM profiles p WHERE p.workspace_id = $1`,
        [ws.id],
      )
      const ticks = await occurrenceCounts(e.clickhouse, ws.id, rows.rows.map((r) => Number(r.id)), 'event', 'tick')
      const byUser = new Map(rows.rows.map((r) => [r.external_id, { counter: r.counter, events: ticks(Number(r.id)) }]))
      for (const s of accepted) expect(byUser.get(`redis-${s.n}`), `redis-${s.n}`).toMatchObject({ counter: 1, events: 2 })
      // A refused request left nothing behind.
      for (const s of refused) expect(byUser.has(`redis-${s.n}`), `redis-${s.n}`).toBe(false)

      const downMs = sent.filter((s) => s.phase === 'down').map((s) => s.ms)
      console.log(
        `redis-restart: ${sent.length} requests (${count((s) => s.phase === 'before')} before the kill, ${downMs.length} while down, ` +
          `${count((s) => s.phase === 'after')} after the restart); ${refused.length} answered 503, slowest answer ${slowest.toFixed(0)} ms, ` +
          `slowest while down ${Math.max(...downMs).toFixed(0)} ms; first 201 ${recoveredMs} ms after the restart; ${accepted.length} applied after it`,
      )
    } finally {
      stopped = true
      await stream.catch(() => {})
    }
  }, 120_000)
})
