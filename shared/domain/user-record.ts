import type { ProfileRow } from '../db/repositories/profile-repository.js'
import { ProfileFieldNames, isUnset, type ProfileFieldValues } from './profile-fields.js'

/**
 * The exported user record of interface.md 2.4, with all-time summaries, projected for output:
 * the 90-day window on event and purchase entries, and the fields asked for. Absent fields are
 * left out, never null.
 */
export interface EventSummary {
  name: string
  first: string
  last: string
  count: number
}

/** The profile fields (profile-fields.ts) are members too, each left out when not set. */
export interface UserRecord extends Partial<{ [F in keyof ProfileFieldValues]: Exclude<ProfileFieldValues[F], null> }> {
  created_at: string
  external_id?: string
  user_aliases?: { alias_name: string; alias_label: string }[]
  service_id: string
  random_bucket: number
  custom_attributes?: Record<string, unknown>
  custom_events?: EventSummary[]
  purchases?: EventSummary[]
  push_tokens?: { app: string; token: string; device_id?: string; notifications_enabled: boolean }[]
  subscription_groups?: { subscription_group_id: string; subscription_state: string }[]
}

/**
 * A profile's record as ClickHouse snapshots store it: everything but the event and purchase
 * summaries, which exports and /users/export/ids derive from the event history. An event then
 * changes no snapshot, so a profile that only gets events is neither re-versioned nor rewritten.
 */
export type StoredRecord = Omit<UserRecord, 'custom_events' | 'purchases'>

/** The summary of one event name or product id, as read from the event history. */
export type KindedSummary = EventSummary & { kind: 'event' | 'purchase' }

/** Field names `fields_to_export` accepts (interface.md 2.4, plus the subscription fields we keep and the reference's other standard fields, docs/track.md). */
export const ExportableFields = [
  'apps', 'attributed_campaign', 'attributed_source', 'attributed_adgroup', 'attributed_ad', 'service_id', 'country',
  'created_at', 'custom_attributes', 'custom_events', 'devices', 'dob', 'email', 'external_id', 'first_name', 'gender',
  'home_city', 'language', 'last_coordinates', 'last_name', 'phone', 'purchases', 'push_tokens', 'random_bucket',
  'time_zone', 'total_revenue', 'uninstalled_at', 'user_aliases', 'campaigns_received', 'canvases_received',
  'email_subscribe', 'push_subscribe', 'push_opted_in_at', 'subscription_groups',
  'image_url', 'date_of_first_session', 'date_of_last_session', 'marked_email_as_spam_at', 'email_open_tracking_disabled',
  'email_click_tracking_disabled', 'facebook', 'twitter',
] as const

const WINDOW_MS = 90 * 24 * 3600 * 1000

export interface Projection {
  /** Undefined: every field. */
  fields?: readonly string[]
  /** Custom attributes to keep when `custom_attributes` is not among `fields`. */
  customAttributes?: readonly string[]
  now: Date
}

/** Whether a projection shows event or purchase summaries, which are read from the event history. */
export function needsSummaries(p: Pick<Projection, 'fields'>): boolean {
  return !p.fields || p.fields.includes('custom_events') || p.fields.includes('purchases')
}

function within90Days(entries: EventSummary[] | undefined, now: Date): EventSummary[] | undefined {
  if (!entries) return undefined
  const since = now.getTime() - WINDOW_MS
  const kept = entries.filter((e) => Date.parse(e.last) >= since)
  return kept.length ? kept : undefined
}

/** A stored record as a user sees it: 90-day event and purchase entries (first and count stay all-time), chosen fields. */
export function projectRecord(record: UserRecord, p: Projection): Partial<UserRecord> {
  const full: Partial<UserRecord> = {
    ...record,
    custom_events: within90Days(record.custom_events, p.now),
    purchases: within90Days(record.purchases, p.now),
  }
  let out: Record<string, unknown> = full
  if (p.fields) {
    const wanted = new Set(p.fields)
    out = Object.fromEntries(Object.entries(full).filter(([k]) => wanted.has(k)))
    if (!wanted.has('custom_attributes') && p.customAttributes?.length && record.custom_attributes) {
      const picked = Object.fromEntries(
        p.customAttributes.filter((n) => n in record.custom_attributes!).map((n) => [n, record.custom_attributes![n]]),
      )
      if (Object.keys(picked).length) out.custom_attributes = picked
    }
  }
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v !== undefined && v !== null)) as Partial<UserRecord>
}

/** What a stored record holds beside the profile row. Names sort in byte order (`COLLATE "C"`), so records built in memory match. */
export interface ProfileParts {
  aliases: { alias_name: string; alias_label: string }[]
  tokens: { app_id: string; token: string; device_id: string | null }[]
  subscriptions: { subscription_group_id: string; subscription_state: string }[]
}

/** Byte order of UTF-8 text, as Postgres' "C" collation sorts it. */
export function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b))
}

/** The stored record of a profile and its parts. */
export function storedRecordOf(p: ProfileRow, parts: ProfileParts): StoredRecord {
  const record: StoredRecord = { created_at: p.created_at, service_id: p.service_id, random_bucket: p.random_bucket }
  if (p.external_id !== null) record.external_id = p.external_id
  if (parts.aliases.length) record.user_aliases = parts.aliases
  for (const f of ProfileFieldNames) if (!isUnset(p[f])) (record as Record<string, unknown>)[f] = p[f]
  if (Object.keys(p.custom_attributes).length) record.custom_attributes = p.custom_attributes
  if (parts.tokens.length) {
    record.push_tokens = parts.tokens.map((t) => ({
      app: t.app_id,
      token: t.token,
      ...(t.device_id !== null && { device_id: t.device_id }),
      notifications_enabled: p.push_subscribe !== 'unsubscribed',
    }))
  }
  if (parts.subscriptions.length) record.subscription_groups = parts.subscriptions
  return record
}

/**
 * A stored record with its summaries (sorted by name), in the member order of interface.md 2.4.
 * Summaries a record stored before they left it are replaced, not added to.
 */
export function withSummaries(stored: StoredRecord & Partial<UserRecord>, summaries: readonly KindedSummary[]): UserRecord {
  const { push_tokens, subscription_groups, custom_events: _e, purchases: _p, ...head } = stored
  const record: UserRecord = head
  // One pass, no closures: this runs for every exported profile.
  const events: EventSummary[] = []
  const purchases: EventSummary[] = []
  for (const s of summaries) (s.kind === 'event' ? events : purchases).push({ name: s.name, first: s.first, last: s.last, count: Number(s.count) })
  if (events.length) record.custom_events = events
  if (purchases.length) record.purchases = purchases
  if (push_tokens) record.push_tokens = push_tokens
  if (subscription_groups) record.subscription_groups = subscription_groups
  return record
}
