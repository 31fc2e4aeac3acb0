import type pg from 'pg'
import { addEventSummaries, type EventSummaryDelta } from '../../shared/db/repositories/event-summary-repository.js'
import type { Outbox } from '../../shared/db/repositories/job-ledger-repository.js'
import {
  allocateProfileIds,
  deleteProfiles,
  insertAliases,
  lockProfiles,
  profilesWithEmails,
  saveProfiles,
  setEmailSubscribe,
  touchProfiles,
  type ProfileLookup,
  type ProfileRow,
} from '../../shared/db/repositories/profile-repository.js'
import { upsertProfileSubscriptions, type ProfileSubscription } from '../../shared/db/repositories/profile-subscription-repository.js'
import { emptyAnonymousProfiles, findPushTokens, upsertPushTokens } from '../../shared/db/repositories/push-token-repository.js'
import { findSubscriptionGroups } from '../../shared/db/repositories/subscription-group-repository.js'
import { applyCustomAttribute } from '../../shared/domain/attributes.js'
import { describeIdentifier, type Identifier } from '../../shared/domain/identifiers.js'
import { ProfileIndex } from './profile-index.js'
import type { AttributeOp, EventOp, PurchaseOp, TrackJob } from './schema.js'
import { applyEmailStateChanges, applyPendingAddressStates, applySubscriptionChanges } from './subscription-changes.js'

export interface ObjectError {
  input_array: 'attributes' | 'events' | 'purchases'
  index: number
  message: string
}

const tokenKey = (appId: string, token: string) => `${appId}\u0000${token}`

/** Which identifiers may create a profile when nobody has them yet (interface.md 4.1 rules 4 and 6). */
function createsByDefault(id: Identifier): boolean {
  return id.kind === 'external_id' || id.kind === 'email' || id.kind === 'phone'
}

function lookupOf(job: TrackJob): ProfileLookup {
  const ids: Identifier[] = [
    ...job.attributes.flatMap((a) => (a.identifier ? [a.identifier] : [])),
    ...job.events.map((e) => e.identifier),
    ...job.purchases.map((p) => p.identifier),
  ]
  const values = (kind: Identifier['kind']) => [...new Set(ids.flatMap((i) => (i.kind === kind && 'value' in i ? [i.value] : [])))]
  return {
    externalIds: values('external_id'),
    serviceIds: values('service_id'),
    emails: values('email'),
    phones: values('phone'),
    aliases: ids.flatMap((i) => (i.kind === 'user_alias' ? [{ alias_label: i.alias_label, alias_name: i.alias_name }] : [])),
  }
}

/** An upper bound of the profiles a job can create: objects naming nobody yet, and imported tokens. */
function creationsAtMost(job: TrackJob, index: ProfileIndex): number {
  const unknown = (id: Identifier | undefined) => (id && !index.find(id) ? 1 : 0)
  const imports = job.attributes.filter((a) => a.pushTokenImport).reduce((n, a) => n + a.pushTokens.length, 0)
  const named = [...job.attributes.map((a) => a.identifier), ...job.events.map((e) => e.identifier), ...job.purchases.map((p) => p.identifier)]
  return imports + named.reduce((n, id) => n + unknown(id), 0)
}

/**
 * Applies one partition's share of a /users/track request inside the caller's transaction:
 * attributes, then events, then purchases, then subscription writes, each in request order.
 * Returns what ClickHouse still needs (event owners, profiles to snapshot, deletions).
 */
