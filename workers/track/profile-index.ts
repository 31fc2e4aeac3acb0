import { randomBytes } from 'node:crypto'
import { aliasKey, UPDATED_COLUMNS, type ProfileKeys, type ProfileRow, type UpdatedColumn } from '../../shared/db/repositories/profile-repository.js'
import type { Identifier } from '../../shared/domain/identifiers.js'
import { NoProfileFields } from '../../shared/domain/profile-fields.js'
import { byteOrder, storedRecordOf, type ProfileParts, type StoredRecord } from '../../shared/domain/user-record.js'

/** Random bytes drawn from a pool: a system call per profile weighs more than the rest of its creation. */
let pool = Buffer.alloc(0)
let used = 0
function random(bytes: number): Buffer {
  if (used + bytes > pool.length) {
    pool = randomBytes(16 * 1024)
    used = 0
  }
  used += bytes
  return pool.subarray(used - bytes, used)
}

/**
 * A new profile's own identifier: 24 hex characters, like the best-known service's ids, and like
 * them led by the creation second. New ids then land at the end of the unique index instead of on
 * random pages of it.
 */
function newServiceId(): string {
  return Math.floor(Date.now() / 1000).toString(16).padStart(8, '0') + random(8).toString('hex')
}

/** 0 to 9,999, for random-bucket segments (the modulo bias of 32 random bits is below 2e-6). */
const newRandomBucket = () => random(4).readUInt32BE(0) % 10_000

/**
 * A set of columns as one number, a bit per column of UPDATED_COLUMNS: a batch marks tens of
 * thousands of profiles changed, and a set of columns for each, sorted to group them, was a
 * twentieth of what the worker allocated.
 */
const COLUMN_BITS = new Map(UPDATED_COLUMNS.map((c, i) => [c, 1 << i]))
if (UPDATED_COLUMNS.length > 31) throw new Error('more updatable columns than bits of a small integer')
const columnsOf = (bits: number) => UPDATED_COLUMNS.filter((_, i) => bits & (1 << i))

/** The stored profiles a batch read: the keys of every one, the fields and record parts of those an attributes object may change. */
export interface LoadedProfiles {
  keys: ProfileKeys[]
  aliasOwner: ReadonlyMap<string, number>
  records: { profile: ProfileRow; parts: ProfileParts }[]
  /** Deprecated external ids the batch names -> their profiles (read only for ids no profile holds as primary). */
  deprecatedOwner?: ReadonlyMap<string, number>
}

/**
 * The stored profiles whose fields a batch needs: every one an attributes object's identifier
 * names (for a shared email or phone, every holder: any may be the most recent by then). The
 * others only get events or purchases, for which their keys suffice.
 */
export function profilesToRead(
  keys: readonly ProfileKeys[],
  aliasOwner: ReadonlyMap<string, number>,
  attributeIds: readonly Identifier[],
  deprecatedOwner?: ReadonlyMap<string, number>,
): number[] {
  const wanted = { external_id: new Set<string>(), service_id: new Set<string>(), email: new Set<string>(), phone: new Set<string>() }
  const ids = new Set<number>()
  for (const id of attributeIds) {
    if (id.kind !== 'user_alias') {
      wanted[id.kind].add(id.value)
      const owner = id.kind === 'external_id' ? deprecatedOwner?.get(id.value) : undefined
      if (owner !== undefined) ids.add(owner)
    } else {
      const owner = aliasOwner.get(aliasKey(id.alias_label, id.alias_name))
      if (owner !== undefined) ids.add(owner)
    }
  }
  for (const k of keys) {
    if (
      (k.external_id !== null && wanted.external_id.has(k.external_id)) ||
      wanted.service_id.has(k.service_id) ||
      (k.email !== null && wanted.email.has(k.email)) ||
      (k.phone !== null && wanted.phone.has(k.phone))
    ) {
      ids.add(k.id)
    }
  }
  return [...ids]
}

/**
 * The profiles one batch works on, held in memory while its objects are applied in order, so an
 * object finds a profile that an earlier object (of the same job or an earlier job of the batch)
 * created or changed. Every look-up is a hash map: a batch holds thousands of profiles. A stored
 * profile whose fields were not read (`profilesToRead`) is held by its keys: objects find it and
 * its events count, but nothing may change its fields.
 */
