import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type pg from 'pg'
import type { TrackJob } from '../../../shared/queue/track-jobs.js'
import { applyTrackJobs } from '../../../workers/track/apply-batch.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

let env: TestEnv

beforeAll(async () => {
  env = await startTestEnv()
})
afterAll(async () => {
  await env?.close()
})

const job = (ws: string, parts: Partial<TrackJob>): TrackJob => ({
  workspaceId: ws,
  requestId: randomUUID(),
  attributes: [],
  events: [],
  purchases: [],
  subscriptionChanges: [],
  emailStateChanges: [],
  ...parts,
})

/** A connection in an open transaction that gives up on a lock after a second instead of waiting on. */
async function transaction(): Promise<pg.PoolClient> {
  const db = await env.ctx.pg.connect()
  await db.query('BEGIN')
  await db.query("SET LOCAL lock_timeout = '1s'")
  return db
}

async function commit(db: pg.PoolClient): Promise<void> {
  await db.query('COMMIT')
  db.release()
}

/** No profile here shares an address, so nothing asks when one last had an occurrence. */
const noOccurrences = async () => new Map<number, string>()

describe('batches of two partitions naming one user', () => {
  it('record its events by phone while the other, by email, changes its fields, neither waiting', async () => {
    const ws = randomUUID()
    const [email, phone] = [`u-${randomUUID()}@example.com`, '+33612345678']
    const created = await env.ctx.pg.query<{ id: number }>(
      `INSERT INTO profiles (workspace_id, service_id, external_id, email, phone, random_bucket) VALUES ($1, $2, $3, $4, $5, 1) RETURNING id`,
      [ws, randomUUID(), `x-${randomUUID()}`, email, phone],
    )
    const id = created.rows[0].id
    const time = '2026-01-01T00:00:00.000Z'

    // The email's partition changes the user's fields and has not committed yet.
    const attributes = await transaction()
    await applyTrackJobs(
      attributes,
      [{ key: 'a', job: job(ws, { attributes: [{ index: 0, identifier: { kind: 'email', value: email }, pushTokenImport: false, fields: { first_name: 'Ada' }, custom: {}, pushTokens: [], subscriptionGroups: [] }] }) }],
      time,
      noOccurrences,
    )
    // The phone's partition records an event and a purchase for the same user meanwhile.
    const events = await transaction()
    const applied = await applyTrackJobs(
      events,
      [
        {
          key: 'e',
          job: job(ws, {
            events: [{ index: 0, identifier: { kind: 'phone', value: phone }, time, properties: {}, name: 'played' }],
            purchases: [{ index: 0, identifier: { kind: 'phone', value: phone }, time, properties: {}, product_id: 'sku', currency: 'USD', price: 1, quantity: 1 }],
          }),
        },
      ],
      time,
      noOccurrences,
    )
    await commit(events)
    await commit(attributes)

    expect(applied.owners.get('e')).toEqual([id, id])
    const profile = await env.ctx.pg.query('SELECT first_name, version FROM profiles WHERE id = $1', [id])
    expect(profile.rows).toEqual([{ first_name: 'Ada', version: 2 }])
  })
})

