import type pg from 'pg'
import type { Snapshot } from '../../shared/clickhouse/snapshot-repository.js'
import { findDeprecatedExternalIds } from '../../shared/db/repositories/external-id-repository.js'
import {
  allocateProfileIds,
  deleteProfiles,
  insertAliases,
  insertProfiles,
  keysOfRow,
  lockProfilesToChange,
  lockWorkspaceIdentities,
  profilesWithEmails,
  readProfileKeys,
  setEmailSubscribe,
  touchProfiles,
  updateProfiles,
  type ProfileKeys,
  type ProfileLookup,
  type ProfileRow,
} from '../../shared/db/repositories/profile-repository.js'
import { upsertProfileSubscriptions, type ProfileSubscription } from '../../shared/db/repositories/profile-subscription-repository.js'
import { emptyAnonymousProfiles, findPushTokens, upsertPushTokens } from '../../shared/db/repositories/push-token-repository.js'
import { findSubscriptionGroups } from '../../shared/db/repositories/subscription-group-repository.js'
import { loadRecordParts } from '../../shared/db/repositories/user-record-repository.js'
import { identifierKey, type Identifier } from '../../shared/domain/identifiers.js'
import { sharingAnAddress, withLastOccurrences, type LastOccurrences } from '../../shared/domain/prioritization.js'
import { pushTokensOf, subscriptionGroupsOf } from '../../shared/domain/track-operations.js'
import type { TrackJob } from '../../shared/queue/track-jobs.js'
import { applyPendingAddressStates } from '../pending-address-states.js'
import { applyJobs, newTrackBatch, type KeyedTrackJob, type SharedEmailChange, type TrackApplyError, type TrackBatch } from './apply-objects.js'
import { ProfileIndex, profilesToRead } from './profile-index.js'
import { applyEmailStateChanges, applySubscriptionChanges } from './subscription-changes.js'

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

/** The identifiers attributes objects name (a push-token import names none). */
function attributeIdentifiersOf(jobs: TrackJob[]): Identifier[] {
  const ids: Identifier[] = []
  for (const job of jobs) for (const a of job.attributes) if (a.identifier) ids.push(a.identifier)
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
  for (const job of jobs) for (const a of job.attributes) if (a.pushTokenImport) imports += pushTokensOf(a).length
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
    job.attributes.every((a) => !a.pushTokenImport && pushTokensOf(a).length === 0 && subscriptionGroupsOf(a).length === 0 && a.fields.email_subscribe === undefined)
  )
}

