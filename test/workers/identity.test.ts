import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { countEvents, readEventSummaries } from '../../shared/clickhouse/event-repository.js'
import { withSummaries } from '../../shared/domain/user-record.js'
import { readSnapshots } from '../../shared/clickhouse/snapshot-repository.js'
import { withTransaction } from '../../shared/db/pool.js'
import { recordAppliedBatch } from '../../shared/db/repositories/job-ledger-repository.js'
import { ReadPriority } from '../../workers/engine/priority.js'
import { applyIdentityTransaction, createIdentityProcessor } from '../../workers/identity/processor.js'
import { occurrenceRecency } from '../../workers/occurrence-recency.js'
import type { IdentityJob } from '../../shared/queue/identity-jobs.js'
import { startTestEnv, type TestEnv } from '../helpers/harness.js'
import { until } from '../helpers/wait.js'

let env: TestEnv
let ws: { id: string; key: string }

beforeAll(async () => {
  env = await startTestEnv({ workers: ['track', 'identity'] })
})
afterAll(async () => {
  await env.close()
})
// A workspace per test: every user, snapshot and event row below belongs to that test alone.
beforeEach(async () => {
  ws = await env.workspace()
})

/** Sends a queued write and waits until it is applied; returns its progress (errors included). */
async function send(path: string, body: unknown, on = env, key = ws.key) {
  const r = await on.call('POST', path, { key, body })
  expect(r.status, r.text).toBeLessThan(300)
  const progress = await on.waitForRequest(key, r.headers.get('x-request-id')!)
  expect(progress.status).toBe('done')
  return progress
}
const track = (body: unknown) => send('/users/track', body)
const merge = (...merge_updates: unknown[]) => send('/users/merge', { merge_updates })
const identify = (body: unknown) => send('/users/identify', body)
const remove = (body: unknown) => send('/users/delete', body)

const read = (body: unknown, on = env, key = ws.key) => on.readUsers(key, body)
const one = async (body: unknown) => {
  const { users } = await read(body)
  expect(users).toHaveLength(1)
  return users[0]
}
async function profileId(serviceId: string): Promise<number> {
  const r = await env.ctx.pg.query<{ id: number }>('SELECT id FROM profiles WHERE service_id = $1', [serviceId])
  return Number(r.rows[0].id)
}
const alias = (alias_name: string) => ({ alias_name, alias_label: 'crm' })
const ago = (hours: number) => new Date(Date.now() - hours * 3600_000).toISOString()

