import { z } from 'zod'

/**
 * Prioritization of interface.md 4.2: when an email or phone names several users, an ordered
 * list of preferences picks one of them (or none, when it still leaves several).
 */
export const Priorities = ['identified', 'unidentified', 'most_recently_updated'] as const
export type Priority = (typeof Priorities)[number]

export const PRIORITIZATION_MESSAGE =
  "prioritization must be a non-empty ordered array of distinct values 'identified', 'unidentified' or 'most_recently_updated', with at most one of 'identified' and 'unidentified'"

/** Why a prioritization is refused, or undefined when it is valid. */
export function prioritizationProblem(value: unknown): string | undefined {
  if (!Array.isArray(value) || value.length === 0) return PRIORITIZATION_MESSAGE
  if (!value.every((v) => (Priorities as readonly unknown[]).includes(v))) return PRIORITIZATION_MESSAGE
  if (new Set(value).size !== value.length) return PRIORITIZATION_MESSAGE
  if (value.includes('identified') && value.includes('unidentified')) return PRIORITIZATION_MESSAGE
  return undefined
}

/** One message for every way a prioritization can be wrong, so the client sees the whole rule. */
export const Prioritization = z
  .custom<Priority[]>((v) => prioritizationProblem(v) === undefined, PRIORITIZATION_MESSAGE)
  .meta({ type: 'array', items: { type: 'string', enum: [...Priorities] }, minItems: 1, uniqueItems: true, description: PRIORITIZATION_MESSAGE })

/** What prioritization needs to know of a user. */
export interface Candidate {
  external_id: string | null
  /** ISO 8601 UTC with milliseconds, so that text order is time order; see `withLastOccurrences`. */
  updated_at: string
}

/** Emails and phones a batch names as identifiers (a profile look-up's lists; absent: none). */
export interface NamedAddresses {
  emails?: readonly string[]
  phones?: readonly string[]
}

/**
 * The profiles whose recency can decide anything: those sharing an email or a phone with another
 * of `profiles`. With `named`, only those sharing an address named there: recency picks among the
 * holders of an address only when an identifier names it, so the holders of any other address
 * need no last occurrence read (a read whose cost follows the history).
 */
export function sharingAnAddress(profiles: readonly { id: number; email: string | null; phone: string | null }[], named?: NamedAddresses): number[] {
  const shared = (field: 'email' | 'phone', names: readonly string[] | undefined) => {
    const seen = new Set<string>()
    const twice = new Set<string>()
    if (names?.length === 0) return twice
    const only = names && new Set(names)
    for (const p of profiles) {
      const value = p[field]
      if (value === null || (only && !only.has(value))) continue
      if (seen.has(value)) twice.add(value)
      else seen.add(value)
    }
    return twice
  }
  const emails = shared('email', named && (named.emails ?? []))
  const phones = shared('phone', named && (named.phones ?? []))
  if (emails.size === 0 && phones.size === 0) return []
  return profiles.filter((p) => (p.email !== null && emails.has(p.email)) || (p.phone !== null && phones.has(p.phone))).map((p) => p.id)
}

/** When each of some profiles' latest occurrence was written (`lastOccurrences` in shared/clickhouse): ISO times by profile id. */
export type LastOccurrences = (workspaceId: string, profileIds: number[]) => Promise<ReadonlyMap<number, string>>

/**
 * "Most recently updated" (4.1 rule 5, 4.2): an event or purchase updates a profile too, but is
 * stamped on the occurrence in the event history rather than by rewriting the profile's row, so a
 * profile's recency is the later of its row's `updated_at` and its last delivered occurrence.
 */
export function withLastOccurrences<P extends { id: number; updated_at: string }>(profiles: P[], lastOccurrence: ReadonlyMap<number, string>): P[] {
  for (const p of profiles) {
    const at = lastOccurrence.get(p.id)
    if (at !== undefined && at > p.updated_at) p.updated_at = at
  }
  return profiles
}

export type Choice<C> = { kind: 'one'; candidate: C } | { kind: 'none' } | { kind: 'ambiguous'; count: number }

/** Keeps the candidates a preference selects; a preference nobody meets leaves the set as it was. */
function prefer<C extends Candidate>(candidates: C[], priority: Priority): C[] {
  let kept: C[]
  switch (priority) {
    case 'identified':
      kept = candidates.filter((c) => c.external_id !== null)
      break
    case 'unidentified':
      kept = candidates.filter((c) => c.external_id === null)
      break
    case 'most_recently_updated': {
      const latest = candidates.reduce((max, c) => (c.updated_at > max ? c.updated_at : max), '')
      kept = candidates.filter((c) => c.updated_at === latest)
      break
    }
  }
  return kept.length ? kept : candidates
}

/**
 * Applies the preferences in order to the users an identifier matched. Exactly one left: that
 * user; none matched: none; several still left (ties included): ambiguous, so nothing happens.
 */
export function choose<C extends Candidate>(candidates: C[], prioritization: readonly Priority[]): Choice<C> {
  let left = candidates
  for (const priority of prioritization) {
    if (left.length <= 1) break
    left = prefer(left, priority)
  }
  if (left.length === 0) return { kind: 'none' }
  if (left.length === 1) return { kind: 'one', candidate: left[0] }
  return { kind: 'ambiguous', count: left.length }
}
