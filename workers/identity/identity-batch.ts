import type pg from 'pg'
import {
  deleteDeprecatedExternalIds,
  insertDeprecatedExternalIds,
  moveDeprecatedExternalIds,
  type DeprecatedExternalId,
} from '../../shared/db/repositories/external-id-repository.js'
import { copyMissingSubscriptions, moveAliases, movePushTokens, renameAliases, type AliasRename, type MergePair } from '../../shared/db/repositories/identity-repository.js'
import { dropOverridesInto, insertOverrides, repointOverrides, type Override } from '../../shared/db/repositories/override-repository.js'
import {
  aliasKey,
  deleteProfiles,
  insertAliases,
  loadProfiles,
  saveProfiles,
  type LockedProfiles,
  type ProfileRow,
} from '../../shared/db/repositories/profile-repository.js'
import { applyPendingAddressStates } from '../pending-address-states.js'
import { carryOver } from './carry-over.js'

/** Writes of consecutive operations that touch disjoint profiles: one statement per table serves them all. */
interface Round {
  touched: Set<number>
  merges: MergePair[]
  removed: number[]
  changed: Map<number, ProfileRow>
  newAliases: { alias_label: string; alias_name: string; profile_id: number }[]
  aliasRenames: AliasRename[]
  deprecated: DeprecatedExternalId[]
  undeprecated: string[]
  addressCarried: Set<number>
}

const emptyRound = (): Round => ({
  touched: new Set(),
  merges: [],
  removed: [],
  changed: new Map(),
  newAliases: [],
  aliasRenames: [],
  deprecated: [],
  undeprecated: [],
  addressCarried: new Set(),
})

/** What a workspace's operations leave for ClickHouse. */
export interface IdentityOutcome {
  /** Live profiles the operations changed: their snapshots are read back after the commit. */
  changed: number[]
  /** Profiles merged away or deleted, with the version their tombstone carries. */
  deleted: { id: number; version: number }[]
  /** Overrides written or ended. */
  overrides: Override[]
  /** Profiles whose ClickHouse rows are to be erased: deleted ones, and those merged into them. */
  erased: number[]
}

/**
 * The profiles a batch of one workspace's identity operations names, locked and held in memory,
 * changed operation by operation in acceptance order: each operation resolves its users against
 * the state every earlier one left (an external id just given, an alias just moved, a user just
 * merged away). Postgres gets the changes in rounds: operations are gathered while they touch
 * profiles no gathered one touched, then written with one statement per table, so a batch of
 * unrelated merges costs the statements of one merge while a chain (A into B, then B into C) is
 * written in order, as it would have been one at a time.
 *
 * ClickHouse is not rewritten: a merge records an override (the merged profile's events read as
 * the kept one's until the sweep squashes them), a delete queues the profile for erasure.
 */
export class IdentityBatch implements LockedProfiles {
  readonly byId: Map<number, ProfileRow>
  readonly aliasOwner: Map<string, number>
  readonly deprecatedOwner: Map<string, number>
  private round = emptyRound()
  /** The batch's merges, merged profile -> kept profile. */
  private readonly mergedInto = new Map<number, number>()
  private readonly deletedIds = new Set<number>()
  private readonly tombstones: { id: number; version: number }[] = []
  private readonly changedIds = new Set<number>()

  constructor(
    private readonly db: pg.PoolClient,
    private readonly workspaceId: string,
    locked: LockedProfiles,
    /** Update time of the profiles the batch changes, for `most_recently_updated` among them. */
    private readonly now: string,
  ) {
    this.byId = locked.byId
    this.aliasOwner = locked.aliasOwner
    this.deprecatedOwner = locked.deprecatedOwner ?? new Map()
  }

  /** Folds `merged` into `kept` (interface.md 4.2 and docs/identity.md); the merged profile is deleted. */
  async merge(merged: ProfileRow, kept: ProfileRow): Promise<void> {
    const round = await this.roundTouching([merged.id, kept.id])
    const { addressCarried } = carryOver(kept, merged)
    if (addressCarried) round.addressCarried.add(kept.id)
    round.merges.push({ from: merged.id, to: kept.id })
    for (const [key, owner] of this.aliasOwner) if (owner === merged.id) this.aliasOwner.set(key, kept.id)
    for (const [id, owner] of this.deprecatedOwner) if (owner === merged.id) this.deprecatedOwner.set(id, kept.id)
    this.remove(round, merged.id)
    this.mergedInto.set(merged.id, kept.id)
    this.changed(round, kept)
  }

  async setExternalId(user: ProfileRow, externalId: string): Promise<void> {
    const round = await this.roundTouching([user.id])
    user.external_id = externalId
    this.changed(round, user)
  }

  async addAlias(owner: ProfileRow, alias: { alias_label: string; alias_name: string }): Promise<void> {
    const round = await this.roundTouching([owner.id])
    round.newAliases.push({ ...alias, profile_id: owner.id })
    this.aliasOwner.set(aliasKey(alias.alias_label, alias.alias_name), owner.id)
    this.changed(round, owner)
  }