export async function applyTrackBatch(db: pg.PoolClient, job: TrackJob, now: string): Promise<Outbox> {
  const ws = job.workspaceId
  const errors: ObjectError[] = []
  const locked = await lockProfiles(db, ws, lookupOf(job))
  const idPool: number[] = []
  const index = new ProfileIndex(locked, ws, idPool, now)
  // Ids only for profiles the job may create: none at all in the common case of known users.
  idPool.push(...(await allocateProfileIds(db, creationsAtMost(job, index))))

  const tokens = job.attributes.flatMap((a) => a.pushTokens)
  const tokenOwners = new Map((await findPushTokens(db, ws, tokens)).map((t) => [tokenKey(t.app_id, t.token), t]))
  const tokenWrites = new Map<string, { app_id: string; token: string; profile_id: number; device_id: string | null }>()
  const formerTokenOwners = new Set<number>()

  const groupIds = [...new Set(job.attributes.flatMap((a) => a.subscriptionGroups.map((g) => g.subscription_group_id)))]
  const groups = await findSubscriptionGroups(db, ws, groupIds)
  const subscriptions: ProfileSubscription[] = []
  const sharedEmailChanges: { email: string; groups: ProfileSubscription[]; emailSubscribe?: string; source: number }[] = []
  const explicitEmailSubscribe = new Map<number, string>()

  const resolve = (id: Identifier, explicitUpdateExistingOnly: boolean | undefined, kind: ObjectError['input_array'], i: number) => {
    const found = index.find(id)
    if (found) return found
    const mayCreate = explicitUpdateExistingOnly === undefined ? createsByDefault(id) : !explicitUpdateExistingOnly
    if (mayCreate && id.kind !== 'service_id') return index.create(id)
    errors.push({ input_array: kind, index: i, message: `no user found for ${describeIdentifier(id)}` })
    return undefined
  }

  const attachTokens = (profile: ProfileRow, op: AttributeOp) => {
    for (const t of op.pushTokens) {
      const key = tokenKey(t.app_id, t.token)
      const owner = tokenWrites.get(key)?.profile_id ?? tokenOwners.get(key)?.profile_id
      if (owner !== undefined && owner !== profile.id) formerTokenOwners.add(owner)
      tokenWrites.set(key, { app_id: t.app_id, token: t.token, profile_id: profile.id, device_id: t.device_id ?? null })
    }
  }

  const applyAttributes = (profile: ProfileRow, op: AttributeOp) => {
    const before = { email: profile.email, phone: profile.phone, pushSubscribe: profile.push_subscribe }
    for (const [field, value] of Object.entries(op.fields)) {
      ;(profile as unknown as Record<string, unknown>)[field] = value
    }
    if (op.fields.push_subscribe === 'opted_in' && before.pushSubscribe !== 'opted_in') profile.push_opted_in_at = now
    for (const [name, value] of Object.entries(op.custom)) applyCustomAttribute(profile.custom_attributes, name, value)
    attachTokens(profile, op)
    const groupChanges: ProfileSubscription[] = []
    for (const g of op.subscriptionGroups) {
      if (!groups.has(g.subscription_group_id)) {
        errors.push({ input_array: 'attributes', index: op.index, message: `unknown subscription_group_id ${g.subscription_group_id}` })
        continue
      }
      groupChanges.push({ profile_id: profile.id, group_id: g.subscription_group_id, state: g.subscription_state })
    }
    subscriptions.push(...groupChanges)
    const emailSubscribeChanged = op.fields.email_subscribe !== undefined && op.fields.email_subscribe !== null
    if (emailSubscribeChanged) explicitEmailSubscribe.set(profile.id, op.fields.email_subscribe!)
    if (profile.email && (groupChanges.length || emailSubscribeChanged)) {
      sharedEmailChanges.push({
        email: profile.email,
        groups: groupChanges,
        emailSubscribe: emailSubscribeChanged ? op.fields.email_subscribe! : undefined,
        source: profile.id,
      })
    }
    if (profile.email !== before.email || profile.phone !== before.phone) index.addressChanged.add(profile.id)
    index.touch(profile)
  }

  for (const op of job.attributes) {
    if (op.pushTokenImport) {
      for (const t of op.pushTokens) {
        const key = tokenKey(t.app_id, t.token)
        if (tokenOwners.has(key) || tokenWrites.has(key)) continue
        const anonymous = index.create(undefined, { anonymous: true })
        applyAttributes(anonymous, { ...op, pushTokens: [t] })
      }
      continue
    }
    const profile = resolve(op.identifier!, op.updateExistingOnly, 'attributes', op.index)
    if (profile) applyAttributes(profile, op)
  }

  const summaries = new Map<string, EventSummaryDelta>()
  const eventOwners: (number | null)[] = []
  const record = (profile: ProfileRow, kind: 'event' | 'purchase', name: string, time: string) => {
    const key = `${profile.id}\u0000${kind}\u0000${name}`
    const s = summaries.get(key)
    if (!s) summaries.set(key, { profile_id: profile.id, kind, name, first_at: time, last_at: time, count: 1 })
    else {
      s.count += 1
      if (Date.parse(time) < Date.parse(s.first_at)) s.first_at = time
      if (Date.parse(time) > Date.parse(s.last_at)) s.last_at = time
    }
    index.touch(profile)
  }
  const applyOccurrence = (op: EventOp | PurchaseOp, kind: 'event' | 'purchase') => {
    const profile = resolve(op.identifier, undefined, kind === 'event' ? 'events' : 'purchases', op.index)
    eventOwners.push(profile?.id ?? null)
    if (profile) record(profile, kind, 'name' in op ? op.name : op.product_id, op.time)
  }
  for (const e of job.events) applyOccurrence(e, 'event')
  for (const p of job.purchases) applyOccurrence(p, 'purchase')

  const { created, changed } = index.rowsToSave()
  await saveProfiles(db, created, changed)
  await insertAliases(db, ws, index.newAliases)
  await upsertPushTokens(db, ws, [...tokenWrites.values()])
  await addEventSummaries(db, [...summaries.values()])

  const touched = new Set(index.touchedIds())
  const sharers = await applySharedEmailChanges(db, ws, sharedEmailChanges)
  await upsertProfileSubscriptions(db, [...subscriptions, ...sharers.subscriptions])
  for (const id of sharers.touched) touched.add(id)
  await touchProfiles(db, [...sharers.touched].filter((id) => !index.created.has(id) && !index.changed.has(id)))

  const addressProfiles = [...index.addressChanged].map((id) => index.get(id)!)
  const stateful = [
    ...(await applyPendingAddressStates(db, ws, addressProfiles)),
    ...(await reapplyExplicitEmailSubscribe(db, index.addressChanged, explicitEmailSubscribe)),
    ...(await applySubscriptionChanges(db, ws, job.subscriptionChanges)),
    ...(await applyEmailStateChanges(db, ws, job.emailStateChanges)),
  ]
  for (const id of stateful) touched.add(id)

  // A temporary push-import profile whose last token moved to a real user is cleaned up.
  const deletedProfiles = await deleteProfiles(db, await emptyAnonymousProfiles(db, [...formerTokenOwners]))
  for (const d of deletedProfiles) touched.delete(d.id)

  return { eventOwners, profileIds: [...touched], deletedProfiles, errors }
}

