import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { partitionOf, type Identifier } from '../../../shared/domain/identifiers.js'
import { QueueNames } from '../../../shared/queue/queues.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
let ws: { id: string; key: string }
const PARTITIONS = 4
const run = Math.random().toString(36).slice(2, 8)

beforeAll(async () => {
  env = await startTestEnv()
  ws = await env.workspace()
})
afterAll(async () => {
  await env.close()
})

/** A name for `kind` whose partition differs from every partition in `avoid`. */
function nameAway(make: (i: number) => Identifier, avoid: number[]): Identifier {
  for (let i = 0; ; i++) {
    const id = make(i)
    if (!avoid.includes(partitionOf(id, PARTITIONS))) return id
  }
}

/** Every track job waiting for this request, read back from the partition queues. */
async function queuedJobsOf(requestId: string) {
  const out: { partition: number; attributes: string[]; events: string[]; purchases: string[] }[] = []
  for (let p = 0; p < PARTITIONS; p++) {
    for (const job of await env.ctx.queues.get(QueueNames.track(p)).getWaiting(0, -1)) {
      if (job.data.requestId !== requestId) continue
      const keyOf = (o: { identifier?: Identifier }) => (o.identifier ? `${o.identifier.kind}:${'value' in o.identifier ? o.identifier.value : ''}` : 'push')
      out.push({ partition: p, attributes: job.data.attributes.map(keyOf), events: job.data.events.map(keyOf), purchases: job.data.purchases.map(keyOf) })
    }
  }
  return out.sort((a, b) => a.partition - b.partition)
}

async function track(body: unknown): Promise<string> {
  const r = await env.call('POST', '/users/track', { key: ws.key, body })
  expect(r.status).toBe(201)
  return r.headers.get('x-request-id')!
}

const time = () => new Date().toISOString()

describe('/users/track: identifiers linked within one request share a partition', () => {
  it('puts events and purchases named by the email an attributes object sets into its job, and applies them to its profile', async () => {
    const x = `x-${run}`
    const px = partitionOf({ kind: 'external_id', value: x }, PARTITIONS)
    const m = nameAway((i) => ({ kind: 'email', value: `m${i}-${run}@example.com` }), [px]) as { kind: 'email'; value: string }
    const requestId = await track({
      attributes: [{ external_id: x, email: m.value, first_name: 'Linked' }],
      events: [{ email: m.value, name: 'opened', time: time() }],
      purchases: [{ email: m.value, product_id: 'sku-1', currency: 'USD', price: 2, time: time() }],
    })
    // Read back from the queue before any worker runs: one job, on X's partition, holds all three.
    expect(await queuedJobsOf(requestId)).toEqual([
      { partition: px, attributes: [`external_id:${x}`], events: [`email:${m.value}`], purchases: [`email:${m.value}`] },
    ])

    await env.startWorkers(['track'])
    expect((await env.waitForRequest(ws.key, requestId)).status).toBe('done')
    const byX = await env.readUsers(ws.key, { external_ids: [x] })
    expect(byX.users).toHaveLength(1)
    expect(byX.users[0]).toMatchObject({
      external_id: x,
      email: m.value,
      first_name: 'Linked',
      custom_events: [{ name: 'opened', count: 1 }],
      purchases: [{ name: 'sku-1', count: 1 }],
    })
    // No email-only profile: the only profile holding M is X's.
    const byEmail = await env.readUsers(ws.key, { email_address: m.value })
    expect(byEmail.users.map((u) => u.external_id)).toEqual([x])
  })

  it('links a phone too, follows chains, and never moves an identifier that names an attributes object', async () => {
    await Promise.all(env.ctx.queues.allNames().map((q) => env.ctx.queues.get(q).pause()))
    try {
      const y = `y-${run}`
      const py = partitionOf({ kind: 'external_id', value: y }, PARTITIONS)
      const z = nameAway((i) => ({ kind: 'external_id', value: `z${i}-${run}` }), [py]) as { kind: 'external_id'; value: string }
      const pz = partitionOf(z, PARTITIONS)
      const m = nameAway((i) => ({ kind: 'email', value: `n${i}-${run}@example.com` }), [py, pz]) as { kind: 'email'; value: string }
      const phone = nameAway((i) => ({ kind: 'phone', value: `+4420794${String(60000 + i).padStart(5, '0')}` }), [py]) as { kind: 'phone'; value: string }
      const lone = nameAway((i) => ({ kind: 'email', value: `lone${i}-${run}@example.com` }), [py]) as { kind: 'email'; value: string }
      const requestId = await track({
        attributes: [
          { external_id: y, email: m.value },
          // M already belongs to Y: Z keeps its own partition, and M's objects stay with Y.
          { external_id: z.value, email: m.value },
          // Named by M, sets a phone: the phone joins Y's group through M.
          { email: m.value, phone: phone.value },
        ],
        events: [
          { phone: phone.value, name: 'called', time: time() },
          { email: lone.value, name: 'alone', time: time() },
          { external_id: z.value, name: 'z-event', time: time() },
        ],
        purchases: [{ email: m.value, product_id: 'sku-2', currency: 'USD', price: 1, time: time() }],
      })
      const jobs = await queuedJobsOf(requestId)
      const partitionHolding = (key: string) => jobs.find((j) => [...j.attributes, ...j.events, ...j.purchases].includes(key))?.partition
      expect(partitionHolding(`external_id:${y}`)).toBe(py)
      expect(partitionHolding(`email:${m.value}`)).toBe(py)
      expect(partitionHolding(`phone:${phone.value}`)).toBe(py)
      expect(partitionHolding(`external_id:${z.value}`)).toBe(pz)
      expect(partitionHolding(`email:${lone.value}`)).toBe(partitionOf(lone, PARTITIONS))
      expect(jobs.find((j) => j.partition === py)).toMatchObject({
        attributes: [`external_id:${y}`, `email:${m.value}`],
        events: [`phone:${phone.value}`],
        purchases: [`email:${m.value}`],
      })
    } finally {
      await Promise.all(env.ctx.queues.allNames().map((q) => env.ctx.queues.get(q).resume()))
    }
  })
})
