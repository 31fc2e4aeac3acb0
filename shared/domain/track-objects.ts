import { z } from 'zod'
import { isPlainObject, nestedSizeProblem } from './attributes.js'
import type { Identifier } from './identifiers.js'
import { SettableFieldRules } from './profile-fields.js'
import type { AttributeOp, EventOp, PurchaseOp, StandardFields } from './track-operations.js'
import {
  CustomAttributeDoc,
  FieldError,
  IdentifyingDocs,
  StandardFieldDocs,
  customAttribute,
  docShape,
  identifierOf,
  listOf,
  memberChecks,
  objectParser,
  optionalBoolean,
  optionalString,
  propertiesMember,
  standardField,
  text,
  timestamp,
  type Member,
} from './track-validation.js'

/*
 * The objects of a /users/track request (interface.md 4.1), each defined once: its members, each
 * with its check and its schema (track-validation.ts; the profile fields from profile-fields.ts),
 * in the order they are checked, those before the identifier and those after it. From a definition
 * come the object's parser, which the handler runs on each object on its own (a bad object becomes
 * a non-fatal error naming its field, the others go ahead), and its schema in the OpenAPI document.
 * The parsers answer the job contract's types (track-operations.ts).
 */

function asObject(value: unknown, field: string): Record<string, unknown> {
  if (!isPlainObject(value)) throw new FieldError(`${field}: must be an object`)
  return value
}

const IDENTIFY_RULE =
  'Exactly one of external_id, user_alias, service_id names the user; without them, email (else phone) does.'

/**
 * The object's schema in the document, whose final check is the object's parser, so that it
 * accepts exactly what the handler accepts (test/shared/domain/track-objects.test.ts); the rules
 * across members (which one identifies the user) are told in its description.
 */
function documented(shape: Record<string, z.ZodType>, description: string, parse: (raw: unknown) => unknown, custom?: z.ZodType): z.ZodType {
  const object = custom ? z.object(shape).catchall(custom) : z.object(shape)
  return object.describe(description).superRefine((value, ctx) => {
    try {
      parse(value)
    } catch (e) {
      if (!(e instanceof FieldError)) throw e
      ctx.addIssue({ code: 'custom', message: e.message })
    }
  })
}

// Bounded: app_id and token make the key of an index row (at most 2704 bytes).
const PushToken = z.object({ app_id: z.string().min(1).max(255), token: z.string().min(1).max(1024), device_id: z.string().optional() }).strict()
const GroupState = z.object({ subscription_group_id: z.string().min(1), subscription_state: z.enum(['subscribed', 'unsubscribed']) }).strict()

/** An attributes object's members checked before its identifier. */
const AttributesBefore = {
  push_token_import: {
    parse: (value, field) => optionalBoolean.parse(value, field) ?? false,
    doc: optionalBoolean.doc.describe('creates anonymous profiles by push token: send push_tokens and no external_id or service_id'),
  } satisfies Member<boolean>,
  push_tokens: listOf(PushToken),
}
/** Those checked after its profile fields and custom attributes. */
const AttributesAfter = {
  _update_existing_only: optionalBoolean,
  _merge_objects: {
    parse: optionalBoolean.parse,
    doc: optionalBoolean.doc.describe('true: an object deep-merges into the object stored, and $update merges $new_object into the items it finds (instead of replacing them)'),
  } satisfies Member<boolean | undefined>,
  subscription_groups: listOf(GroupState),
}

const checkAttributesBefore = memberChecks(AttributesBefore)
const checkAttributesAfter = memberChecks(AttributesAfter)

/** Members that are neither profile fields nor custom attributes. */
const NOT_ATTRIBUTES = new Set(['external_id', 'user_alias', 'service_id', 'braze_id', ...Object.keys(AttributesBefore), ...Object.keys(AttributesAfter)])

/**
 * Names the reference reserves that an attributes object does not set: the columns of its CSV
 * import that name an alias (the API sends user_alias), and a profile field it removed. Not
 * stored, neither as fields nor as custom attributes; each is a non-fatal error of its own.
 */
const NOT_SET: ReadonlyMap<string, string> = new Map([
  ['alias_name', 'a column of CSV imports, not a member of an attributes object (send user_alias); not stored'],
  ['alias_label', 'a column of CSV imports, not a member of an attributes object (send user_alias); not stored'],
  ['bio', 'no longer a profile field, and not a custom attribute either; not stored'],
])

/**
 * An attributes object's job. A member that is refused alone (a standard field checked `alone`, a
 * nested value over its size limit, a reserved name) is left out, its message added to `dropped`:
 * a non-fatal error of its own while the rest of the object applies. Anything else refused
 * throws a FieldError, refusing the object.
 */