describe('merge', () => {
  it('carries over every missing field, custom attributes, tokens, aliases and subscription states; the merged user is gone', async () => {
    const group = async (name: string) =>
      (await env.admin('POST', `/admin/v1/workspaces/${ws.id}/subscription_groups`, { name, channel: 'email' })).body.subscription_group_id as string
    const [g1, g2] = [await group('news'), await group('offers')]
    await track({
      attributes: [
        {
          external_id: 'keep', first_name: 'Kay', country: 'US', plan: 'gold', shared: 'kept',
          push_tokens: [{ app_id: 'app', token: 'tk-keep' }],
          subscription_groups: [{ subscription_group_id: g1, subscription_state: 'subscribed' }],
        },
        {
          user_alias: alias('m-alias'), _update_existing_only: false,
          first_name: 'Em', last_name: 'Merged', email: 'Em@Example.com', gender: 'F', dob: '1990-01-02', phone: '+14155552671',
          time_zone: 'Europe/Paris', home_city: 'Paris', country: 'FR', language: 'fr', email_subscribe: 'opted_in', push_subscribe: 'subscribed',
          shared: 'merged', visits: 3,
          push_tokens: [{ app_id: 'app', token: 'tk-merge', device_id: 'dev-1' }],
          subscription_groups: [
            { subscription_group_id: g1, subscription_state: 'unsubscribed' },
            { subscription_group_id: g2, subscription_state: 'subscribed' },
          ],
        },
      ],
    })
    const merged = await one({ user_aliases: [alias('m-alias')] })
    await merge({ identifier_to_merge: { user_alias: alias('m-alias') }, identifier_to_keep: { external_id: 'keep' } })

    const kept = await one({ external_ids: ['keep'] })
    expect(kept).toMatchObject({
      first_name: 'Kay', last_name: 'Merged', email: 'em@example.com', gender: 'F', dob: '1990-01-02', phone: '+14155552671',
      time_zone: 'Europe/Paris', home_city: 'Paris', country: 'US', language: 'fr', email_subscribe: 'opted_in', push_subscribe: 'subscribed',
      custom_attributes: { plan: 'gold', shared: 'kept', visits: 3 },
      user_aliases: [alias('m-alias')],
    })
    expect(kept.push_tokens.map((t: { token: string; device_id?: string }) => [t.token, t.device_id])).toEqual(
      expect.arrayContaining([['tk-keep', undefined], ['tk-merge', 'dev-1']]),
    )
    expect(kept.subscription_groups).toEqual(
      [
        { subscription_group_id: g1, subscription_state: 'subscribed' },
        { subscription_group_id: g2, subscription_state: 'subscribed' },
      ].sort((a, b) => a.subscription_group_id.localeCompare(b.subscription_group_id)),
    )
    expect((await one({ user_aliases: [alias('m-alias')] })).external_id).toBe('keep')
    expect(await read({ service_id: merged.service_id })).toMatchObject({ users: [], invalid_user_ids: [merged.service_id] })
  })

  it('sums counts, takes the earlier first and the later last, and moves the ClickHouse history to the kept user', async () => {
    const [t1, t2, t3, t4] = [ago(4), ago(3), ago(2), ago(1)]
    await track({
      events: [
        { external_id: 'k2', name: 'played', time: t2 },
        { external_id: 'm2', name: 'played', time: t1 },
        { external_id: 'm2', name: 'played', time: t4 },
        { external_id: 'm2', name: 'opened', time: t2 },
      ],
      purchases: [
        { external_id: 'k2', product_id: 'sku', currency: 'USD', price: 5, time: t3 },
        { external_id: 'm2', product_id: 'sku', currency: 'USD', price: 7, time: t1 },
      ],
    })
    const k = await profileId((await one({ external_ids: ['k2'] })).service_id)
    const m = await profileId((await one({ external_ids: ['m2'] })).service_id)
    expect(await countEvents(env.clickhouse, ws.id, [m])).toEqual([{ kind: 'event', n: 3 }, { kind: 'purchase', n: 1 }])

    await merge({ identifier_to_merge: { external_id: 'm2' }, identifier_to_keep: { external_id: 'k2' } })

    const kept = await one({ external_ids: ['k2'] })
    expect(kept.custom_events).toEqual([
      { name: 'opened', first: t2, last: t2, count: 1 },
      { name: 'played', first: t1, last: t4, count: 3 },
    ])
    expect(kept.purchases).toEqual([{ name: 'sku', first: t1, last: t3, count: 2 }])
    expect(await countEvents(env.clickhouse, ws.id, [k])).toEqual([{ kind: 'event', n: 4 }, { kind: 'purchase', n: 2 }])
    expect(await countEvents(env.clickhouse, ws.id, [m])).toEqual([])
    const snapshots = await readSnapshots(env.clickhouse, ws.id, [k, m])
    expect([...snapshots.keys()]).toEqual([k])
    // Exports read the kept user's summaries from the history, the merged user's events now under k.
    const fromHistory = (await readEventSummaries(env.clickhouse, ws.id, [k, m])).get(k)!
    expect(withSummaries(snapshots.get(k)!, fromHistory)).toMatchObject({ custom_events: kept.custom_events, purchases: kept.purchases })
    expect(await read({ external_ids: ['m2'] })).toMatchObject({ users: [], invalid_user_ids: ['m2'] })
  })

  it('hands the external id of an identified user to the alias-only user it is merged into', async () => {
    await track({ attributes: [{ user_alias: alias('k3'), _update_existing_only: false, first_name: 'A' }, { external_id: 'm3', last_name: 'B' }] })
    const keptBefore = await one({ user_aliases: [alias('k3')] })
    await merge({ identifier_to_merge: { external_id: 'm3' }, identifier_to_keep: { user_alias: alias('k3') } })
    expect(await one({ external_ids: ['m3'] })).toMatchObject({
      service_id: keptBefore.service_id, first_name: 'A', last_name: 'B', user_aliases: [alias('k3')],
    })
  })

  it('merges the user the prioritization names, and nobody while it still names several', async () => {
    // Three users share an email: two alias-only ones (updated one after the other) and an identified one.
    await track({ attributes: [{ user_alias: alias('old'), _update_existing_only: false, email: 'dup@example.com', first_name: 'Old' }] })
    await track({ attributes: [{ user_alias: alias('new'), _update_existing_only: false, email: 'dup@example.com', first_name: 'New' }] })
    await track({ attributes: [{ external_id: 'dup-keep', email: 'dup@example.com' }] })
    const toKeep = { external_id: 'dup-keep' }

    const ambiguous = await merge({ identifier_to_merge: { email: 'DUP@example.com', prioritization: ['unidentified'] }, identifier_to_keep: toKeep })
    expect(ambiguous.errors).toEqual([
      { type: 'ambiguous_user', input_array: 'merge_updates', index: 0, message: 'email dup@example.com matches 2 users after prioritization; nothing was changed' },
    ])
    expect((await read({ email_address: 'dup@example.com' })).users).toHaveLength(3)

    const picked = await merge({ identifier_to_merge: { email: 'dup@example.com', prioritization: ['unidentified', 'most_recently_updated'] }, identifier_to_keep: toKeep })
    expect(picked.errors).toBeUndefined()
    expect(await one({ external_ids: ['dup-keep'] })).toMatchObject({ first_name: 'New', user_aliases: [alias('new')] })
    expect((await read({ email_address: 'dup@example.com' })).users).toHaveLength(2)
    expect((await one({ user_aliases: [alias('old')] })).first_name).toBe('Old')
  })

  it('counts an event as an update when the prioritization asks for the most recently updated user', async () => {
    // Two alias-only users share an email; the first one's attributes are older, but it got an event since.
    await track({ attributes: [{ user_alias: alias('ev-first'), _update_existing_only: false, email: 'ev@example.com', first_name: 'First' }] })
    await track({ attributes: [{ user_alias: alias('ev-second'), _update_existing_only: false, email: 'ev@example.com', first_name: 'Second' }] })
    await track({ events: [{ user_alias: alias('ev-first'), name: 'opened', time: new Date().toISOString() }] })
    await track({ attributes: [{ external_id: 'ev-keep' }] })

    const picked = await merge({ identifier_to_merge: { email: 'ev@example.com', prioritization: ['most_recently_updated'] }, identifier_to_keep: { external_id: 'ev-keep' } })
    expect(picked.errors).toBeUndefined()
    expect(await one({ external_ids: ['ev-keep'] })).toMatchObject({ first_name: 'First', user_aliases: [alias('ev-first')] })
    expect((await one({ user_aliases: [alias('ev-second')] })).first_name).toBe('Second')
  })

  it('changes nothing and reports why when an identifier names nobody or both name the same user', async () => {
    await track({ attributes: [{ external_id: 'solo', first_name: 'S' }] })
    const before = await one({ external_ids: ['solo'] })
    const progress = await merge(
      { identifier_to_merge: { external_id: 'nobody' }, identifier_to_keep: { external_id: 'solo' } },
      { identifier_to_merge: { external_id: 'solo' }, identifier_to_keep: { external_id: 'solo' } },
      { identifier_to_merge: { external_id: 'solo' }, identifier_to_keep: { user_alias: alias('missing') } },
    )
    expect(progress.errors).toEqual([
      { type: 'user_not_found', input_array: 'merge_updates', index: 0, message: 'no user found for external_id nobody' },
      { type: 'same_user', input_array: 'merge_updates', index: 1, message: 'identifier_to_merge and identifier_to_keep name the same user; nothing was merged' },
      { type: 'user_not_found', input_array: 'merge_updates', index: 2, message: 'no user found for user_alias crm/missing' },
    ])
    expect(await one({ external_ids: ['solo'] })).toEqual(before)
  })
})