  /** The alias keeps its label and owner under a new name. */
  async renameAlias(owner: ProfileRow, rename: AliasRename): Promise<void> {
    const round = await this.roundTouching([owner.id])
    round.aliasRenames.push(rename)
    this.aliasOwner.delete(aliasKey(rename.alias_label, rename.old_alias_name))
    this.aliasOwner.set(aliasKey(rename.alias_label, rename.new_alias_name), owner.id)
    this.changed(round, owner)
  }

  /** The user's primary external id becomes `newExternalId`; the old one is deprecated and still names the user. */
  async renameExternalId(user: ProfileRow, newExternalId: string): Promise<void> {
    const round = await this.roundTouching([user.id])
    round.deprecated.push({ external_id: user.external_id!, profile_id: user.id })
    this.deprecatedOwner.set(user.external_id!, user.id)
    user.external_id = newExternalId
    this.changed(round, user)
  }

  /** A deprecated external id stops naming its user (the user's record does not show deprecated ids). */
  async removeDeprecatedExternalId(externalId: string): Promise<void> {
    const owner = this.deprecatedOwner.get(externalId)
    if (owner === undefined) return
    const round = await this.roundTouching([owner])
    round.undeprecated.push(externalId)
    this.deprecatedOwner.delete(externalId)
  }

  /** Erases a user: the profile goes (with its aliases, tokens and states); ClickHouse hides it at once. */
  async delete(user: ProfileRow): Promise<void> {
    const round = await this.roundTouching([user.id])
    for (const [key, owner] of this.aliasOwner) if (owner === user.id) this.aliasOwner.delete(key)
    for (const [id, owner] of this.deprecatedOwner) if (owner === user.id) this.deprecatedOwner.delete(id)
    this.remove(round, user.id)
    this.deletedIds.add(user.id)
  }

  /**
   * Writes what is left, then the overrides: each profile merged by the batch reads as the end
   * of its chain; earlier overrides leading to a profile merged now point further; and overrides
   * leading to a deleted profile end, their profiles' rows then erased with it.
   */
  async finish(): Promise<IdentityOutcome> {
    await this.flush()
    const end = (id: number) => {
      let to = id
      for (let next = this.mergedInto.get(to); next !== undefined; next = this.mergedInto.get(to)) to = next
      return to
    }
    const erased = new Set(this.deletedIds)
    const live: MergePair[] = []
    for (const from of this.mergedInto.keys()) {
      const to = end(from)
      if (this.deletedIds.has(to)) erased.add(from)
      else live.push({ from, to })
    }
    const ended = await dropOverridesInto(this.db, [...erased])
    for (const o of ended) erased.add(o.oldProfileId)
    const overrides = [...ended, ...(await repointOverrides(this.db, live)), ...(await insertOverrides(this.db, this.workspaceId, live))]
    return {
      changed: [...this.changedIds].filter((id) => this.byId.has(id)),
      deleted: this.tombstones,
      overrides,
      erased: [...erased],
    }
  }

  /** The round an operation touching `ids` joins: the current one, unless it already touches one of them. */
  private async roundTouching(ids: number[]): Promise<Round> {
    if (ids.some((id) => this.round.touched.has(id))) await this.flush()
    for (const id of ids) this.round.touched.add(id)
    return this.round
  }

  private changed(round: Round, profile: ProfileRow): void {
    profile.updated_at = this.now
    round.changed.set(profile.id, profile)
    this.changedIds.add(profile.id)
  }

  private remove(round: Round, id: number): void {
    this.byId.delete(id)
    round.removed.push(id)
  }

  /**
   * Writes the current round. Alias renames and removed deprecated ids go first (a later operation
   * may take a name they freed), side rows move before the merged profiles are deleted (which takes
   * their leftovers along), and the profiles are deleted before the kept ones are saved (an
   * external id carried over is unique per workspace). States stored for an address a kept
   * profile just got apply as when /users/track sets it; they may change its email_subscribe,
   * which the row in memory then takes.
   */
  private async flush(): Promise<void> {
    const r = this.round
    this.round = emptyRound()
    if (r.touched.size === 0) return
    const { db } = this
    await deleteDeprecatedExternalIds(db, this.workspaceId, r.undeprecated)
    await renameAliases(db, this.workspaceId, r.aliasRenames)
    await insertAliases(db, this.workspaceId, r.newAliases)
    await moveAliases(db, r.merges)
    await moveDeprecatedExternalIds(db, r.merges)
    await movePushTokens(db, r.merges)
    await copyMissingSubscriptions(db, r.merges)
    this.tombstones.push(...(await deleteProfiles(db, r.removed)))
    await saveProfiles(db, [], [...r.changed.values()].filter((p) => this.byId.has(p.id)))
    await insertDeprecatedExternalIds(db, this.workspaceId, r.deprecated)
    const carried = [...r.addressCarried].flatMap((id) => this.byId.get(id) ?? [])
    const stateful = await applyPendingAddressStates(db, this.workspaceId, carried)
    if (stateful.length) {
      for (const fresh of await loadProfiles(db, stateful)) {
        const held = this.byId.get(fresh.id)
        if (held) held.email_subscribe = fresh.email_subscribe
      }
    }
  }
}
