import { expect } from 'vitest'
import type { Call } from './route-tour.js'
import { until } from './wait.js'

/**
 * A load whose outcome shows loss, doubling and order per user: request n names `perRequest` users,
 * adding n to each one's `seq` array (so the array is the order its requests applied in), counting
 * one `hits` and setting `last: n`, with one `tick` event each. Requests fall in `lanes` (n % lanes),
 * each naming only its lane's users, so lanes can be sent side by side and each user's requests
 * still one after another.
 */
export interface OrderedLoad {
  tag: string
  users: string[]
  bodies: unknown[]
  lanes: number
  /** Per user, the request numbers naming it, in sending order. */
  expected: Map<string, number[]>
}

export function orderedLoad(opts: { tag: string; users: number; requests: number; perRequest: number; lanes?: number }): OrderedLoad {
  const lanes = opts.lanes ?? 1
  const users = Array.from({ length: opts.users }, (_, i) => `${opts.tag}-${i}`)
  const groups = Array.from({ length: lanes }, (_, l) => users.filter((_, i) => i % lanes === l))
  const expected = new Map<string, number[]>(users.map((u) => [u, []]))
  const at = new Date(Date.now() - 3_600_000).toISOString()
  const bodies = Array.from({ length: opts.requests }, (_, n) => {
    const group = groups[n % lanes]
    const k = Math.floor(n / lanes)
    const named = [...new Set(Array.from({ length: opts.perRequest }, (_, i) => group[(k * opts.perRequest + i) % group.length]))]
    for (const u of named) expected.get(u)!.push(n)
    return {
      attributes: named.map((u) => ({ external_id: u, seq: { add: [n] }, hits: { inc: 1 }, last: n })),
      events: named.map((u) => ({ external_id: u, name: 'tick', time: at, properties: { n } })),
    }
  })
  return { tag: `${opts.tag}-${Date.now()}`, users, bodies, lanes, expected }
}

/**
 * Sends the bodies, the lanes side by side, each lane sending its next one when its last was
 * answered 201: requests for one user are never in flight together, so their acceptance order is
 * their sending order. `between(k)` runs after the k-th acceptance (a kill, a partition change).
 * Answers the request ids.
 */
export async function sendOrdered(call: Call, key: string, load: OrderedLoad, opts: { between?: (k: number) => Promise<void> | void } = {}): Promise<string[]> {
  const ids: string[] = []
  const byLane = Array.from({ length: load.lanes }, (_, l) => load.bodies.map((_, n) => n).filter((n) => n % load.lanes === l))
  let sent = 0
  await Promise.all(
    byLane.map(async (ns) => {
      for (const n of ns) {
        const r = await until(
          `request ${n} to be accepted`,
          // A retry of a request whose answer was lost is the same request (the key).
          () => call('POST', '/users/track', { token: key, body: load.bodies[n], headers: { 'idempotency-key': `${load.tag}-${n}` } }).catch(() => undefined),
          (res) => res?.status === 201,
          60_000,
          100,
        )
        ids[n] = r!.headers.get('x-request-id')!
        await opts.between?.(sent++)
      }
    }),
  )
  return ids
}

/** Waits until every request is done (none failed). */
export async function waitAllDone(call: Call, key: string, ids: string[], timeoutMs = 180_000): Promise<void> {
  for (const id of ids) {
    const p = await until(`request ${id} to finish`, () => call('GET', `/requests/${id}`, { token: key }), (r) => r.body?.status === 'done' || r.body?.status === 'failed', timeoutMs, 100)
    expect(p.body, id).toMatchObject({ status: 'done' })
  }
}

/** Reads every user back and holds it to the load: nothing lost, nothing doubled, each user's requests in order. */
export async function expectOrderedOutcome(call: Call, key: string, load: OrderedLoad): Promise<void> {
  for (let i = 0; i < load.users.length; i += 50) {
    const ids = load.users.slice(i, i + 50)
    const r = await call('POST', '/users/export/ids', { token: key, body: { external_ids: ids, fields_to_export: ['external_id', 'custom_attributes', 'custom_events'] } })
    expect(r.status, r.text.slice(0, 300)).toBe(201)
    const byId = new Map((r.body.users as { external_id: string; custom_attributes?: Record<string, unknown>; custom_events?: { name: string; count: number }[] }[]).map((u) => [u.external_id, u]))
    for (const u of ids) {
      const want = load.expected.get(u)!
      const got = byId.get(u)
      if (want.length === 0) continue
      expect(got, u).toBeDefined()
      expect(got!.custom_attributes?.seq, `${u}: order`).toEqual(want)
      expect(got!.custom_attributes?.hits, `${u}: applied once each`).toBe(want.length)
      expect(got!.custom_attributes?.last, u).toBe(want[want.length - 1])
      expect(got!.custom_events?.find((e) => e.name === 'tick')?.count, `${u}: events`).toBe(want.length)
    }
  }
}

/** A worker process's objects applied (all queues), from its METRICS_PORT. */
export async function objectsApplied(metricsPort: number): Promise<number> {
  const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
  return text
    .split('\n')
    .filter((l) => l.startsWith('uds_objects_applied_total{'))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0)
}