/**
 * A state stored for an address (/email/status) was accepted before this job: the job's own
 * email_subscribe for a profile that just got that address is the later write and wins.
 */
async function reapplyExplicitEmailSubscribe(db: pg.PoolClient, addressChanged: Set<number>, explicit: Map<number, string>): Promise<number[]> {
  const byState = new Map<string, number[]>()
  for (const [id, state] of explicit) if (addressChanged.has(id)) byState.set(state, [...(byState.get(state) ?? []), id])
  for (const [state, ids] of byState) await setEmailSubscribe(db, ids, state)
  return [...byState.values()].flat()
}

/**
 * interface.md section 3: a subscription change made through /users/track for a user also
 * updates every user sharing that user's email.
 */
async function applySharedEmailChanges(
  db: pg.PoolClient,
  workspaceId: string,
  changes: { email: string; groups: ProfileSubscription[]; emailSubscribe?: string; source: number }[],
): Promise<{ subscriptions: ProfileSubscription[]; touched: Set<number> }> {
  const touched = new Set<number>()
  const subscriptions: ProfileSubscription[] = []
  if (changes.length === 0) return { subscriptions, touched }
  const sharers = await profilesWithEmails(db, workspaceId, [...new Set(changes.map((c) => c.email))])
  for (const change of changes) {
    const others = sharers.filter((s) => s.email === change.email && s.id !== change.source).map((s) => s.id)
    if (others.length === 0) continue
    for (const id of others) {
      touched.add(id)
      for (const g of change.groups) subscriptions.push({ ...g, profile_id: id })
    }
    if (change.emailSubscribe) await setEmailSubscribe(db, others, change.emailSubscribe)
  }
  return { subscriptions, touched }
}