export class ProfileIndex {
  readonly created = new Map<number, ProfileRow>()
  /** Stored profiles the batch changed, with the columns it set as COLUMN_BITS (0: only their record parts). */
  private readonly changed = new Map<number, number>()
  readonly newAliases: { alias_label: string; alias_name: string; profile_id: number }[] = []
  /** Profiles whose email or phone the batch set: states stored for those addresses now apply. */
  readonly addressChanged = new Set<number>()
  /** Every profile by id: its fields where the batch holds them, else its keys. */
  private readonly keysById = new Map<number, ProfileKeys>()
  private readonly byId = new Map<number, ProfileRow>()
  private readonly parts = new Map<number, ProfileParts>()
  private readonly aliasOwner: Map<string, number>
  private readonly deprecatedOwner: ReadonlyMap<string, number> | undefined
  private readonly byExternalId = new Map<string, ProfileKeys>()
  /** Built at the first look-up by service id, which few batches make. */
  private byServiceId: Map<string, ProfileKeys> | undefined
  private readonly byEmail = new AddressHolders()
  private readonly byPhone = new AddressHolders()
  /**
   * Higher = more recently updated, among holders of one email or phone (the only ones compared):
   * those sharing one when read, ranked by their update times, then each profile the batch
   * touches. The others have no entry (0): two holders of an address the batch did not touch
   * shared it when read, so every comparison that decides anything is between entries.
   */
  private readonly recency = new Map<number, number>()
  private clock = 0

  constructor(
    loaded: LoadedProfiles,
    private readonly workspaceId: string,
    private readonly idPool: number[],
    private readonly now: string,
  ) {
    this.aliasOwner = new Map(loaded.aliasOwner)
    this.deprecatedOwner = loaded.deprecatedOwner
    for (const { profile, parts } of loaded.records) {
      this.byId.set(profile.id, profile)
      this.parts.set(profile.id, parts)
      for (const a of parts.aliases) this.aliasOwner.set(aliasKey(a.alias_label, a.alias_name), profile.id)
    }
    for (const keys of loaded.keys) this.addKeys(this.byId.get(keys.id) ?? keys)
    // Only the holders of a shared address are ranked by their times (see `recency`): sorting every
    // key was a tenth of the index's time.
    const sharing = new Set<number>()
    for (const holders of [this.byEmail, this.byPhone]) for (const p of holders.sharedHolders()) sharing.add(p.id)
    if (sharing.size === 0) return
    // ISO times in one format compare as strings; localeCompare weighed more than the rest of the index.
    const ranked = loaded.keys.filter((k) => sharing.has(k.id)).sort((a, b) => (a.updated_at < b.updated_at ? -1 : a.updated_at > b.updated_at ? 1 : a.id - b.id))
    for (const keys of ranked) this.recency.set(keys.id, ++this.clock)
  }

  /** A profile whose fields the batch holds (read, or created by it). */
  get(id: number): ProfileRow | undefined {
    return this.byId.get(id)
  }

  /** The fields of a profile an object found, which the batch must hold for whatever an attributes object names. */
  fieldsOf(p: ProfileKeys): ProfileRow {
    const row = this.byId.get(p.id)
    if (!row) throw new Error(`profile ${p.id} was read without its fields, yet an attributes object names it`)
    return row
  }

  /** Finds the profile an identifier names; for an email or phone shared by several, the most recently updated. */
  find(id: Identifier): ProfileKeys | undefined {
    switch (id.kind) {
      case 'user_alias': {
        const owner = this.aliasOwner.get(aliasKey(id.alias_label, id.alias_name))
        return owner === undefined ? undefined : this.keysById.get(owner)
      }
      case 'external_id':
        return this.byExternalId.get(id.value) ?? this.viaDeprecated(id.value)
      case 'service_id':
        return this.serviceIds().get(id.value)
      case 'email':
        return this.mostRecent(this.byEmail.holders(id.value))
      case 'phone':
        return this.mostRecent(this.byPhone.holders(id.value))
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
      ...NoProfileFields,
      email: id?.kind === 'email' ? id.value : null,
      phone: id?.kind === 'phone' ? id.value : null,
      custom_attributes: {},
      random_bucket: newRandomBucket(),
      push_import_anonymous: opts.anonymous ?? false,
      created_at: this.now,
      updated_at: this.now,
      version: 1,
    }
    this.byId.set(p.id, p)
    this.parts.set(p.id, { aliases: [], tokens: [], subscriptions: [] })
    this.addKeys(p)
    this.created.set(p.id, p)
    if (id?.kind === 'user_alias') this.addAlias(p.id, id.alias_label, id.alias_name)
    if (p.email || p.phone) this.addressChanged.add(p.id)
    this.touch(p)
    return p
  }

  addAlias(profileId: number, label: string, name: string): void {
    this.aliasOwner.set(aliasKey(label, name), profileId)
    this.newAliases.push({ alias_label: label, alias_name: name, profile_id: profileId })
    const aliases = this.parts.get(profileId)!.aliases
    aliases.push({ alias_name: name, alias_label: label })
    aliases.sort((a, b) => byteOrder(a.alias_label, b.alias_label) || byteOrder(a.alias_name, b.alias_name))
  }