describe('a profile an attributes object names by external id', () => {
  it('is locked by its batch: owning its events, held against other writers, one profile with its other keys', async () => {
    const ws = randomUUID()
    const [externalId, email] = [`x-${randomUUID()}`, `u-${randomUUID()}@example.com`]
    const created = await env.ctx.pg.query<{ id: number }>(
      `INSERT INTO profiles (workspace_id, service_id, external_id, email, random_bucket) VALUES ($1, $2, $3, $4, 1) RETURNING id`,
      [ws, randomUUID(), externalId, email],
    )
    const id = created.rows[0].id
    const time = '2026-01-01T00:00:00.000Z'
    const attributes = (identifier: { kind: 'external_id' | 'email'; value: string }, fields: Record<string, string>) => ({
      index: 0, identifier, pushTokenImport: false, fields, custom: {}, pushTokens: [], subscriptionGroups: [],
    })
    const event = (index: number, identifier: { kind: 'external_id' | 'email'; value: string }) => ({ index, identifier, time, properties: {}, name: 'played' })
    const apply = (db: pg.PoolClient, key: string, parts: Partial<TrackJob>) => applyTrackJobs(db, [{ key, job: job(ws, parts) }], time, noOccurrences)

    // Named by its external id alone.
    const first = await transaction()
    const applied = await apply(first, 'a', { attributes: [attributes({ kind: 'external_id', value: externalId }, { first_name: 'Ada' })], events: [event(0, { kind: 'external_id', value: externalId })] })
    // Another partition's batch naming the same user by email waits for the first one's lock (here: gives up after a second).
    const second = await transaction()
    await expect(apply(second, 'b', { attributes: [attributes({ kind: 'email', value: email }, { first_name: 'Grace' })] })).rejects.toMatchObject({ code: '55P03' })
    await second.query('ROLLBACK')
    second.release()
    await commit(first)
    expect(applied.owners.get('a')).toEqual([id])

    // Named by its external id and, in an event, by its email: found by both, one profile.
    const third = await transaction()
    const both = await apply(third, 'c', { attributes: [attributes({ kind: 'external_id', value: externalId }, { last_name: 'Lovelace' })], events: [event(0, { kind: 'email', value: email })] })
    await commit(third)
    expect(both.owners.get('c')).toEqual([id])
    const profiles = await env.ctx.pg.query('SELECT id, first_name, last_name, version FROM profiles WHERE workspace_id = $1', [ws])
    expect(profiles.rows).toEqual([{ id, first_name: 'Ada', last_name: 'Lovelace', version: 3 }])
  })
})

describe('profiles sharing an email', () => {
  it('have their last occurrences read only when an identifier of the batch names that email, and the later one is found by it', async () => {
    const ws = randomUUID()
    const email = `shared-${randomUUID()}@example.com`
    const [older, newer] = [`x-${randomUUID()}`, `x-${randomUUID()}`]
    const ids: number[] = []
    for (const externalId of [older, newer]) {
      const r = await env.ctx.pg.query<{ id: number }>(
        `INSERT INTO profiles (workspace_id, service_id, external_id, email, random_bucket, updated_at) VALUES ($1, $2, $3, $4, 1, '2026-01-01T00:00:00Z') RETURNING id`,
        [ws, randomUUID(), externalId, email],
      )
      ids.push(r.rows[0].id)
    }
    const time = '2026-02-01T00:00:00.000Z'
    const asked: number[][] = []
    // The second profile's last occurrence is the later one: by its rows alone the two tie.
    const occurrences = async (_ws: string, profileIds: number[]) => {
      asked.push([...profileIds].sort((a, b) => a - b))
      return new Map(profileIds.filter((id) => id === ids[1]).map((id) => [id, '2026-01-15T00:00:00.000Z']))
    }
    const event = (identifier: { kind: 'external_id' | 'email'; value: string }) => ({ index: 0, identifier, time, properties: {}, name: 'played' })
    const apply = async (key: string, identifiers: { kind: 'external_id' | 'email'; value: string }[]) => {
      const db = await transaction()
      const applied = await applyTrackJobs(db, [{ key, job: job(ws, { events: identifiers.map((identifier, index) => ({ ...event(identifier), index })) }) }], time, occurrences)
      await commit(db)
      return applied.owners.get(key)
    }

    // Both holders named by external id only: the email is never looked up, so nothing is read.
    expect(await apply('by-id', [{ kind: 'external_id', value: older }, { kind: 'external_id', value: newer }])).toEqual(ids)
    expect(asked).toEqual([[]])
    // Named by the email: both holders' occurrences are read and the later one owns the event.
    expect(await apply('by-email', [{ kind: 'email', value: email }])).toEqual([ids[1]])
    expect(asked).toEqual([[], [...ids].sort((a, b) => a - b)])
  })
})
