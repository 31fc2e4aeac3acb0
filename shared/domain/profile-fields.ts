/**
 * The standard fields of a profile, once. Each is a column of `profiles` of the same
 * name, an optional member of the user record (interface.md 2.4, left out when unset) that exports
 * and segment filters (unless `unfiltered`) name the same way, and, unless it follows another
 * field, settable by an attributes object of /users/track (by its own name, or `member`), where
 * `null` clears it. Derived from this table: the SQL column lists
 * (shared/db/repositories/profile-repository.ts), the record builder (user-record.ts), the check
 * of each field and its OpenAPI schema (track-validation.ts), the checked attributes object
 * (track-operations.ts), a new profile's empty fields and a merge's carry-over. What
 * /users/track makes of each of the reference's fields: docs/track.md.
 *
 * The order is the record's (interface.md 2.4): records are built, stored and exported in it.
 */

/** The subscription states of email_subscribe and push_subscribe. */
export const SubscribeStates = ['opted_in', 'subscribed', 'unsubscribed'] as const

/** How /users/track checks and normalizes a field's value. */
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
  /** An ISO 3166-1 alpha-2 code, or a country's English name or alpha-3 code mapped to it (shared/domain/countries.ts). */
  | { kind: 'country' }
  /** An absolute http(s) URL. */
  | { kind: 'url' }
  /** An ISO 8601 time, stored in UTC. */
  | { kind: 'time' }
  /** true or false; null clears it (false). */
  | { kind: 'flag' }
  /** `{longitude, latitude}`, stored as `[longitude, latitude]`. */
  | { kind: 'coordinates' }
  /** The reference's hash of a social network's profile data, with its members checked. */
  | { kind: 'social'; network: 'facebook' | 'twitter' }

interface FieldDefinition {
  name: string
  /** The column's type as json_to_recordset reads it (and SELECT formats it). */
  sql: 'text' | 'timestamptz' | 'boolean' | 'jsonb'
  /** How /users/track sets it; absent when only the service sets it. */
  track?: FieldRule & {
    /** null is refused instead of clearing the field. */
    notNull?: boolean
    /** The attributes object's member that sets it, when not its own name. */
    member?: string
    /**
     * A bad value is a non-fatal error of this field alone and the rest of the object applies:
     * for values senders do not type themselves (a CDP fills location fields from the device or
     * the IP), and where the reference drops a bad value rather than refuse the object.
     */
    alone?: boolean
  }
  /** The field whose change sets this one (and which a merge carries it with). */
  follows?: string
  /**
   * Not a segment filter's field: filters read each standard field from its own column of the
   * ClickHouse snapshots (segment-sql.ts), which only the fields filters name have.
   */
  unfiltered?: true
}

export const ProfileFields = [
  { name: 'first_name', sql: 'text', track: { kind: 'text' } },
  { name: 'last_name', sql: 'text', track: { kind: 'text' } },
  { name: 'email', sql: 'text', track: { kind: 'email' } },
  { name: 'home_city', sql: 'text', track: { kind: 'text' } },
  /** Alone: the reference sets "only valid time zone values", and takes names of another list ("Eastern Time (US & Canada)"). */
  { name: 'time_zone', sql: 'text', track: { kind: 'timeZone', alone: true } },
  { name: 'dob', sql: 'text', track: { kind: 'date' } },
  { name: 'country', sql: 'text', track: { kind: 'country', alone: true } },
  { name: 'phone', sql: 'text', track: { kind: 'phone' } },
  { name: 'language', sql: 'text', track: { kind: 'code', standard: 'ISO 639-1', letterCase: 'lower' } },
  { name: 'gender', sql: 'text', track: { kind: 'oneOf', values: ['M', 'F', 'O', 'N', 'P'], upperCase: true } },
  /** Where the user was last seen, [longitude, latitude]: the reference's `current_location` sets it. */
  { name: 'last_coordinates', sql: 'jsonb', track: { kind: 'coordinates', member: 'current_location', alone: true }, unfiltered: true },
  { name: 'push_subscribe', sql: 'text', track: { kind: 'oneOf', values: SubscribeStates, notNull: true } },
  { name: 'email_subscribe', sql: 'text', track: { kind: 'oneOf', values: SubscribeStates, notNull: true } },
  /** When push_subscribe last became opted_in. */
  { name: 'push_opted_in_at', sql: 'timestamptz', follows: 'push_subscribe' },
  // The reference's other standard fields (docs/track.md), after those of interface.md 2.4.
  { name: 'image_url', sql: 'text', track: { kind: 'url' }, unfiltered: true },
  { name: 'date_of_first_session', sql: 'timestamptz', track: { kind: 'time' }, unfiltered: true },
  { name: 'date_of_last_session', sql: 'timestamptz', track: { kind: 'time' }, unfiltered: true },
  { name: 'marked_email_as_spam_at', sql: 'timestamptz', track: { kind: 'time' }, unfiltered: true },
  { name: 'email_open_tracking_disabled', sql: 'boolean', track: { kind: 'flag' }, unfiltered: true },
  { name: 'email_click_tracking_disabled', sql: 'boolean', track: { kind: 'flag' }, unfiltered: true },
  { name: 'facebook', sql: 'jsonb', track: { kind: 'social', network: 'facebook' }, unfiltered: true },
  { name: 'twitter', sql: 'jsonb', track: { kind: 'social', network: 'twitter' }, unfiltered: true },
] as const satisfies readonly FieldDefinition[]

