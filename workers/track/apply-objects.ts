import type { ProfileKeys, ProfileRow, UpdatedColumn } from '../../shared/db/repositories/profile-repository.js'
import { FollowersOf } from '../../shared/domain/profile-fields.js'
import type { ProfileSubscription } from '../../shared/db/repositories/profile-subscription-repository.js'
import type { PushTokenRow } from '../../shared/db/repositories/push-token-repository.js'
import { applyCustomAttribute, type AttributeProblem } from '../../shared/domain/attributes.js'
import { describeIdentifier, type Identifier } from '../../shared/domain/identifiers.js'
import type { ObjectError, TrackInputArray } from '../../shared/domain/object-error.js'
import { isStoredTime, pushTokensOf, subscriptionGroupsOf, type AttributeOp, type EventOp, type PurchaseOp } from '../../shared/domain/track-operations.js'
import type { TrackJob } from '../../shared/queue/track-jobs.js'
import type { ProfileIndex } from './profile-index.js'

/** A track object, or a part of one, the worker could not apply; the rest of its request is applied. */
export type TrackApplyError = ObjectError<'user_not_found' | 'unknown_subscription_group' | AttributeProblem['type'], TrackInputArray>

/** A job of a batch, named by its ledger key. */
export interface KeyedTrackJob {
  key: string
  job: TrackJob
}

export const tokenKey = (appId: string, token: string) => `${appId}\u0000${token}`

/** A subscription change made through a user whose email other users share (interface.md section 3). */
export interface SharedEmailChange {
  email: string
  groups: ProfileSubscription[]
  emailSubscribe?: string
  source: number
}

/**
 * One workspace's part of a batch in memory: what the batch read (profiles, push-token owners,
 * subscription groups) and what it will write, each table's rows gathered once.
 */
export interface TrackBatch {
  now: string
  profiles: ProfileIndex
  tokenOwners: Map<string, PushTokenRow>
  groups: ReadonlySet<string>
  tokenWrites: Map<string, { app_id: string; token: string; profile_id: number; device_id: string | null }>
  /** Profiles a token moved away from: a push-import profile left without tokens is deleted. */
  formerTokenOwners: Set<number>
  subscriptions: ProfileSubscription[]
  sharedEmailChanges: SharedEmailChange[]
  explicitEmailSubscribe: Map<number, string>
}

export function newTrackBatch(profiles: ProfileIndex, tokenOwners: PushTokenRow[], groups: Iterable<string>, now: string): TrackBatch {
  return {
    now,
    profiles,
    tokenOwners: new Map(tokenOwners.map((t) => [tokenKey(t.app_id, t.token), t])),
    groups: new Set(groups),
    tokenWrites: new Map(),
    formerTokenOwners: new Set(),
    subscriptions: [],
    sharedEmailChanges: [],
    explicitEmailSubscribe: new Map(),
  }
}

/** Which identifiers may create a profile when nobody has them yet (interface.md 4.1 rules 4 and 6). */
function createsByDefault(id: Identifier): boolean {
  return id.kind === 'external_id' || id.kind === 'email' || id.kind === 'phone'
}

/** The profile an object names, created when the rules allow; otherwise a user_not_found error. */
export function resolveProfile(
  batch: TrackBatch,
  { identifier: id, updateExistingOnly, at }: { identifier: Identifier; updateExistingOnly?: boolean; at: { input_array: TrackInputArray; index: number } },
  errors: TrackApplyError[],
): ProfileKeys | undefined {
  const found = batch.profiles.find(id)
  if (found) return found
  const mayCreate = updateExistingOnly === undefined ? createsByDefault(id) : !updateExistingOnly
  if (mayCreate && id.kind !== 'service_id') return batch.profiles.create(id)
  errors.push({ type: 'user_not_found', ...at, message: `no user found for ${describeIdentifier(id)}` })
  return undefined
}

/** The profile columns an attributes object sets: its fields, those following them, its custom attributes. */
function columnsSetBy(op: AttributeOp): UpdatedColumn[] {
  const columns: UpdatedColumn[] = []
  for (const field in op.fields) columns.push(field as UpdatedColumn, ...(FollowersOf.get(field) ?? []))
  if (Object.keys(op.custom).length > 0) columns.push('custom_attributes')
  return columns
}

