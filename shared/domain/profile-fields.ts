/**
 * The standard fields of a profile, once (issue 24). Each is a column of `profiles` of the same
 * name, an optional member of the user record (interface.md 2.4, left out when null) that exports
 * and segment filters name the same way, and, unless it follows another field, settable by an
 * attributes object of /users/track, where `null` clears it. Derived from this table: the SQL
 * column lists (shared/db/repositories/profile-repository.ts), the record builder
 * (user-record.ts), the check of each field and its OpenAPI schema (track-validation.ts), the
 * job contract (shared/queue/track-jobs.ts), a new profile's empty fields and a merge's carry-over.
 *
 * The order is the record's (interface.md 2.4): records are built, stored and exported in it.
 */

/** The subscription states of email_subscribe and push_subscribe. */
export const SubscribeStates = ['opted_in', 'subscribed', 'unsubscribed'] as const

/** How /users/track checks and normalizes a field's string value. */
export type FieldRule =
  /** Free text of at most 10,000 characters. */
  | { kind: 'text' }
  | { kind: 'email' }
  /** A phone number with its country code, stored as E.164. */
  | { kind: 'phone' }
  /** A calendar date YYYY-MM-DD. */
  | { kind: 'date' }
  /** An IANA time zone name. */
  | { kind: 'timeZone' }
  /** A two-letter code of `standard`, stored in `letterCase`. */
  | { kind: 'code'; standard: string; letterCase: 'upper' | 'lower' }
  /** One of `values`; `upperCase`: sent in either case, stored upper. */
  | { kind: 'oneOf'; values: readonly string[]; upperCase?: boolean }

interface FieldDefinition {
  name: string
  /** The column's type as json_to_recordset reads it (and SELECT formats it). */
  sql: 'text' | 'timestamptz'
  /** How /users/track sets it; absent when only the service sets it. */
  track?: FieldRule & { /** null is refused instead of clearing the field. */ notNull?: boolean }
  /** The field whose change sets this one (and which a merge carries it with). */
  follows?: string
}

export const ProfileFields = [
  { name: 'first_name', sql: 'text', track: { kind: 'text' } },
  { name: 'last_name', sql: 'text', track: { kind: 'text' } },
  { name: 'email', sql: 'text', track: { kind: 'email' } },
  { name: 'home_city', sql: 'text', track: { kind: 'text' } },
  { name: 'time_zone', sql: 'text', track: { kind: 'timeZone' } },
  { name: 'dob', sql: 'text', track: { kind: 'date' } },
  { name: 'country', sql: 'text', track: { kind: 'code', standard: 'ISO 3166-1 alpha-2', letterCase: 'upper' } },
  { name: 'phone', sql: 'text', track: { kind: 'phone' } },
  { name: 'language', sql: 'text', track: { kind: 'code', standard: 'ISO 639-1', letterCase: 'lower' } },
  { name: 'gender', sql: 'text', track: { kind: 'oneOf', values: ['M', 'F', 'O', 'N', 'P'], upperCase: true } },
  { name: 'push_subscribe', sql: 'text', track: { kind: 'oneOf', values: SubscribeStates, notNull: true } },
  { name: 'email_subscribe', sql: 'text', track: { kind: 'oneOf', values: SubscribeStates, notNull: true } },
  /** When push_subscribe last became opted_in. */
  { name: 'push_opted_in_at', sql: 'timestamptz', follows: 'push_subscribe' },
] as const satisfies readonly FieldDefinition[]

type ProfileField = (typeof ProfileFields)[number]
export type ProfileFieldName = ProfileField['name']
/** The fields an attributes object may set. */
export type SettableField = Extract<ProfileField, { track: object }>['name']

export const ProfileFieldNames: readonly ProfileFieldName[] = ProfileFields.map((f) => f.name)

export const SettableFields: readonly SettableField[] = ProfileFields.flatMap((f) => ('track' in f ? [f.name] : []))

/** The fields that follow each field (set when it changes). */
export const FollowersOf: ReadonlyMap<string, readonly ProfileFieldName[]> = new Map(
  SettableFields.map((name) => [name, ProfileFields.flatMap((f) => ('follows' in f && f.follows === name ? [f.name] : []))] as const).filter(([, f]) => f.length),
)

/** How /users/track checks each settable field. */
export const SettableFieldRules: ReadonlyMap<string, FieldRule & { notNull?: boolean }> = new Map(
  ProfileFields.flatMap((f) => ('track' in f ? [[f.name, f.track] as const] : [])),
)

/** The fields as a profile row holds them: null when not set. */
export type ProfileFieldValues = { [F in ProfileFieldName]: string | null }

/** Every field unset, for a new profile (spread it: the object is shared). */
export const NoProfileFields: Readonly<ProfileFieldValues> = Object.freeze(
  Object.fromEntries(ProfileFieldNames.map((name) => [name, null])) as ProfileFieldValues,
)
