import { randomBytes } from 'node:crypto'
import type pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { withTransaction } from '../../shared/db/pool.js'
import { applyPendingAddressStates } from '../../workers/pending-address-states.js'
import { applyEmailStateChanges, applySubscriptionChanges } from '../../workers/track/subscription-changes.js'
import type { SubscriptionChange } from '../../shared/queue/track-jobs.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'

let env: TestEnv
let ws: string
let emailGroup: string
let smsGroup: string

beforeAll(async () => {
  env = await startTestEnv()
  ws = (await env.workspace()).id
  const group = async (name: string, channel: string) =>
    (await env.admin('POST', `/admin/v1/workspaces/${ws}/subscription_groups`, { name, channel })).body.subscription_group_id as string
  emailGroup = await group('news', 'email')
  smsGroup = await group('texts', 'sms')
})
afterAll(async () => {
  await env.close()
})

const inTransaction = <T>(fn: (db: pg.PoolClient) => Promise<T>) => withTransaction(env.ctx.pg, fn)

async function profile(keys: { external_id?: string; email?: string; phone?: string }): Promise<number> {
  const r = await env.ctx.pg.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, email, phone, random_bucket) VALUES ($1, $2, $3, $4, $5, 0) RETURNING id`,
    [ws, randomBytes(12).toString('hex'), keys.external_id ?? null, keys.email ?? null, keys.phone ?? null],
  )
  return r.rows[0].id
}

async function groupStates(ids: number[], groupId: string): Promise<Record<number, string | undefined>> {
  const r = await env.ctx.pg.query('SELECT profile_id, state FROM profile_subscriptions WHERE profile_id = ANY($1::bigint[]) AND group_id = $2', [ids, groupId])
  const found = new Map(r.rows.map((x) => [x.profile_id as number, x.state as string]))
  return Object.fromEntries(ids.map((id) => [id, found.get(id)]))
}

async function versions(ids: number[]): Promise<number[]> {
  const r = await env.ctx.pg.query('SELECT id, version FROM profiles WHERE id = ANY($1::bigint[])', [ids])
  const byId = new Map(r.rows.map((x) => [x.id as number, x.version as number]))
  return ids.map((id) => byId.get(id)!)
}

async function emailSubscribe(id: number): Promise<string | null> {
  return (await env.ctx.pg.query('SELECT email_subscribe FROM profiles WHERE id = $1', [id])).rows[0].email_subscribe
}

const change = (kind: SubscriptionChange['key']['kind'], value: string, group: string, state: 'subscribed' | 'unsubscribed'): SubscriptionChange => ({
  key: { kind, value },
  subscription_group_id: group,
  subscription_state: state,
})

describe('applySubscriptionChanges', () => {
  it('sets the profile of an external id, returns it and bumps its version; a repeat changes nothing', async () => {
    const id = await profile({ external_id: 'w-ext' })
    const [before] = await versions([id])
    const changed = await inTransaction((db) => applySubscriptionChanges(db, ws, [change('external_id', 'w-ext', emailGroup, 'subscribed')]))
    expect(changed).toEqual([id])
    expect(await groupStates([id], emailGroup)).toEqual({ [id]: 'subscribed' })
    expect(await versions([id])).toEqual([before + 1])

    expect(await inTransaction((db) => applySubscriptionChanges(db, ws, [change('external_id', 'w-ext', emailGroup, 'subscribed')]))).toEqual([])
    expect(await versions([id])).toEqual([before + 1])
  })

  it('ignores an external id no profile has', async () => {
    const changed = await inTransaction((db) => applySubscriptionChanges(db, ws, [change('external_id', 'w-nobody', emailGroup, 'subscribed')]))
    expect(changed).toEqual([])
    const r = await env.ctx.pg.query('SELECT count(*)::int AS n FROM profiles WHERE workspace_id = $1 AND external_id = $2', [ws, 'w-nobody'])
    expect(r.rows[0].n).toBe(0)
  })

  it('sets every profile having an email and stores the state for the address', async () => {
    const a = await profile({ external_id: 'w-share-a', email: 'w-share@example.com' })
    const b = await profile({ email: 'w-share@example.com' })
    const other = await profile({ email: 'w-other@example.com' })
    const changed = await inTransaction((db) => applySubscriptionChanges(db, ws, [change('email', 'w-share@example.com', emailGroup, 'unsubscribed')]))
    expect(changed.sort()).toEqual([a, b].sort())
    expect(await groupStates([a, b, other], emailGroup)).toEqual({ [a]: 'unsubscribed', [b]: 'unsubscribed', [other]: undefined })
    const stored = await env.ctx.pg.query('SELECT state FROM address_subscriptions WHERE group_id = $1 AND address = $2', [emailGroup, 'w-share@example.com'])
    expect(stored.rows).toEqual([{ state: 'unsubscribed' }])
  })

  it('lets the last change of a job win for a profile named by several keys', async () => {
    const id = await profile({ external_id: 'w-last', phone: '+14155550160' })
    await inTransaction((db) =>
      applySubscriptionChanges(db, ws, [
        change('external_id', 'w-last', smsGroup, 'subscribed'),
        change('phone', '+14155550160', smsGroup, 'unsubscribed'),
        change('external_id', 'w-last', emailGroup, 'unsubscribed'),
        change('external_id', 'w-last', emailGroup, 'subscribed'),
      ]),
    )
    expect(await groupStates([id], smsGroup)).toEqual({ [id]: 'unsubscribed' })
    expect(await groupStates([id], emailGroup)).toEqual({ [id]: 'subscribed' })
  })

  it('skips changes for a group deleted since the request was accepted', async () => {
    const id = await profile({ external_id: 'w-gone' })
    const changed = await inTransaction((db) => applySubscriptionChanges(db, ws, [change('external_id', 'w-gone', 'deleted-group', 'subscribed')]))
    expect(changed).toEqual([])
    expect(await groupStates([id], 'deleted-group')).toEqual({ [id]: undefined })
  })
})

describe('applyEmailStateChanges', () => {
  it('stores the state for the address and sets it on every profile having it, the last change winning', async () => {
    const a = await profile({ email: 'w-state@example.com' })
    const b = await profile({ email: 'w-state@example.com' })
    const changed = await inTransaction((db) =>
      applyEmailStateChanges(db, ws, [
        { email: 'w-state@example.com', subscription_state: 'subscribed' },
        { email: 'w-state@example.com', subscription_state: 'opted_in' },
        { email: 'w-nobody@example.com', subscription_state: 'unsubscribed' },
      ]),
    )
    expect(changed.sort()).toEqual([a, b].sort())
    expect([await emailSubscribe(a), await emailSubscribe(b)]).toEqual(['opted_in', 'opted_in'])
    const stored = await env.ctx.pg.query('SELECT email, state FROM email_states WHERE workspace_id = $1 AND email LIKE $2 ORDER BY email', [ws, 'w-%'])
    expect(stored.rows).toEqual([
      { email: 'w-nobody@example.com', state: 'unsubscribed' },
      { email: 'w-state@example.com', state: 'opted_in' },
    ])
    expect(await inTransaction((db) => applyEmailStateChanges(db, ws, [{ email: 'w-state@example.com', subscription_state: 'opted_in' }]))).toEqual([])
  })
})

describe('applyPendingAddressStates', () => {
  it('gives a profile that gets an address the group and email states stored for it', async () => {
    await inTransaction(async (db) => {
      await applySubscriptionChanges(db, ws, [
        change('email', 'w-pending@example.com', emailGroup, 'subscribed'),
        change('phone', '+14155550170', smsGroup, 'unsubscribed'),
      ])
      await applyEmailStateChanges(db, ws, [{ email: 'w-pending@example.com', subscription_state: 'unsubscribed' }])
    })
    const id = await profile({ email: 'w-pending@example.com', phone: '+14155550170' })
    const [before] = await versions([id])
    const changed = await inTransaction((db) => applyPendingAddressStates(db, ws, [{ id, email: 'w-pending@example.com', phone: '+14155550170' }]))
    expect(changed).toEqual([id])
    expect(await groupStates([id], emailGroup)).toEqual({ [id]: 'subscribed' })
    expect(await groupStates([id], smsGroup)).toEqual({ [id]: 'unsubscribed' })
    expect(await emailSubscribe(id)).toBe('unsubscribed')
    expect(await versions([id])).toEqual([before + 1])

    expect(await inTransaction((db) => applyPendingAddressStates(db, ws, [{ id, email: 'w-pending@example.com', phone: '+14155550170' }]))).toEqual([])
  })

  it("keeps a profile's own group state written after the one stored for the address", async () => {
    await inTransaction((db) => applySubscriptionChanges(db, ws, [change('email', 'w-older@example.com', emailGroup, 'unsubscribed')]))
    const id = await profile({ external_id: 'w-own' })
    await inTransaction((db) => applySubscriptionChanges(db, ws, [change('external_id', 'w-own', emailGroup, 'subscribed')]))
    await env.ctx.pg.query('UPDATE profiles SET email = $2 WHERE id = $1', [id, 'w-older@example.com'])
    const changed = await inTransaction((db) => applyPendingAddressStates(db, ws, [{ id, email: 'w-older@example.com', phone: null }]))
    expect(changed).toEqual([])
    expect(await groupStates([id], emailGroup)).toEqual({ [id]: 'subscribed' })
  })

  it('replaces an older own group state with a newer one stored for the address', async () => {
    const id = await profile({ external_id: 'w-stale' })
    await inTransaction((db) => applySubscriptionChanges(db, ws, [change('external_id', 'w-stale', emailGroup, 'subscribed')]))
    await inTransaction((db) => applySubscriptionChanges(db, ws, [change('email', 'w-newer@example.com', emailGroup, 'unsubscribed')]))
    await env.ctx.pg.query('UPDATE profiles SET email = $2 WHERE id = $1', [id, 'w-newer@example.com'])
    const changed = await inTransaction((db) => applyPendingAddressStates(db, ws, [{ id, email: 'w-newer@example.com', phone: null }]))
    expect(changed).toEqual([id])
    expect(await groupStates([id], emailGroup)).toEqual({ [id]: 'unsubscribed' })
  })

  it('does nothing for profiles without addresses or without stored states', async () => {
    const id = await profile({ email: 'w-plain@example.com' })
    expect(await inTransaction((db) => applyPendingAddressStates(db, ws, [{ id, email: null, phone: null }]))).toEqual([])
    expect(await inTransaction((db) => applyPendingAddressStates(db, ws, [{ id, email: 'w-plain@example.com', phone: null }]))).toEqual([])
  })
})