describe('identify', () => {
  it('gives the alias-only user the external id when nobody has it', async () => {
    await track({
      attributes: [{ user_alias: alias('anon-1'), _update_existing_only: false, first_name: 'Anon' }],
      events: [{ user_alias: alias('anon-1'), name: 'viewed', time: ago(1) }],
    })
    const before = await one({ user_aliases: [alias('anon-1')] })
    await identify({ aliases_to_identify: [{ external_id: 'fresh', user_alias: alias('anon-1') }] })
    const after = await one({ external_ids: ['fresh'] })
    expect(after).toEqual({ ...before, external_id: 'fresh' })
  })

  it('merges the alias-only user into the identified user who has the external id (merge_behavior none merges too)', async () => {
    await track({
      attributes: [
        { external_id: 'known', first_name: 'Known', tier: 'gold' },
        { user_alias: alias('anon-2'), _update_existing_only: false, last_name: 'Visitor', tier: 'free', color: 'red' },
      ],
      events: [
        { external_id: 'known', name: 'viewed', time: ago(2) },
        { user_alias: alias('anon-2'), name: 'viewed', time: ago(1) },
        { user_alias: alias('anon-2'), name: 'viewed', time: ago(3) },
      ],
    })
    const anonymous = await one({ user_aliases: [alias('anon-2')] })
    const a = await profileId(anonymous.service_id)
    await identify({ aliases_to_identify: [{ external_id: 'known', user_alias: alias('anon-2') }], merge_behavior: 'none' })

    const known = await one({ external_ids: ['known'] })
    expect(known).toMatchObject({
      first_name: 'Known', last_name: 'Visitor', custom_attributes: { tier: 'gold', color: 'red' }, user_aliases: [alias('anon-2')],
      custom_events: [{ name: 'viewed', first: anonymous.custom_events[0].first, last: anonymous.custom_events[0].last, count: 3 }],
    })
    expect((await one({ user_aliases: [alias('anon-2')] })).external_id).toBe('known')
    const k = await profileId(known.service_id)
    expect(await countEvents(env.clickhouse, ws.id, [k])).toEqual([{ kind: 'event', n: 3 }])
    expect(await countEvents(env.clickhouse, ws.id, [a])).toEqual([])
    expect((await readSnapshots(env.clickhouse, ws.id, [a])).size).toBe(0)
  })

  it('identifies an email-only user found with prioritization', async () => {
    await track({ attributes: [{ email: 'walkin@example.com', first_name: 'Walk' }] })
    await identify({ emails_to_identify: [{ external_id: 'walkin', email: 'WALKIN@example.com', prioritization: ['unidentified'] }] })
    expect(await one({ external_ids: ['walkin'] })).toMatchObject({ first_name: 'Walk', email: 'walkin@example.com' })
  })

  it('identifies a phone-only user found with prioritization, merging it into the user who has the external id', async () => {
    await track({ attributes: [{ phone: '+1 415 555 2671', first_name: 'Caller' }, { external_id: 'caller', last_name: 'Known' }] })
    const progress = await identify({ phone_numbers_to_identify: [{ external_id: 'caller', phone: '+14155552671', prioritization: ['unidentified', 'most_recently_updated'] }] })
    expect(progress.errors).toBeUndefined()
    expect(await one({ external_ids: ['caller'] })).toMatchObject({ first_name: 'Caller', last_name: 'Known', phone: '+14155552671' })
    expect((await env.readUsers(ws.key, { phone: '+14155552671' })).users.map((u: any) => u.external_id)).toEqual(['caller'])

    const missing = await identify({ phone_numbers_to_identify: [{ external_id: 'nobody', phone: '+14155550000', prioritization: ['unidentified'] }] })
    expect(missing.errors).toEqual([expect.objectContaining({ type: 'user_not_found', input_array: 'phone_numbers_to_identify', index: 0 })])
  })

  it('ties a new alias to the identified user, and reports aliases it cannot identify', async () => {
    await track({ attributes: [{ external_id: 'owner' }, { external_id: 'other' }] })
    await identify({ aliases_to_identify: [{ external_id: 'owner', user_alias: alias('second') }] })
    expect((await one({ user_aliases: [alias('second')] })).external_id).toBe('owner')

    const progress = await identify({
      aliases_to_identify: [
        { external_id: 'nobody-yet', user_alias: alias('unknown') },
        { external_id: 'other', user_alias: alias('second') },
      ],
    })
    expect(progress.errors).toEqual([
      { type: 'user_not_found', input_array: 'aliases_to_identify', index: 0, message: 'no user found for user_alias crm/unknown' },
      {
        type: 'already_identified', input_array: 'aliases_to_identify', index: 1,
        message: 'user_alias crm/second is already identified with another external_id; nothing was changed',
      },
    ])
    expect((await one({ user_aliases: [alias('second')] })).external_id).toBe('owner')
  })
})

