import { z } from 'zod'
import { Identifier } from './identifiers.js'
import { ProfileFields, type ProfileFieldValues, type SettableField } from './profile-fields.js'

/*
 * The objects of a /users/track request once checked (track-objects.ts parses them), as a track
 * job carries them to the worker (shared/queue/track-jobs.ts).
 */

/** A field's value as its column's type holds it. */
const FIELD_VALUES = {
  text: z.string(),
  timestamptz: z.string(),
  boolean: z.boolean(),
  jsonb: z.union([z.tuple([z.number(), z.number()]), z.record(z.string(), z.unknown())]),
}

/** The profile fields an attributes object sets, checked and normalized (null clears one). */
export const StandardFields = z.object(
  Object.fromEntries(ProfileFields.flatMap((f) => ('track' in f ? [[f.name, FIELD_VALUES[f.sql].nullable().optional()]] : []))),
) as unknown as z.ZodType<{ [F in SettableField]?: ProfileFieldValues[F] | null }>
export type StandardFields = z.infer<typeof StandardFields>

/** A push token an attributes object sets on its profile. */
const PushTokenOp = z.object({ app_id: z.string(), token: z.string(), device_id: z.string().optional() })
/** A subscription group state an attributes object sets. */
const GroupStateOp = z.object({ subscription_group_id: z.string(), subscription_state: z.enum(['subscribed', 'unsubscribed']) })

export const AttributeOp = z.object({
  index: z.number().int(),
  /** Absent only for a push-token import, which creates anonymous profiles per token. */
  identifier: Identifier.optional(),
  /** Explicit `_update_existing_only`, when sent (defaults depend on the identifier). */
  updateExistingOnly: z.boolean().optional(),
  // The three members below are left out of a payload when they hold nothing (~7% of a mixed
  // request's jobs, written, stored and parsed for no effect); pushTokensOf and subscriptionGroupsOf read them.
  pushTokenImport: z.boolean().optional(),
  fields: StandardFields,
  /** Custom attribute name -> raw value form (plain, array, object, {inc}, {add,remove}, {$add,$update,$remove}, null: shared/domain/attributes.ts). */
  custom: z.record(z.string(), z.unknown()),
  /** `_merge_objects`: objects deep-merge into those stored; left out when false. */
  mergeObjects: z.boolean().optional(),
  pushTokens: z.array(PushTokenOp).optional(),
  subscriptionGroups: z.array(GroupStateOp).optional(),
})
export type AttributeOp = z.infer<typeof AttributeOp>

const NONE: readonly never[] = []
/** The push tokens an attributes object sets (none when its payload leaves them out). */
export const pushTokensOf = (op: AttributeOp): readonly z.infer<typeof PushTokenOp>[] => op.pushTokens ?? NONE
/** The subscription group states an attributes object sets (none when its payload leaves them out). */
export const subscriptionGroupsOf = (op: AttributeOp): readonly z.infer<typeof GroupStateOp>[] => op.subscriptionGroups ?? NONE

/** An occurrence time as the API writes it (`Date#toISOString` of the time it validated). */
const STORED_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
export const isStoredTime = (time: string) => STORED_TIME.test(time)

/** What every occurrence (event or purchase) carries. */
const Occurrence = {
  index: z.number().int(),
  identifier: Identifier,
  app_id: z.string().optional(),
  time: z.string(),
  /** The properties' JSON text; an object in jobs an API queued before it sent the text (propertiesTextOf). */
  properties: z.union([z.string(), z.record(z.string(), z.unknown())]),
  /** `_update_existing_only` as sent (absent in the payload when not sent): true applies it to an existing user only. */
  _update_existing_only: z.boolean().optional(),
}

/** An occurrence's properties as the event history stores them: JSON text. */
export const propertiesTextOf = (o: { properties: string | Record<string, unknown> }): string =>
  typeof o.properties === 'string' ? o.properties : JSON.stringify(o.properties)

export const EventOp = z.object({ ...Occurrence, name: z.string() })
export type EventOp = z.infer<typeof EventOp>

export const PurchaseOp = z.object({
  ...Occurrence,
  product_id: z.string(),
  currency: z.string(),
  price: z.number(),
  quantity: z.number().int(),
})
export type PurchaseOp = z.infer<typeof PurchaseOp>
