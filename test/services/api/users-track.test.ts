import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { countEvents, readEventSummaries } from '../../../shared/clickhouse/event-repository.js'
import { withSummaries } from '../../../shared/domain/user-record.js'
import { readSnapshots } from '../../../shared/clickhouse/snapshot-repository.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track'] })
  ws = await env.workspace()
})
afterAll(async () => {
  await env.close()
})

async function track(body: unknown, key = ws.key) {
  const r = await env.call('POST', '/users/track', { key, body })
  return r
}

const trackAndWait = (body: unknown) => env.writeAndWait(ws.key, '/users/track', body)
const read = (body: unknown) => env.readUsers(ws.key, body)

describe('POST /users/track', () => {
  it('refuses an object holding a NUL or an unpaired surrogate, naming the field, and applies the rest, in UTF-8 as in UTF-16', async () => {
    const body = JSON.stringify({
      attributes: [
        { external_id: 'nul-1', note: 'a\u0000b' },
        { external_id: 'nul-2', plan: 'kept' },
      ],
      events: [{ external_id: 'nul-2', name: 'opened', time: new Date().toISOString(), properties: { ['k\ud800']: 1 } }],
    })
    for (const [charset, bytes] of [['utf-8', Buffer.from(body, 'utf8')], ['utf-16le', Buffer.from(body, 'utf16le')]] as const) {
      const res = await fetch(`${env.baseUrl}/users/track`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ws.key}`, 'content-type': `application/json; charset=${charset}` },
        body: bytes,
      })
      expect(res.status, charset).toBe(201)
      expect(await res.json()).toEqual({
        message: 'success',
        attributes_processed: 1,
        events_processed: 0,
        errors: [
          { type: 'invalid_object', input_array: 'attributes', index: 0, message: 'attributes[0].note: must not contain the NUL character (\\u0000)' },
          { type: 'invalid_object', input_array: 'events', index: 0, message: 'events[0].properties: keys must not contain an unpaired surrogate (\\ud800 to \\udfff), which is not Unicode' },
        ],
      })
    }
  })

  it('refuses an object nested deeper than the limit in a body without escapes, naming the field, and applies the rest', async () => {
    let deep: unknown = 'leaf'
    for (let i = 0; i < 70; i++) deep = { n: deep }
    const res = await fetch(`${env.baseUrl}/users/track`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ws.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ attributes: [{ external_id: 'deep-1', deep }, { external_id: 'deep-2', plan: 'kept' }] }),
    })
    expect(res.status).toBe(201)
    const answer = (await res.json()) as { attributes_processed: number; errors: { index: number; message: string }[] }
    expect(answer.attributes_processed).toBe(1)
    expect(answer.errors.map((e) => [e.index, e.message.replace(/(\.n)+/, '.n…')])).toEqual([[0, 'attributes[0].deep.n…: is nested deeper than 64 levels']])
  })

  it('creates a profile with standard fields and custom attributes, read back through /users/export/ids', async () => {
    const { response } = await trackAndWait({
      attributes: [
        {
          external_id: 'u1',
          first_name: 'Ada',
          email: 'Ada@Example.com',
          country: 'gb',
          dob: '1990-12-10',
          gender: 'f',
          time_zone: 'Europe/London',
          plan: 'gold',
          visits: 3,
          stays: [{ hotel: 'Ritz', nights: 2, checkin: '2024-05-01' }],
        },
      ],
    })
    expect(response).toEqual({ message: 'success', attributes_processed: 1 })
    const out = await read({ external_ids: ['u1'] })
    expect(out.users).toHaveLength(1)
    const u = out.users[0]
    expect(u).toMatchObject({
      external_id: 'u1',
      first_name: 'Ada',
      email: 'ada@example.com',
      country: 'GB',
      dob: '1990-12-10',
      gender: 'F',
      time_zone: 'Europe/London',
      custom_attributes: { plan: 'gold', visits: 3, stays: [{ hotel: 'Ritz', nights: 2, checkin: '2024-05-01' }] },
    })
    expect(u.service_id).toMatch(/^[0-9a-f]{24}$/)
    expect(u.random_bucket).toBeGreaterThanOrEqual(0)
    expect(u.random_bucket).toBeLessThan(10000)
    expect(Date.parse(u.created_at)).toBeGreaterThan(Date.now() - 60_000)
  })

  it('applies inc, add/remove, arrays and null in order', async () => {
    await trackAndWait({ attributes: [{ external_id: 'u2', n: 1, tags: ['a', 'b'], gone: 'x' }] })
    await trackAndWait({
      attributes: [
        { external_id: 'u2', n: { inc: 5 }, tags: { add: ['c', 'a'], remove: ['b'] }, gone: null },
        { external_id: 'u2', n: { inc: -2 } },
      ],
    })
    const u = (await read({ external_ids: ['u2'] })).users[0]
    expect(u.custom_attributes).toEqual({ n: 4, tags: ['a', 'c'] })
  })

  it('stores every event occurrence and summarizes per user', async () => {
    const t1 = new Date(Date.now() - 3600_000).toISOString()
    const t2 = new Date(Date.now() - 60_000).toISOString()
    await trackAndWait({
      events: [
        { external_id: 'u3', name: 'played', time: t2, properties: { level: { n: 2 }, items: [{ id: 1 }] } },
        { external_id: 'u3', name: 'played', time: t1 },
        { external_id: 'u3', name: 'played', time: t1 },
      ],
      purchases: [{ external_id: 'u3', product_id: 'sku1', currency: 'usd', price: 9.5, time: t2 }],
    })
    const u = (await read({ external_ids: ['u3'] })).users[0]
    expect(u.custom_events).toEqual([{ name: 'played', first: t1, last: t2, count: 3 }])
    expect(u.purchases).toEqual([{ name: 'sku1', first: t2, last: t2, count: 1 }])
    const ids = await env.ctx.pg.query('SELECT id FROM profiles WHERE external_id = $1', ['u3'])
    const counts = await countEvents(env.clickhouse, ws.id, [ids.rows[0].id])
    expect(counts).toEqual([{ kind: 'event', n: 3 }, { kind: 'purchase', n: 1 }])
    // Exports read the summaries from the history, as export/ids does; the snapshot holds none.
    const fromHistory = await readEventSummaries(env.clickhouse, ws.id, [Number(ids.rows[0].id)])
    expect(withSummaries({ created_at: u.created_at, service_id: u.service_id, random_bucket: u.random_bucket }, fromHistory.get(Number(ids.rows[0].id))!)).toMatchObject({
      custom_events: u.custom_events,
      purchases: u.purchases,
    })
    const snap = await readSnapshots(env.clickhouse, ws.id, [ids.rows[0].id])
    expect(snap.get(ids.rows[0].id)).toMatchObject({ external_id: 'u3' })
    expect(snap.get(ids.rows[0].id)).not.toHaveProperty('custom_events')
  })

  it('answers non-fatal errors for bad objects and still applies the good ones', async () => {
    const r = await track({
      attributes: [{ external_id: 'u4', color: 'red' }, { external_id: 'u4', dob: '10/12/1990' }],
      events: [{ external_id: 'u4', name: 'x', time: 'yesterday' }],
    })
    expect(r.status).toBe(201)
    expect(r.body.message).toBe('success')
    expect(r.body.attributes_processed).toBe(1)
    expect(r.body.events_processed).toBe(0)
    expect(r.body.errors).toEqual([
      expect.objectContaining({ input_array: 'attributes', index: 1, message: expect.stringMatching(/^attributes\[1\]\.dob:/) }),
      expect.objectContaining({ input_array: 'events', index: 0, message: expect.stringMatching(/^events\[0\]\.time:/) }),
    ])
    await env.waitForRequest(ws.key, r.headers.get('x-request-id')!)
    const u = (await read({ external_ids: ['u4'] })).users[0]
    expect(u.custom_attributes).toEqual({ color: 'red' })
    expect(u.dob).toBeUndefined()
  })
})
