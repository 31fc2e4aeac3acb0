import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'

let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track'] })
  ws = await env.workspace()
})
afterAll(async () => {
  await env.close()
})

const trackAndWait = (body: unknown) => env.writeAndWait(ws.key, '/users/track', body)
const at = (s: string) => `2026-03-0${s}T10:00:00.000Z`

async function profileOf(externalId: string): Promise<{ id: number; updated_at: Date; version: number }> {
  const r = await env.ctx.pg.query('SELECT id, updated_at, version FROM profiles WHERE workspace_id = $1 AND external_id = $2', [ws.id, externalId])
  return r.rows[0]
}

async function eventCount(profileId: number, name: string): Promise<number> {
  const r = await env.ctx.pg.query(`SELECT count FROM profile_event_summaries WHERE profile_id = $1 AND kind = 'event' AND name = $2`, [profileId, name])
  return Number(r.rows[0]?.count ?? 0)
}

describe('profiles a track batch only adds events to', () => {
  it('commit beside a transaction holding the profile for a change, and get their updated_at once it ends', async () => {
    await trackAndWait({ attributes: [{ external_id: 'held', phone: '+4791234567' }] })
    const before = await profileOf('held')

    // Another partition's batch changing the profile (its attributes named it by email, say).
    const other = await env.ctx.pg.connect()
    try {
      await other.query('BEGIN')
      await other.query('SELECT id FROM profiles WHERE id = $1 FOR NO KEY UPDATE', [before.id])

      const sent = await env.call('POST', '/users/track', { key: ws.key, body: { events: [{ phone: '+4791234567', name: 'opened', time: at('1') }] } })
      expect(sent.status).toBe(201)
      const requestId = sent.headers.get('x-request-id')!
      // The event's batch commits without waiting for the other transaction...
      for (let i = 0; i < 200 && (await eventCount(before.id, 'opened')) === 0; i++) await new Promise((r) => setTimeout(r, 25))
      expect(await eventCount(before.id, 'opened')).toBe(1)
      // ...but its request is done only once the profile's updated_at is stamped, after the other commits.
      const pending = await env.call('GET', `/requests/${requestId}`, { key: ws.key })
      expect(pending.body.status).toBe('processing')
      expect((await profileOf('held')).updated_at).toEqual(before.updated_at)

      await other.query('COMMIT')
      expect((await env.waitForRequest(ws.key, requestId)).status).toBe('done')
    } finally {
      other.release()
    }
    const after = await profileOf('held')
    expect(after.updated_at.getTime()).toBeGreaterThan(before.updated_at.getTime())
    expect(after.version).toBe(before.version)
  })

  it('become the most recently updated of the profiles sharing their email', async () => {
    await trackAndWait({ attributes: [{ external_id: 'first', email: 'pair@example.com' }] })
    await trackAndWait({ attributes: [{ external_id: 'second', email: 'pair@example.com' }] })
    // An event for the first makes it the more recent: the next write by email goes to it.
    await trackAndWait({ events: [{ external_id: 'first', name: 'visited', time: at('2') }] })
    await trackAndWait({ attributes: [{ email: 'pair@example.com', picked: true }] })
    const users = (await env.readUsers(ws.key, { external_ids: ['first', 'second'] })).users
    expect(users.map((u) => [u.external_id, u.custom_attributes])).toEqual([
      ['first', { picked: true }],
      ['second', undefined],
    ])
  })
})