describe('delete', () => {
  const lookupFor = (identity: Record<string, unknown>) =>
    identity.external_id ? { external_ids: [identity.external_id] } : identity.user_alias ? { user_aliases: [identity.user_alias] } : { email_address: identity.email }

  /** A user with a push token, an event and a purchase, checked present in ClickHouse first. */
  async function userWithHistory(identity: Record<string, unknown>, name: string) {
    await track({
      attributes: [{ ...identity, _update_existing_only: false, first_name: name, push_tokens: [{ app_id: 'app', token: `tk-${name}` }] }],
      events: [{ ...identity, name: 'viewed', time: ago(1) }],
      purchases: [{ ...identity, product_id: 'sku', currency: 'USD', price: 1, time: ago(1) }],
    })
    const user = await one(lookupFor(identity))
    const id = await profileId(user.service_id)
    expect(await countEvents(env.clickhouse, ws.id, [id])).toEqual([{ kind: 'event', n: 1 }, { kind: 'purchase', n: 1 }])
    expect((await readSnapshots(env.clickhouse, ws.id, [id])).size).toBe(1)
    return { id, serviceId: user.service_id as string }
  }
  async function expectErased(id: number, lookup: unknown) {
    expect((await read(lookup)).users).toEqual([])
    expect(await countEvents(env.clickhouse, ws.id, [id])).toEqual([])
    expect((await readSnapshots(env.clickhouse, ws.id, [id])).size).toBe(0)
    const rows = await env.ctx.pg.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM profiles WHERE id = $1) + (SELECT count(*) FROM profile_aliases WHERE profile_id = $1)
            + (SELECT count(*) FROM push_tokens WHERE profile_id = $1) + (SELECT count(*) FROM profile_subscriptions WHERE profile_id = $1) AS n`,
      [id],
    )
    expect(Number(rows.rows[0].n)).toBe(0)
  }

  it('erases a user named by each kind of identifier, in Postgres and ClickHouse, and leaves others alone', async () => {
    const bystander = await userWithHistory({ external_id: 'bystander' }, 'bystander')
    const byExternalId = await userWithHistory({ external_id: 'gone-1' }, 'gone-1')
    await remove({ external_ids: ['gone-1'] })
    await expectErased(byExternalId.id, { external_ids: ['gone-1'] })

    const byAlias = await userWithHistory({ user_alias: alias('gone-2') }, 'gone-2')
    await remove({ user_aliases: [alias('gone-2')] })
    await expectErased(byAlias.id, { user_aliases: [alias('gone-2')] })

    const byServiceId = await userWithHistory({ external_id: 'gone-3' }, 'gone-3')
    await remove({ service_ids: [byServiceId.serviceId] })
    await expectErased(byServiceId.id, { service_id: byServiceId.serviceId })

    const byBrazeId = await userWithHistory({ external_id: 'gone-5' }, 'gone-5')
    await remove({ braze_ids: [byBrazeId.serviceId] })
    await expectErased(byBrazeId.id, { braze_id: byBrazeId.serviceId })

    const byEmail = await userWithHistory({ email: 'gone-4@example.com' }, 'gone-4')
    await remove({ email_addresses: [{ email: 'Gone-4@Example.com', prioritization: ['unidentified'] }] })
    await expectErased(byEmail.id, { email_address: 'gone-4@example.com' })

    expect((await one({ external_ids: ['bystander'] })).first_name).toBe('bystander')
    expect(await countEvents(env.clickhouse, ws.id, [bystander.id])).toEqual([{ kind: 'event', n: 1 }, { kind: 'purchase', n: 1 }])
    expect(await countEvents(env.clickhouse, ws.id)).toEqual([{ kind: 'event', n: 1 }, { kind: 'purchase', n: 1 }])
  })

  it('deletes nobody when the email still names several users, and reports unknown users', async () => {
    await track({ attributes: [{ user_alias: alias('s1'), _update_existing_only: false, email: 'shared@example.com' }] })
    await track({ attributes: [{ user_alias: alias('s2'), _update_existing_only: false, email: 'shared@example.com' }] })
    const ambiguous = await remove({ email_addresses: [{ email: 'shared@example.com', prioritization: ['unidentified'] }] })
    expect(ambiguous.errors).toEqual([
      { type: 'ambiguous_user', input_array: 'email_addresses', index: 0, message: 'email shared@example.com matches 2 users after prioritization; nothing was changed' },
    ])
    expect((await read({ email_address: 'shared@example.com' })).users).toHaveLength(2)
    const unknown = await remove({ external_ids: ['never-existed'] })
    expect(unknown.errors).toEqual([{ type: 'user_not_found', input_array: 'external_ids', index: 0, message: 'no user found for external_id never-existed' }])
  })
})

describe('order and safety', () => {
  it('applies a track request accepted before a merge first, even when the identity worker starts first', async () => {
    const local = await startTestEnv()
    try {
      const w = await local.workspace()
      const accept = async (path: string, body: unknown) => {
        const r = await local.call('POST', path, { key: w.key, body })
        expect(r.status, r.text).toBeLessThan(300)
        return r.headers.get('x-request-id')!
      }
      await accept('/users/track', { attributes: [{ external_id: 'early-keep', first_name: 'Keep' }] })
      await accept('/users/track', { attributes: [{ external_id: 'early-merge', last_name: 'Late' }], events: [{ external_id: 'early-merge', name: 'late', time: ago(1) }] })
      const mergeRequest = await accept('/users/merge', {
        merge_updates: [{ identifier_to_merge: { external_id: 'early-merge' }, identifier_to_keep: { external_id: 'early-keep' } }],
      })
      await local.startWorkers(['identity'])
      // Once the merge job has started, it must be held at the barrier: no track worker runs yet.
      const status = async () => (await local.call('GET', `/requests/${mergeRequest}`, { key: w.key })).body.status
      expect(await until('the merge job to start', status, (s) => s !== 'queued', 10_000)).toBe('processing')
      await local.startWorkers(['track'])
      expect(await local.waitForRequest(w.key, mergeRequest)).toEqual({ request_id: mergeRequest, status: 'done' })

      const { users } = await read({ external_ids: ['early-keep', 'early-merge'] }, local, w.key)
      expect(users).toHaveLength(1)
      expect(users[0]).toMatchObject({ external_id: 'early-keep', first_name: 'Keep', last_name: 'Late', custom_events: [{ name: 'late', count: 1 }] })
      const id = Number((await local.ctx.pg.query('SELECT id FROM profiles WHERE service_id = $1', [users[0].service_id])).rows[0].id)
      expect(await countEvents(local.clickhouse, w.id, [id])).toEqual([{ kind: 'event', n: 1 }])
      expect(await countEvents(local.clickhouse, w.id)).toEqual([{ kind: 'event', n: 1 }])
    } finally {
      await local.close()
    }
  })

  it('applies a merge exactly once when the worker dies between the Postgres commit and ClickHouse, and ignores a repeat', async () => {
    const t = ago(2)
    await track({ events: [{ external_id: 'ck', name: 'e', time: t }, { external_id: 'cm', name: 'e', time: t }, { external_id: 'cm', name: 'e', time: t }] })
    const m = await profileId((await one({ external_ids: ['cm'] })).service_id)
    const job: IdentityJob = {
      workspaceId: ws.id,
      requestId: 'crash-request',
      acceptedAt: Date.now(),
      operations: [{ type: 'merge', index: 0, toMerge: { kind: 'external_id', value: 'cm' }, toKeep: { kind: 'external_id', value: 'ck' } }],
    }
    const key = `identity:crash-${ws.id}`
    // The first attempt commits its Postgres transaction (as applyBatchExactlyOnce does), then dies before touching ClickHouse.
    await withTransaction(env.ctx.pg, async (db) => {
      const applied = await applyIdentityTransaction(db, [{ key, job }], occurrenceRecency(env.clickhouse, db))
      expect(await recordAppliedBatch(db, [{ key, workspaceId: ws.id, errors: [] }], applied.outbox)).toBe(true)
    })
    expect(await countEvents(env.clickhouse, ws.id, [m])).toEqual([{ kind: 'event', n: 2 }])

    const processor = createIdentityProcessor({
      config: env.config, logger: env.ctx.logger, pg: env.ctx.pg, clickhouse: env.clickhouse,
      producer: { queues: env.ctx.queues, tracker: env.ctx.tracker }, metrics: env.metrics,
      readsFirst: () => new ReadPriority().yield(),
    })
    for (let attempt = 0; attempt < 2; attempt++) {
      expect(await processor.apply([{ id: `crash-${ws.id}`, data: job }])).toEqual([{ status: 'ok', applied: 1, errors: [] }])
    }

    const kept = await one({ external_ids: ['ck'] })
    expect(kept.custom_events).toEqual([{ name: 'e', first: t, last: t, count: 3 }])
    const k = await profileId(kept.service_id)
    expect(await countEvents(env.clickhouse, ws.id, [k])).toEqual([{ kind: 'event', n: 3 }])
    expect(await countEvents(env.clickhouse, ws.id, [m])).toEqual([])
    expect([...(await readSnapshots(env.clickhouse, ws.id, [k, m])).keys()]).toEqual([k])

    const repeat = await merge({ identifier_to_merge: { external_id: 'cm' }, identifier_to_keep: { external_id: 'ck' } })
    expect(repeat.errors).toEqual([{ type: 'user_not_found', input_array: 'merge_updates', index: 0, message: 'no user found for external_id cm' }])
    expect((await one({ external_ids: ['ck'] })).custom_events).toEqual(kept.custom_events)
  })
})
