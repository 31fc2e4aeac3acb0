import type pg from 'pg'
import { findDeprecatedExternalIds } from '../../shared/db/repositories/external-id-repository.js'
import type { Erasures, Override } from '../../shared/db/repositories/override-repository.js'
import { lockProfiles, lockWorkspaceIdentities } from '../../shared/db/repositories/profile-repository.js'
import { sharingAnAddress, withLastOccurrences, type LastOccurrences } from '../../shared/domain/prioritization.js'
import { applyAliasNew, applyAliasUpdate } from './aliases.js'
import { applyDelete } from './delete.js'
import { applyRemoveExternalId, applyRenameExternalId } from './external-ids.js'
import { applyIdentify } from './identify.js'
import { IdentityBatch } from './identity-batch.js'
import { applyMerge } from './merge.js'
import { lookupOf, type IdentityError } from './resolve.js'
import type { IdentityJob, IdentityOperation, IdentityTarget } from '../../shared/queue/identity-jobs.js'

/** A job of a batch, named by its ledger key. */
export interface KeyedIdentityJob {
  key: string
  job: IdentityJob
}

/** What a batch's commit leaves for ClickHouse and for the requests' progress. */
export interface AppliedIdentityJobs {
  errors: Map<string, IdentityError[]>
  changed: { workspaceId: string; profileIds: number[] }[]
  deleted: { workspaceId: string; profiles: { id: number; version: number }[] }[]
  overrides: Override[]
  erased: Erasures[]
}

function applyOperation(batch: IdentityBatch, op: IdentityOperation): Promise<IdentityError | undefined> {
  switch (op.type) {
    case 'merge':
      return applyMerge(batch, op)
    case 'identify':
      return applyIdentify(batch, op)
    case 'delete':
      return applyDelete(batch, op)
    case 'alias_new':
      return applyAliasNew(batch, op)
    case 'alias_update':
      return applyAliasUpdate(batch, op)
    case 'rename_external_id':
      return applyRenameExternalId(batch, op)
    case 'remove_external_id':
      return applyRemoveExternalId(batch, op)
  }
}

/** Everything the operations name: the users they resolve, and the external ids and aliases they look at besides. */
function namedBy(ops: IdentityOperation[]): { targets: IdentityTarget[]; externalIds: string[]; aliases: { alias_label: string; alias_name: string }[] } {
  const targets: IdentityTarget[] = []
  const externalIds: string[] = []
  const aliases: { alias_label: string; alias_name: string }[] = []
  for (const op of ops) {
    switch (op.type) {
      case 'merge':
        targets.push(op.toMerge, op.toKeep)
        break
      case 'identify':
        targets.push(op.user)
        externalIds.push(op.externalId)
        break
      case 'delete':
        targets.push(op.user)
        break
      case 'alias_new':
        externalIds.push(op.externalId)
        aliases.push(op.alias)
        break
      case 'alias_update':
        aliases.push({ alias_label: op.alias_label, alias_name: op.old_alias_name }, { alias_label: op.alias_label, alias_name: op.new_alias_name })
        break
      case 'rename_external_id':
        externalIds.push(op.currentExternalId, op.newExternalId)
        break
      case 'remove_external_id':
        externalIds.push(op.externalId)
        break
    }
  }
  return { targets, externalIds, aliases }
}

/**
 * Applies identity jobs in acceptance order inside the caller's transaction. First the workspaces'
 * identities lock, exclusively: the track batches running commit first, and new ones wait for this
 * one. Per workspace, every profile any of its jobs names is then locked at once (in id order, like
 * track batches), and the operations run one after the other against that state (see IdentityBatch).
 */
export async function applyIdentityJobs(db: pg.PoolClient, jobs: KeyedIdentityJob[], now: string, lastOccurrences: LastOccurrences): Promise<AppliedIdentityJobs> {
  const out: AppliedIdentityJobs = { errors: new Map(), changed: [], deleted: [], overrides: [], erased: [] }
  const byWorkspace = new Map<string, KeyedIdentityJob[]>()
  for (const j of jobs) byWorkspace.set(j.job.workspaceId, [...(byWorkspace.get(j.job.workspaceId) ?? []), j])
  // Track batches running now finish first, and new ones wait until this commits.
  await lockWorkspaceIdentities(db, [...byWorkspace.keys()], 'exclusive')
  for (const [workspaceId, wsJobs] of byWorkspace) {
    const named = namedBy(wsJobs.flatMap((j) => j.job.operations))
    const lookup = lookupOf(named.targets, named.externalIds, named.aliases)
    // A deprecated external id names its user as the primary one does: those users are locked too.
    const deprecated = await findDeprecatedExternalIds(db, workspaceId, lookup.externalIds ?? [])
    lookup.serviceIds = [...(lookup.serviceIds ?? []), ...deprecated.map((d) => d.service_id)]
    const locked = await lockProfiles(db, workspaceId, lookup)
    locked.deprecatedOwner = new Map(deprecated.map((d) => [d.external_id, d.profile_id]))
    const profiles = [...locked.byId.values()]
    // Prioritization ranks the holders of an email or phone a target names (resolve.ts), no others.
    withLastOccurrences(profiles, await lastOccurrences(workspaceId, sharingAnAddress(profiles, lookup)))
    const batch = new IdentityBatch(db, workspaceId, locked, now)
    for (const { key, job } of wsJobs) {
      const errors: IdentityError[] = []
      for (const op of job.operations) {
        const error = await applyOperation(batch, op)
        if (error) errors.push(error)
      }
      out.errors.set(key, errors)
    }
    const outcome = await batch.finish()
    if (outcome.changed.length) out.changed.push({ workspaceId, profileIds: outcome.changed })
    if (outcome.deleted.length) out.deleted.push({ workspaceId, profiles: outcome.deleted })
    if (outcome.erased.length) out.erased.push({ workspaceId, profileIds: outcome.erased })
    out.overrides.push(...outcome.overrides)
  }
  return out
}
