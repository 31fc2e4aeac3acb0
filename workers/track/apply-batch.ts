import type pg from 'pg'
import { addEventSummaries, type EventSummaryDelta } from '../../shared/db/repositories/event-summary-repository.js'
import {
  allocateProfileIds,
  deleteProfiles,
  insertAliases,
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
import { lockProfileRecords } from '../../shared/db/repositories/user-record-repository.js'
import type { Snapshot } from '../../shared/clickhouse/snapshot-repository.js'
import { applyCustomAttribute } from '../../shared/domain/attributes.js'
import { describeIdentifier, identifierKey, type Identifier } from '../../shared/domain/identifiers.js'
import type { ObjectError, TrackInputArray } from '../../shared/domain/object-error.js'
import { ProfileIndex } from './profile-index.js'
import type { AttributeOp, EventOp, PurchaseOp, TrackJob } from '../../shared/queue/track-jobs.js'
import { applyEmailStateChanges, applyPendingAddressStates, applySubscriptionChanges } from './subscription-changes.js'

/** A track object the worker could not apply; the rest of its request is applied. */
type TrackApplyError = ObjectError<'user_not_found' | 'unknown_subscription_group', TrackInputArray>

const tokenKey = (appId: string, token: string) => `${appId}\u0000${token}`

/** Which identifiers may create a profile when nobody has them yet (interface.md 4.1 rules 4 and 6). */
function createsByDefault(id: Identifier): boolean {
  return id.kind === 'external_id' || id.kind === 'email' || id.kind === 'phone'
}

/** Every identifier the jobs name, in job order (a hot loop: no spreads). */
function identifiersOf(jobs: TrackJob[]): Identifier[] {
  const ids: Identifier[] = []
  for (const job of jobs) {
    for (const a of job.attributes) if (a.identifier) ids.push(a.identifier)
    for (const e of job.events) ids.push(e.identifier)
    for (const p of job.purchases) ids.push(p.identifier)
  }
  return ids
}

function lookupOf(ids: Identifier[]): ProfileLookup {
  const values = { external_id: new Set<string>(), service_id: new Set<string>(), email: new Set<string>(), phone: new Set<string>() }
  const aliases: { alias_label: string; alias_name: string }[] = []
  for (const id of ids) {
    if (id.kind === 'user_alias') aliases.push({ alias_label: id.alias_label, alias_name: id.alias_name })
    else values[id.kind].add(id.value)
  }
  return {
    externalIds: [...values.external_id],
    serviceIds: [...values.service_id],
    emails: [...values.email],
    phones: [...values.phone],
    aliases,
  }
}

/**
 * An upper bound of the profiles jobs can create: each identifier naming nobody yet, each email or
 * phone (an earlier object may move it off the profile holding it now), and each imported token.
 */
function creationsAtMost(jobs: TrackJob[], ids: Identifier[], index: ProfileIndex): number {
  const creators = new Set<string>()
  let imports = 0
  for (const job of jobs) for (const a of job.attributes) if (a.pushTokenImport) imports += a.pushTokens.length
  for (const id of ids) if (id.kind === 'email' || id.kind === 'phone' || !index.find(id)) creators.add(identifierKey(id))
  return imports + creators.size
}

/**
 * Whether a job's effects are all made in memory, so it may share a batch: no push tokens and no
 * subscription or email states, whose rules read and write other profiles' rows in order.
 */
export function isPlainTrackJob(job: TrackJob): boolean {
  return (
    job.subscriptionChanges.length === 0 &&
    job.emailStateChanges.length === 0 &&
    job.attributes.every((a) => !a.pushTokenImport && a.pushTokens.length === 0 && a.subscriptionGroups.length === 0 && a.fields.email_subscribe === undefined)
  )
}

/** A job of a batch, named by its ledger key. */
export interface KeyedTrackJob {
  key: string
  job: TrackJob
}

/** What a batch's commit leaves for ClickHouse and for the requests' progress. */
export interface AppliedTrackJobs {
  /** Owner profile of each event and purchase occurrence, per job, in job order (null: not applied). */
  owners: Map<string, (number | null)[]>
  errors: Map<string, TrackApplyError[]>
  /** Snapshots built from the batch's own state. */
  snapshots: Snapshot[]
  /** Profiles whose snapshot must be read back (changed by statements rather than in memory). */
  reread: { workspaceId: string; profileIds: number[] }[]
  deleted: { workspaceId: string; profiles: { id: number; version: number }[] }[]
}

/**
 * Applies jobs in order inside the caller's transaction, each as if alone: attributes, then events,
 * then purchases, then subscription writes, each in request order. Jobs of one workspace share
 * one set of statements; a batch holds either plain jobs only or a single other job.
 */
export async function applyTrackJobs(db: pg.PoolClient, jobs: KeyedTrackJob[], now: string): Promise<AppliedTrackJobs> {
  const out: AppliedTrackJobs = { owners: new Map(), errors: new Map(), snapshots: [], reread: [], deleted: [] }
  const byWorkspace = new Map<string, KeyedTrackJob[]>()
  for (const j of jobs) {
    const list = byWorkspace.get(j.job.workspaceId) ?? []
    list.push(j)
    byWorkspace.set(j.job.workspaceId, list)
  }
  for (const [ws, wsJobs] of byWorkspace) await applyWorkspaceJobs(db, ws, wsJobs, now, out)
  return out
}

async function applyWorkspaceJobs(db: pg.PoolClient, ws: string, jobs: KeyedTrackJob[], now: string, out: AppliedTrackJobs): Promise<void> {
  const all = jobs.map((j) => j.job)
  const plain = all.every(isPlainTrackJob)
  const idPool: number[] = []
  const ids = identifiersOf(all)
  const index = new ProfileIndex(await lockProfileRecords(db, ws, lookupOf(ids)), ws, idPool, now)
  // Ids only for profiles the jobs may create: none at all in the common case of known users.
  idPool.push(...(await allocateProfileIds(db, creationsAtMost(all, ids, index))))

  const tokens = all.flatMap((job) => job.attributes.flatMap((a) => a.pushTokens))
  const tokenOwners = new Map((await findPushTokens(db, ws, tokens)).map((t) => [tokenKey(t.app_id, t.token), t]))
  const tokenWrites = new Map<string, { app_id: string; token: string; profile_id: number; device_id: string | null }>()
  const formerTokenOwners = new Set<number>()

  const groupIds = [...new Set(all.flatMap((job) => job.attributes.flatMap((a) => a.subscriptionGroups.map((g) => g.subscription_group_id))))]
  const groups = await findSubscriptionGroups(db, ws, groupIds)
  const subscriptions: ProfileSubscription[] = []
  const sharedEmailChanges: { email: string; groups: ProfileSubscription[]; emailSubscribe?: string; source: number }[] = []
  const explicitEmailSubscribe = new Map<number, string>()
  const summaries = new Map<string, EventSummaryDelta>()
  let errors: TrackApplyError[] = []

  const resolve = (id: Identifier, explicitUpdateExistingOnly: boolean | undefined, kind: TrackInputArray, i: number) => {
    const found = index.find(id)
    if (found) return found
    const mayCreate = explicitUpdateExistingOnly === undefined ? createsByDefault(id) : !explicitUpdateExistingOnly
    if (mayCreate && id.kind !== 'service_id') return index.create(id)
    errors.push({ type: 'user_not_found', input_array: kind, index: i, message: `no user found for ${describeIdentifier(id)}` })
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
    const pushSubscribeBefore = profile.push_subscribe
    for (const [field, value] of Object.entries(op.fields)) {
      if (field === 'email' || field === 'phone') index.setAddress(profile, field, value ?? null)
      else (profile as unknown as Record<string, unknown>)[field] = value
    }
    if (op.fields.push_subscribe === 'opted_in' && pushSubscribeBefore !== 'opted_in') profile.push_opted_in_at = now
    for (const [name, value] of Object.entries(op.custom)) applyCustomAttribute(profile.custom_attributes, name, value)
    attachTokens(profile, op)
    const groupChanges: ProfileSubscription[] = []
    for (const g of op.subscriptionGroups) {
      if (!groups.has(g.subscription_group_id)) {
        errors.push({ type: 'unknown_subscription_group', input_array: 'attributes', index: op.index, message: `unknown subscription_group_id ${g.subscription_group_id}` })
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
    index.touch(profile)
  }

  const record = (profile: ProfileRow, kind: 'event' | 'purchase', name: string, time: string) => {
    const key = `${profile.id}\u0000${kind}\u0000${name}`
    const s = summaries.get(key)
    if (!s) summaries.set(key, { profile_id: profile.id, kind, name, first_at: time, last_at: time, count: 1 })
    else {
      s.count += 1
      if (time < s.first_at) s.first_at = time
      if (time > s.last_at) s.last_at = time
    }
    index.addOccurrence(profile, kind, name, time)
  }

  for (const { key, job } of jobs) {
    errors = []
    for (const op of job.attributes) {
      if (op.pushTokenImport) {
        for (const t of op.pushTokens) {
          const tk = tokenKey(t.app_id, t.token)
          if (tokenOwners.has(tk) || tokenWrites.has(tk)) continue
          const anonymous = index.create(undefined, { anonymous: true })
          applyAttributes(anonymous, { ...op, pushTokens: [t] })
        }
        continue
      }
      const profile = resolve(op.identifier!, op.updateExistingOnly, 'attributes', op.index)
      if (profile) applyAttributes(profile, op)
    }
    const owners: (number | null)[] = []
    const applyOccurrence = (op: EventOp | PurchaseOp, kind: 'event' | 'purchase') => {
      const profile = resolve(op.identifier, undefined, kind === 'event' ? 'events' : 'purchases', op.index)
      owners.push(profile?.id ?? null)
      if (profile) record(profile, kind, 'name' in op ? op.name : op.product_id, op.time)
    }
    for (const e of job.events) applyOccurrence(e, 'event')
    for (const p of job.purchases) applyOccurrence(p, 'purchase')
    out.owners.set(key, owners)
    out.errors.set(key, errors)
  }

  const { created, changed } = index.rowsToSave()
  await saveProfiles(db, created, changed)
  await insertAliases(db, ws, index.newAliases)
  await upsertPushTokens(db, ws, [...tokenWrites.values()])
  await addEventSummaries(db, [...summaries.values()])

  const touched = new Set(index.touchedIds())
  /** Profiles changed by statements below: their snapshots are read back after the commit. */
  const stateful = new Set<number>()
  const sharers = await applySharedEmailChanges(db, ws, sharedEmailChanges)
  await upsertProfileSubscriptions(db, [...subscriptions, ...sharers.subscriptions])
  for (const id of sharers.touched) stateful.add(id)
  await touchProfiles(db, [...sharers.touched].filter((id) => !index.created.has(id) && !index.changed.has(id)))

  const addressProfiles = [...index.addressChanged].map((id) => index.get(id)!)
  for (const id of [
    ...(await applyPendingAddressStates(db, ws, addressProfiles)),
    ...(await reapplyExplicitEmailSubscribe(db, index.addressChanged, explicitEmailSubscribe)),
    ...(await applySubscriptionChanges(db, ws, all.flatMap((j) => j.subscriptionChanges))),
    ...(await applyEmailStateChanges(db, ws, all.flatMap((j) => j.emailStateChanges))),
  ]) {
    stateful.add(id)
  }

  // A temporary push-import profile whose last token moved to a real user is cleaned up.
  const deletedProfiles = await deleteProfiles(db, await emptyAnonymousProfiles(db, [...formerTokenOwners]))
  for (const d of deletedProfiles) {
    touched.delete(d.id)
    stateful.delete(d.id)
  }
  if (deletedProfiles.length) out.deleted.push({ workspaceId: ws, profiles: deletedProfiles })

  const reread = plain ? [...stateful] : [...new Set([...touched, ...stateful])]
  if (reread.length) out.reread.push({ workspaceId: ws, profileIds: reread })
  if (plain) {
    for (const id of touched) {
      if (stateful.has(id)) continue
      const { record: r, version, randomBucket } = index.recordOf(id)
      out.snapshots.push({ workspace_id: ws, profile_id: id, version, random_bucket: randomBucket, record: r })
    }
  }
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
