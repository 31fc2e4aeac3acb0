import { randomBytes, randomInt } from 'node:crypto'
import { aliasKey, type LockedProfiles, type ProfileRow } from '../../shared/db/repositories/profile-repository.js'
import type { Identifier } from '../../shared/domain/identifiers.js'

/** A new profile's own identifier: 24 hex characters, like the best-known service's ids. */
export const newServiceId = () => randomBytes(12).toString('hex')

/**
 * The profiles one job works on, held in memory while the job's objects are applied in order,
 * so an object can find a profile that an earlier object of the same job created or changed.
 */
export class ProfileIndex {
  readonly created = new Map<number, ProfileRow>()
  readonly changed = new Set<number>()
  readonly newAliases: { alias_label: string; alias_name: string; profile_id: number }[] = []
  /** Profiles whose email or phone this job set: states stored for those addresses now apply. */
  readonly addressChanged = new Set<number>()
  private readonly byId: Map<number, ProfileRow>
  private readonly aliasOwner: Map<string, number>
  /** Higher = more recently updated; profiles this job touches become the most recent. */
  private readonly recency = new Map<number, number>()
  private clock = 0

  constructor(
    locked: LockedProfiles,
    private readonly workspaceId: string,
    private readonly idPool: number[],
    private readonly now: string,
  ) {
    this.byId = locked.byId
    this.aliasOwner = locked.aliasOwner
    const sorted = [...this.byId.values()].sort((a, b) => a.updated_at.localeCompare(b.updated_at) || a.id - b.id)
    for (const p of sorted) this.recency.set(p.id, ++this.clock)
  }

  get(id: number): ProfileRow | undefined {
    return this.byId.get(id)
  }

  /** Finds the profile an identifier names; for an email or phone shared by several, the most recently updated. */
  find(id: Identifier): ProfileRow | undefined {
    switch (id.kind) {
      case 'user_alias': {
        const owner = this.aliasOwner.get(aliasKey(id.alias_label, id.alias_name))
        return owner === undefined ? undefined : this.byId.get(owner)
      }
      case 'external_id':
        return this.first((p) => p.external_id === id.value)
      case 'service_id':
        return this.first((p) => p.service_id === id.value)
      case 'email':
        return this.mostRecent((p) => p.email === id.value)
      case 'phone':
        return this.mostRecent((p) => p.phone === id.value)
    }
  }

  /** Creates a profile for an identifier that names nobody yet. */
  create(id: Identifier | undefined, opts: { anonymous?: boolean } = {}): ProfileRow {
    const profileId = this.idPool.shift()
    if (profileId === undefined) throw new Error('profile id pool exhausted')
    const p: ProfileRow = {
      id: profileId,
      workspace_id: this.workspaceId,
      service_id: newServiceId(),
      external_id: id?.kind === 'external_id' ? id.value : null,
      email: id?.kind === 'email' ? id.value : null,
      phone: id?.kind === 'phone' ? id.value : null,
      first_name: null,
      last_name: null,
      gender: null,
      dob: null,
      home_city: null,
      country: null,
      language: null,
      time_zone: null,
      email_subscribe: null,
      push_subscribe: null,
      push_opted_in_at: null,
      custom_attributes: {},
      random_bucket: randomInt(0, 10_000),
      push_import_anonymous: opts.anonymous ?? false,
      created_at: this.now,
      updated_at: this.now,
      version: 1,
    }
    this.byId.set(p.id, p)
    this.created.set(p.id, p)
    if (id?.kind === 'user_alias') this.addAlias(p.id, id.alias_label, id.alias_name)
    if (p.email || p.phone) this.addressChanged.add(p.id)
    this.touch(p)
    return p
  }

  addAlias(profileId: number, label: string, name: string): void {
    this.aliasOwner.set(aliasKey(label, name), profileId)
    this.newAliases.push({ alias_label: label, alias_name: name, profile_id: profileId })
  }

  touch(p: ProfileRow): void {
    this.recency.set(p.id, ++this.clock)
    if (!this.created.has(p.id)) this.changed.add(p.id)
  }

  /** Rows to write: the new profiles, and the existing ones this job changed. */
  rowsToSave(): { created: ProfileRow[]; changed: ProfileRow[] } {
    return { created: [...this.created.values()], changed: [...this.changed].map((id) => this.byId.get(id)!) }
  }

  touchedIds(): number[] {
    return [...this.created.keys(), ...this.changed]
  }

  private first(match: (p: ProfileRow) => boolean): ProfileRow | undefined {
    for (const p of this.byId.values()) if (match(p)) return p
    return undefined
  }

  private mostRecent(match: (p: ProfileRow) => boolean): ProfileRow | undefined {
    let best: ProfileRow | undefined
    for (const p of this.byId.values()) {
      if (match(p) && (!best || this.recency.get(p.id)! > this.recency.get(best.id)!)) best = p
    }
    return best
  }
}