  /** Sets a profile's email or phone, keeping the address maps right. */
  setAddress(p: ProfileRow, field: 'email' | 'phone', value: string | null): void {
    if (p[field] === value) return
    const holders = field === 'email' ? this.byEmail : this.byPhone
    if (p[field] !== null) holders.remove(p[field]!, p)
    p[field] = value
    if (value !== null) holders.add(value, p)
    this.addressChanged.add(p.id)
  }

  /**
   * Marks a profile as having an event or purchase: the most recently updated now. Its row is
   * not written: the occurrence in ClickHouse carries the time (`withLastOccurrences`).
   */
  addOccurrence(p: ProfileKeys): void {
    this.recency.set(p.id, ++this.clock)
  }

  /** Marks a profile changed, in `columns` and/or its record parts (and it the most recently updated). */
  touch(p: ProfileRow, columns: readonly UpdatedColumn[] = []): void {
    this.recency.set(p.id, ++this.clock)
    if (this.created.has(p.id)) return
    let bits = this.changed.get(p.id) ?? 0
    for (const c of columns) bits |= COLUMN_BITS.get(c)!
    this.changed.set(p.id, bits)
  }

  /** Rows to write: the new profiles, and the stored ones that changed, grouped by the columns they set. */
  rowsToSave(): { created: ProfileRow[]; changed: { columns: UpdatedColumn[]; rows: ProfileRow[] }[] } {
    const groups = new Map<number, { columns: UpdatedColumn[]; rows: ProfileRow[] }>()
    for (const [id, bits] of this.changed) {
      let group = groups.get(bits)
      if (!group) groups.set(bits, (group = { columns: columnsOf(bits), rows: [] }))
      group.rows.push(this.byId.get(id)!)
    }
    return { created: [...this.created.values()], changed: [...groups.values()] }
  }

  /** Profiles whose stored record the batch changes: each gets a new version and snapshot. */
  touchedIds(): number[] {
    return [...this.created.keys(), ...this.changed.keys()]
  }

  /** The stored record of a profile as this batch commits it, at the version its save gives it. */
  recordOf(id: number): { record: StoredRecord; version: number; randomBucket: number } {
    const p = this.byId.get(id)!
    return { record: storedRecordOf(p, this.parts.get(id)!), version: this.created.has(id) ? 1 : p.version + 1, randomBucket: p.random_bucket }
  }

  private addKeys(p: ProfileKeys): void {
    this.keysById.set(p.id, p)
    if (p.external_id !== null) this.byExternalId.set(p.external_id, p)
    this.byServiceId?.set(p.service_id, p)
    if (p.email !== null) this.byEmail.add(p.email, p)
    if (p.phone !== null) this.byPhone.add(p.phone, p)
  }

  /** The profile a deprecated external id still names (a rename), for an id no profile holds as its primary one. */
  private viaDeprecated(externalId: string): ProfileKeys | undefined {
    const owner = this.deprecatedOwner?.get(externalId)
    return owner === undefined ? undefined : this.keysById.get(owner)
  }

  private serviceIds(): Map<string, ProfileKeys> {
    if (!this.byServiceId) {
      this.byServiceId = new Map()
      for (const p of this.keysById.values()) this.byServiceId.set(p.service_id, p)
    }
    return this.byServiceId
  }

  private mostRecent(holders: ProfileKeys | ReadonlySet<ProfileKeys> | undefined): ProfileKeys | undefined {
    if (!(holders instanceof Set)) return holders as ProfileKeys | undefined
    let best: ProfileKeys | undefined
    for (const p of holders) if (!best || (this.recency.get(p.id) ?? 0) > (this.recency.get(best.id) ?? 0)) best = p
    return best
  }
}

/**
 * The profiles holding each email (or phone): the one profile itself, a set only for an address
 * several hold. A set per address was a third of the index's allocations, for the few shared.
 */
class AddressHolders {
  private readonly byAddress = new Map<string, ProfileKeys | Set<ProfileKeys>>()

  holders(address: string): ProfileKeys | ReadonlySet<ProfileKeys> | undefined {
    return this.byAddress.get(address)
  }

  add(address: string, p: ProfileKeys): void {
    const held = this.byAddress.get(address)
    if (held === undefined) this.byAddress.set(address, p)
    else if (held instanceof Set) held.add(p)
    else if (held !== p) this.byAddress.set(address, new Set([held, p]))
  }

  remove(address: string, p: ProfileKeys): void {
    const held = this.byAddress.get(address)
    if (held === p) this.byAddress.delete(address)
    else if (held instanceof Set && held.delete(p) && held.size === 1) this.byAddress.set(address, held.values().next().value!)
  }

  /** The holders of addresses several hold now. */
  *sharedHolders(): Iterable<ProfileKeys> {
    for (const held of this.byAddress.values()) if (held instanceof Set) yield* held
  }
}