/** An attributes object's fields, custom attributes, push tokens and subscription groups, applied to a profile. */
export function applyAttributes(batch: TrackBatch, profile: ProfileRow, op: AttributeOp, errors: TrackApplyError[]): void {
  const pushSubscribeBefore = profile.push_subscribe
  // for...in, not Object.entries: an entry array per field of every object was a thirtieth of what the worker allocated.
  for (const field in op.fields) {
    const value = op.fields[field as keyof typeof op.fields]
    if (field === 'email' || field === 'phone') batch.profiles.setAddress(profile, field, (value as string | null | undefined) ?? null)
    else (profile as unknown as Record<string, unknown>)[field] = value
  }
  if (op.fields.push_subscribe === 'opted_in' && pushSubscribeBefore !== 'opted_in') profile.push_opted_in_at = batch.now
  const merge = op.mergeObjects === true
  for (const name in op.custom) {
    const problem = applyCustomAttribute(profile.custom_attributes, name, op.custom[name], merge)
    if (problem) errors.push({ ...problem, input_array: 'attributes', index: op.index })
  }
  for (const t of pushTokensOf(op)) {
    const key = tokenKey(t.app_id, t.token)
    const owner = batch.tokenWrites.get(key)?.profile_id ?? batch.tokenOwners.get(key)?.profile_id
    if (owner !== undefined && owner !== profile.id) batch.formerTokenOwners.add(owner)
    batch.tokenWrites.set(key, { app_id: t.app_id, token: t.token, profile_id: profile.id, device_id: t.device_id ?? null })
  }
  const groupChanges: ProfileSubscription[] = []
  for (const g of subscriptionGroupsOf(op)) {
    if (!batch.groups.has(g.subscription_group_id)) {
      errors.push({ type: 'unknown_subscription_group', input_array: 'attributes', index: op.index, message: `unknown subscription_group_id ${g.subscription_group_id}` })
      continue
    }
    groupChanges.push({ profile_id: profile.id, group_id: g.subscription_group_id, state: g.subscription_state })
  }
  batch.subscriptions.push(...groupChanges)
  const emailSubscribe = op.fields.email_subscribe ?? undefined
  if (emailSubscribe !== undefined) batch.explicitEmailSubscribe.set(profile.id, emailSubscribe)
  if (profile.email && (groupChanges.length || emailSubscribe !== undefined)) {
    batch.sharedEmailChanges.push({ email: profile.email, groups: groupChanges, emailSubscribe, source: profile.id })
  }
  batch.profiles.touch(profile, columnsSetBy(op))
}

/** A push-token import: an anonymous profile for each token nobody holds yet. */
export function importPushTokens(batch: TrackBatch, op: AttributeOp, errors: TrackApplyError[]): void {
  for (const t of pushTokensOf(op)) {
    const key = tokenKey(t.app_id, t.token)
    if (batch.tokenOwners.has(key) || batch.tokenWrites.has(key)) continue
    applyAttributes(batch, batch.profiles.create(undefined, { anonymous: true }), { ...op, pushTokens: [t] }, errors)
  }
}

/**
 * Refuses a job whose occurrence time is not one the API writes, before anything of it applies:
 * ClickHouse would refuse its rows only after the commit. Thrown, it fails the batch, whose jobs
 * are then applied one at a time, so it fails alone.
 */
function checkOccurrenceTimes(key: string, job: TrackJob): void {
  for (const [list, ops] of [['events', job.events], ['purchases', job.purchases]] as const) {
    for (const op of ops) if (!isStoredTime(op.time)) throw new Error(`job ${key}: ${list}[${op.index}].time ${JSON.stringify(op.time)} is not a time the API writes`)
  }
}

/**
 * Applies jobs in order to the batch in memory, each as if alone: attributes, then events, then
 * purchases, each in request order. Answers each job's errors and the owner profile of each of its
 * events and purchases, in job order (null: not applied).
 */
export function applyJobs(batch: TrackBatch, jobs: KeyedTrackJob[]): { owners: Map<string, (number | null)[]>; errors: Map<string, TrackApplyError[]> } {
  const owners = new Map<string, (number | null)[]>()
  const errorsOf = new Map<string, TrackApplyError[]>()
  for (const { key, job } of jobs) {
    checkOccurrenceTimes(key, job)
    const errors: TrackApplyError[] = []
    for (const op of job.attributes) {
      if (op.pushTokenImport) {
        importPushTokens(batch, op, errors)
        continue
      }
      const profile = resolveProfile(batch, { identifier: op.identifier!, updateExistingOnly: op.updateExistingOnly, at: { input_array: 'attributes', index: op.index } }, errors)
      if (profile) applyAttributes(batch, batch.profiles.fieldsOf(profile), op, errors)
    }
    const jobOwners: (number | null)[] = []
    // An occurrence changes no row: its owner goes to ClickHouse with it, and its profile becomes the most recent.
    const applyOccurrence = (op: EventOp | PurchaseOp, input_array: 'events' | 'purchases') => {
      const profile = resolveProfile(batch, { identifier: op.identifier, updateExistingOnly: op._update_existing_only, at: { input_array, index: op.index } }, errors)
      jobOwners.push(profile?.id ?? null)
      if (profile) batch.profiles.addOccurrence(profile)
    }
    for (const e of job.events) applyOccurrence(e, 'events')
    for (const p of job.purchases) applyOccurrence(p, 'purchases')
    owners.set(key, jobOwners)
    errorsOf.set(key, errors)
  }
  return { owners, errors: errorsOf }
}