type ProfileField = (typeof ProfileFields)[number]
export type ProfileFieldName = ProfileField['name']
/** The fields an attributes object may set. */
export type SettableField = Extract<ProfileField, { track: object }>['name']

export const ProfileFieldNames: readonly ProfileFieldName[] = ProfileFields.map((f) => f.name)

type FilteredProfileField = Exclude<ProfileFieldName, Extract<ProfileField, { unfiltered: true }>['name']>
/** The fields segment filters name (each has its own column in ClickHouse snapshots). */
export const FilteredProfileFields = ProfileFields.flatMap((f) => ('unfiltered' in f ? [] : [f.name])) as readonly FilteredProfileField[]

export const SettableFields: readonly SettableField[] = ProfileFields.flatMap((f) => ('track' in f ? [f.name] : []))

/** The fields that follow each field (set when it changes). */
export const FollowersOf: ReadonlyMap<string, readonly ProfileFieldName[]> = new Map(
  SettableFields.map((name) => [name, ProfileFields.flatMap((f) => ('follows' in f && f.follows === name ? [f.name] : []))] as const).filter(([, f]) => f.length),
)

/** A settable field's rule, as /users/track applies it. */
export type TrackRule = FieldRule & { notNull?: boolean; member?: string; alone?: boolean }

/** How /users/track checks each settable field, by the attributes object's member that sets it. */
export const SettableFieldRules: ReadonlyMap<string, TrackRule & { field: SettableField }> = new Map(
  ProfileFields.flatMap((f) => ('track' in f ? [[(f.track as TrackRule).member ?? f.name, { ...f.track, field: f.name }] as const] : [])),
)

/** A profile's coordinates as the record holds them: [longitude, latitude]. */
export type Coordinates = [longitude: number, latitude: number]

/** What a field's column holds as JavaScript reads it. */
type ValueOf<F extends ProfileField> = F extends { sql: 'boolean' }
  ? boolean
  : F extends { name: 'last_coordinates' }
    ? Coordinates
    : F extends { sql: 'jsonb' }
      ? Record<string, unknown>
      : string

/** A set field's value. */
export type ProfileFieldValue = ValueOf<ProfileField>

/** The fields as a profile row holds them: null when not set; a flag is false when not set. */
export type ProfileFieldValues = { [F in ProfileField as F['name']]: ValueOf<F> extends boolean ? boolean : ValueOf<F> | null }

/** Whether a field holds nothing: null, or a flag that is false (the record leaves both out). */
export const isUnset = (value: unknown): boolean => value === null || value === false

/** Every field unset, for a new profile (spread it: the object is shared). */
export const NoProfileFields: Readonly<ProfileFieldValues> = Object.freeze(
  Object.fromEntries(ProfileFields.map((f) => [f.name, f.sql === 'boolean' ? false : null])) as ProfileFieldValues,
)