/** Whether a job sets push tokens, which can leave a push-import profile without any, to be deleted. */
function movesPushTokens(job: TrackJob): boolean {
  return job.attributes.some((a) => a.pushTokenImport || pushTokensOf(a).length > 0)
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
 * Applies jobs in order inside the caller's transaction, each as if alone. First the workspaces'
 * identities lock (`lockWorkspaceIdentities`: no merge or delete until this commits). Per
 * workspace: one read loads every profile, push token and subscription group the jobs name; the
 * jobs apply in memory (apply-objects.ts); each table's rows are written once; then the statements
 * of the rules that read other profiles' rows (shared emails, address states), which only a
 * non-plain job needs.
 */
export async function applyTrackJobs(db: pg.PoolClient, jobs: KeyedTrackJob[], now: string, lastOccurrences: LastOccurrences): Promise<AppliedTrackJobs> {
  const out: AppliedTrackJobs = { owners: new Map(), errors: new Map(), snapshots: [], reread: [], deleted: [] }
  const byWorkspace = new Map<string, KeyedTrackJob[]>()
  for (const j of jobs) {
    const list = byWorkspace.get(j.job.workspaceId) ?? []
    list.push(j)
    byWorkspace.set(j.job.workspaceId, list)
  }
  // A job moving push tokens may delete a push-import profile another partition's batch names.
  await lockWorkspaceIdentities(db, [...byWorkspace.keys()], jobs.some((j) => movesPushTokens(j.job)) ? 'exclusive' : 'shared')
  for (const [ws, wsJobs] of byWorkspace) {
    const all = wsJobs.map((j) => j.job)
    const plain = all.every(isPlainTrackJob)
    const batch = await loadTrackBatch(db, { ws, jobs: all, now, plain, lastOccurrences })
    const { owners, errors } = applyJobs(batch, wsJobs)
    for (const [key, o] of owners) out.owners.set(key, o)
    for (const [key, e] of errors) out.errors.set(key, e)
    await writeTrackBatch(db, ws, batch)
    const stateful = await applyStatefulRules(db, ws, batch, all)
    collectChanges(out, { ws, batch, stateful, plain })
  }
  return out
}

/**
 * The batch's read: the keys of every profile it names; those an attributes object names (all of
 * them for a job that runs alone) locked against other writers, with their fields and record
 * parts; push tokens, subscription groups; ids for profiles it may create; for profiles sharing an
 * email or phone that an identifier of the batch names, their last occurrence (read from the
 * event history; ProfileIndex.find compares holders of such an address only).
 */
async function loadTrackBatch(
  db: pg.PoolClient,
  { ws, jobs, now, plain, lastOccurrences }: { ws: string; jobs: TrackJob[]; now: string; plain: boolean; lastOccurrences: LastOccurrences },
): Promise<TrackBatch> {
  const idPool: number[] = []
  const ids = identifiersOf(jobs)
  const lookup = lookupOf(ids)
  const named = await readProfileKeys(db, ws, lookup)
  const deprecatedOwner = await withDeprecatedExternalIds(db, ws, lookup, named)
  const toChange = plain ? profilesToRead(named.keys, named.aliasOwner, attributeIdentifiersOf(jobs), deprecatedOwner) : named.keys.map((k) => k.id)
  const changing = await lockProfilesToChange(db, toChange)
  const keys = withCurrentKeys(named.keys, changing)
  withLastOccurrences(keys, await lastOccurrences(ws, sharingAnAddress(keys, lookup)))
  const index = new ProfileIndex({ keys, aliasOwner: named.aliasOwner, records: await loadRecordParts(db, changing), deprecatedOwner }, ws, idPool, now)
  // Ids only for profiles the jobs may create: none at all in the common case of known users.
  idPool.push(...(await allocateProfileIds(db, creationsAtMost(jobs, ids, index))))
  const tokens = jobs.flatMap((job) => job.attributes.flatMap(pushTokensOf))
  const groupIds = [...new Set(jobs.flatMap((job) => job.attributes.flatMap((a) => subscriptionGroupsOf(a).map((g) => g.subscription_group_id))))]
  return newTrackBatch(index, await findPushTokens(db, ws, tokens), (await findSubscriptionGroups(db, ws, groupIds)).keys(), now)
}

/**
 * External ids no profile holds as its primary id may be deprecated ids a rename kept
 * (/users/external_ids/rename): one look-up for those only, none when every id is known; the
 * profiles they name join the keys read. Undefined when there is none.
 */
async function withDeprecatedExternalIds(
  db: pg.PoolClient,
  ws: string,
  lookup: ProfileLookup,
  named: { keys: ProfileKeys[] },
): Promise<Map<string, number> | undefined> {
  const wanted = lookup.externalIds ?? []
  if (wanted.length === 0) return undefined
  const primary = new Set<string>()
  for (const k of named.keys) if (k.external_id !== null) primary.add(k.external_id)
  const unknown = wanted.filter((id) => !primary.has(id))
  if (unknown.length === 0) return undefined
  const deprecated = await findDeprecatedExternalIds(db, ws, unknown)
  if (deprecated.length === 0) return undefined
  const held = new Set(named.keys.map((k) => k.id))
  const missing = deprecated.filter((d) => !held.has(d.profile_id)).map((d) => d.service_id)
  if (missing.length) named.keys.push(...(await readProfileKeys(db, ws, { serviceIds: missing })).keys)
  return new Map(deprecated.map((d) => [d.external_id, d.profile_id]))
}

/** Keys as the lock against writers found the rows: another batch may have set an email or phone since they were read. */
function withCurrentKeys(keys: ProfileKeys[], current: ProfileRow[]): ProfileKeys[] {
  const byId = new Map(current.map((p) => [p.id, p]))
  return keys.map((k) => {
    const row = byId.get(k.id)
    return row ? keysOfRow(row) : k
  })
}

/** Each table's rows, written once. */
async function writeTrackBatch(db: pg.PoolClient, ws: string, batch: TrackBatch): Promise<void> {
  const { created, changed } = batch.profiles.rowsToSave()
  await insertProfiles(db, created)
  for (const { columns, rows } of changed) await updateProfiles(db, rows, columns)
  await insertAliases(db, ws, batch.profiles.newAliases)
  await upsertPushTokens(db, ws, [...batch.tokenWrites.values()])
}

/**
 * The rules whose effects reach profiles the batch did not load (users sharing an email, states
 * stored for an address, subscription and email-state requests, push-import profiles left without
 * tokens); answers the profiles they changed by statement.
 */
async function applyStatefulRules(db: pg.PoolClient, ws: string, batch: TrackBatch, jobs: TrackJob[]): Promise<{ changed: Set<number>; deleted: { id: number; version: number }[] }> {
  const { profiles } = batch
  const changed = new Set<number>()
  const sharers = await applySharedEmailChanges(db, ws, batch.sharedEmailChanges)
  await upsertProfileSubscriptions(db, [...batch.subscriptions, ...sharers.subscriptions])
  for (const id of sharers.touched) changed.add(id)
  const written = new Set(profiles.touchedIds())
  await touchProfiles(db, [...sharers.touched].filter((id) => !written.has(id)))

  const addressProfiles = [...profiles.addressChanged].map((id) => profiles.get(id)!)
  for (const id of [
    ...(await applyPendingAddressStates(db, ws, addressProfiles)),
    ...(await reapplyExplicitEmailSubscribe(db, profiles.addressChanged, batch.explicitEmailSubscribe)),
    ...(await applySubscriptionChanges(db, ws, jobs.flatMap((j) => j.subscriptionChanges))),
    ...(await applyEmailStateChanges(db, ws, jobs.flatMap((j) => j.emailStateChanges))),
  ]) {
    changed.add(id)
  }
  // A temporary push-import profile whose last token moved to a real user is cleaned up.
  const deleted = await deleteProfiles(db, await emptyAnonymousProfiles(db, [...batch.formerTokenOwners]))
  for (const d of deleted) changed.delete(d.id)
  return { changed, deleted }
}

/** What ClickHouse is owed: snapshots built in memory for a plain batch, the others read back after the commit. */
function collectChanges(
  out: AppliedTrackJobs,
  { ws, batch, stateful, plain }: { ws: string; batch: TrackBatch; stateful: { changed: Set<number>; deleted: { id: number; version: number }[] }; plain: boolean },
): void {
  const touched = new Set(batch.profiles.touchedIds())
  for (const d of stateful.deleted) touched.delete(d.id)
  if (stateful.deleted.length) out.deleted.push({ workspaceId: ws, profiles: stateful.deleted })
  const reread = plain ? [...stateful.changed] : [...new Set([...touched, ...stateful.changed])]
  if (reread.length) out.reread.push({ workspaceId: ws, profileIds: reread })
  if (!plain) return
  for (const id of touched) {
    if (stateful.changed.has(id)) continue
    const { record, version, randomBucket } = batch.profiles.recordOf(id)
    out.snapshots.push({ workspace_id: ws, profile_id: id, version, random_bucket: randomBucket, record })
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
  changes: SharedEmailChange[],
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