export function parseAttributes(raw: unknown, index: number, dropped: string[] = []): AttributeOp {
  const at = `attributes[${index}]`
  const obj = asObject(raw, at)
  const { push_token_import: pushTokenImport, push_tokens: pushTokens } = checkAttributesBefore(obj, at)
  let identifier: Identifier | undefined
  if (pushTokenImport) {
    if (obj.external_id !== undefined || obj.service_id !== undefined || obj.braze_id !== undefined) {
      throw new FieldError(`${at}: with push_token_import, do not send external_id or service_id`)
    }
    if (pushTokens.length === 0) throw new FieldError(`${at}.push_tokens: push_token_import needs at least one push token`)
  } else {
    identifier = identifierOf(obj, at)
  }
  if (obj.external_id === null) throw new FieldError(`${at}.external_id: cannot be removed once added`)
  if (obj.user_alias === null) throw new FieldError(`${at}.user_alias: cannot be removed once added`)
  const fields: Record<string, unknown> = {}
  const custom: Record<string, unknown> = {}
  for (const name in obj) {
    if (NOT_ATTRIBUTES.has(name)) continue
    const value = obj[name]
    const rule = SettableFieldRules.get(name)
    if (rule) {
      // The identifying email/phone is already normalized; as a field it is set the same way.
      if (!rule.alone) fields[rule.field] = standardField(name, value, `${at}.${name}`)
      else {
        try {
          fields[rule.field] = standardField(name, value, `${at}.${name}`)
        } catch (e) {
          if (!(e instanceof FieldError)) throw e
          dropped.push(e.message)
        }
      }
    } else if (NOT_SET.has(name)) {
      dropped.push(`${at}.${name}: ${NOT_SET.get(name)}`)
    } else {
      const checked = customAttribute(name, value, `${at}.${name}`)
      // Only objects and arrays can be nested values; most values are neither.
      const oversize = typeof value === 'object' && value !== null ? nestedSizeProblem(value) : undefined
      if (oversize) dropped.push(`${at}.${name}: ${oversize}`)
      else custom[name] = checked
    }
  }
  const after = checkAttributesAfter(obj, at)
  const op: AttributeOp = { index, identifier, updateExistingOnly: after._update_existing_only, fields: fields as StandardFields, custom }
  // Members holding nothing stay out of the job's payload (track-operations.ts).
  if (after._merge_objects) op.mergeObjects = true
  if (pushTokenImport) op.pushTokenImport = true
  if (pushTokens.length) op.pushTokens = pushTokens
  if (after.subscription_groups.length) op.subscriptionGroups = after.subscription_groups
  return op
}

/**
 * What an event and a purchase share after their identifier: in which app, when, what else was
 * said, and whether it may only go to a user who exists already (as the attributes object's flag:
 * true never creates a profile, false may create one for any identifier but service_id, absent
 * creates one for an external_id, email or phone).
 */
const Occurrence = {
  app_id: optionalString,
  time: timestamp,
  properties: propertiesMember,
  _update_existing_only: {
    parse: optionalBoolean.parse,
    doc: optionalBoolean.doc.describe('true: applied only to a user who exists; for an unknown user it is skipped (a non-fatal error of the request), never creating one'),
  } satisfies Member<boolean | undefined>,
}

/** An occurrence names its user by email or phone only when it names no external_id, user_alias or service_id (then they are ignored). */
const OccurrenceAddresses = { email: z.string().nullable().optional(), phone: z.string().nullable().optional() }

const Event = { name: text(1, 255) }

export const parseEvent: (raw: unknown, index: number) => EventOp = objectParser('events', Event, identifierOf, Occurrence)

const CURRENCY = /^[A-Za-z]{3}$/

const Purchase = {
  product_id: text(1, 255),
  currency: {
    parse(value, field) {
      if (typeof value !== 'string' || !CURRENCY.test(value)) throw new FieldError(`${field}: must be a three-letter ISO 4217 currency code`)
      return value.toUpperCase()
    },
    doc: z.string().regex(CURRENCY).describe('ISO 4217'),
  } satisfies Member<string>,
  price: {
    parse(value, field) {
      if (typeof value !== 'number' || !Number.isFinite(value)) throw new FieldError(`${field}: must be a number`)
      return value
    },
    doc: z.number(),
  } satisfies Member<number>,
  quantity: {
    parse(value, field) {
      const quantity = value ?? 1
      if (typeof quantity !== 'number' || !Number.isInteger(quantity) || quantity < 1 || quantity > 100) {
        throw new FieldError(`${field}: must be an integer from 1 to 100`)
      }
      return quantity
    },
    doc: z.number().int().min(1).max(100).nullable().optional().describe('1 when absent'),
  } satisfies Member<number>,
}

export const parsePurchase: (raw: unknown, index: number) => PurchaseOp = objectParser('purchases', Purchase, identifierOf, Occurrence)

export const AttributeObject = documented(
  { ...IdentifyingDocs, ...StandardFieldDocs, ...docShape(AttributesBefore), ...docShape(AttributesAfter) },
  `A user's attributes. ${IDENTIFY_RULE} Every other member is a custom attribute.`,
  (o) => parseAttributes(o, 0),
  CustomAttributeDoc,
)

export const EventObject = documented(
  { ...IdentifyingDocs, ...OccurrenceAddresses, ...docShape(Event), ...docShape(Occurrence) },
  `An occurrence of a custom event. ${IDENTIFY_RULE}`,
  (o) => parseEvent(o, 0),
)

export const PurchaseObject = documented(
  { ...IdentifyingDocs, ...OccurrenceAddresses, ...docShape(Purchase), ...docShape(Occurrence) },
  `A purchase. ${IDENTIFY_RULE}`,
  (o) => parsePurchase(o, 0),
)
