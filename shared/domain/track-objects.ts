import { z } from 'zod'
import type { AttributeOp, EventOp, PurchaseOp, StandardFields } from '../queue/track-jobs.js'
import { isPlainObject } from './attributes.js'
import type { Identifier } from './identifiers.js'
import { FieldError, UserAlias, customAttribute, identifierOf, parseTime, properties, standardField } from './track-validation.js'

/*
 * The objects of a /users/track request (interface.md 4.1). Each is parsed on its own by
 * parseAttributes, parseEvent and parsePurchase: a bad object becomes a non-fatal error naming
 * its field, the others go ahead. These parsers are hand-written for the request path's speed (a
 * request holds up to 225 objects) and for the messages interface.md fixes. The zod schemas at
 * the end describe the same objects for the OpenAPI document.
 */

const STANDARD = ['first_name', 'last_name', 'gender', 'dob', 'home_city', 'country', 'language', 'time_zone', 'email', 'phone', 'email_subscribe', 'push_subscribe'] as const
const IDENTIFIERS = new Set(['external_id', 'user_alias', 'service_id'])
const CONTROL = new Set(['_update_existing_only', 'push_token_import', 'push_tokens', 'subscription_groups'])

// Bounded: app_id and token make the key of an index row (at most 2704 bytes).
const PushToken = z.object({ app_id: z.string().min(1).max(255), token: z.string().min(1).max(1024), device_id: z.string().optional() }).strict()
const GroupState = z.object({ subscription_group_id: z.string().min(1), subscription_state: z.enum(['subscribed', 'unsubscribed']) }).strict()

function asObject(value: unknown, field: string): Record<string, unknown> {
  if (!isPlainObject(value)) throw new FieldError(`${field}: must be an object`)
  return value
}

function optionalBoolean(value: unknown, field: string): boolean | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'boolean') throw new FieldError(`${field}: must be a boolean`)
  return value
}

function parseList<S extends z.ZodType>(schema: S, value: unknown, field: string): z.infer<S>[] {
  if (value === undefined) return []
  const r = z.array(schema).safeParse(value)
  if (!r.success) {
    const issue = r.error.issues[0]
    const where = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('')
    throw new FieldError(`${field}${where}: ${issue.message}`)
  }
  return r.data
}

export function parseAttributes(raw: unknown, index: number): AttributeOp {
  const at = `attributes[${index}]`
  const obj = asObject(raw, at)
  const pushTokenImport = optionalBoolean(obj.push_token_import, `${at}.push_token_import`) ?? false
  const pushTokens = parseList(PushToken, obj.push_tokens, `${at}.push_tokens`)
  let identifier: Identifier | undefined
  if (pushTokenImport) {
    if (obj.external_id !== undefined || obj.service_id !== undefined) {
      throw new FieldError(`${at}: with push_token_import, do not send external_id or service_id`)
    }
    if (pushTokens.length === 0) throw new FieldError(`${at}.push_tokens: push_token_import needs at least one push token`)
  } else {
    identifier = identifierOf(obj, at)
  }
  if (obj.external_id === null) throw new FieldError(`${at}.external_id: cannot be removed once added`)
  if (obj.user_alias === null) throw new FieldError(`${at}.user_alias: cannot be removed once added`)
  const fields: StandardFields = {}
  const custom: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(obj)) {
    if (IDENTIFIERS.has(name) || CONTROL.has(name)) continue
    if ((STANDARD as readonly string[]).includes(name)) {
      // The identifying email/phone is already normalized; as a field it is set the same way.
      ;(fields as Record<string, unknown>)[name] = standardField(name, value, `${at}.${name}`)
    } else {
      custom[name] = customAttribute(name, value, `${at}.${name}`)
    }
  }
  return {
    index,
    identifier,
    updateExistingOnly: optionalBoolean(obj._update_existing_only, `${at}._update_existing_only`),
    pushTokenImport,
    fields,
    custom,
    pushTokens,
    subscriptionGroups: parseList(GroupState, obj.subscription_groups, `${at}.subscription_groups`),
  }
}

function appId(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'string') throw new FieldError(`${field}: must be a string`)
  return value
}

export function parseEvent(raw: unknown, index: number): EventOp {
  const at = `events[${index}]`
  const obj = asObject(raw, at)
  if (typeof obj.name !== 'string' || obj.name.length === 0 || obj.name.length > 255) {
    throw new FieldError(`${at}.name: must be a string of 1 to 255 characters`)
  }
  return {
    index,
    identifier: identifierOf(obj, at),
    app_id: appId(obj.app_id, `${at}.app_id`),
    name: obj.name,
    time: parseTime(obj.time, `${at}.time`),
    properties: properties(obj.properties, `${at}.properties`),
  }
}

export function parsePurchase(raw: unknown, index: number): PurchaseOp {
  const at = `purchases[${index}]`
  const obj = asObject(raw, at)
  if (typeof obj.product_id !== 'string' || obj.product_id.length === 0 || obj.product_id.length > 255) {
    throw new FieldError(`${at}.product_id: must be a string of 1 to 255 characters`)
  }
  if (typeof obj.currency !== 'string' || !/^[A-Za-z]{3}$/.test(obj.currency)) {
    throw new FieldError(`${at}.currency: must be a three-letter ISO 4217 currency code`)
  }
  if (typeof obj.price !== 'number' || !Number.isFinite(obj.price)) throw new FieldError(`${at}.price: must be a number`)
  const quantity = obj.quantity ?? 1
  if (typeof quantity !== 'number' || !Number.isInteger(quantity) || quantity < 1 || quantity > 100) {
    throw new FieldError(`${at}.quantity: must be an integer from 1 to 100`)
  }
  return {
    index,
    identifier: identifierOf(obj, at),
    app_id: appId(obj.app_id, `${at}.app_id`),
    product_id: obj.product_id,
    currency: obj.currency.toUpperCase(),
    price: obj.price,
    quantity,
    time: parseTime(obj.time, `${at}.time`),
    properties: properties(obj.properties, `${at}.properties`),
  }
}

const SUBSCRIBE_STATE = z.enum(['opted_in', 'subscribed', 'unsubscribed'])
const ID_STRING = z.string().min(1).max(512)
const TIME = z.string().describe('ISO 8601 with an offset or Z, e.g. 2024-05-01T12:00:00Z')

/** The identifying fields every object shares; which one names the user is a rule across them. */
const Identifying = {
  external_id: ID_STRING.optional(),
  user_alias: UserAlias.optional(),
  service_id: ID_STRING.optional(),
}
const IDENTIFY_RULE =
  'Exactly one of external_id, user_alias, service_id names the user; without them, email (else phone) does.'

/**
 * A schema for the document whose final check is the object's parser, so that it accepts exactly
 * what the handler accepts; the shape before it must never be stricter (test/shared/domain/track-objects.test.ts).
 */
function parsedBy<T extends z.ZodType>(shape: T, parse: (raw: unknown) => unknown): T {
  return shape.superRefine((value, ctx) => {
    try {
      parse(value)
    } catch (e) {
      if (!(e instanceof FieldError)) throw e
      ctx.addIssue({ code: 'custom', message: e.message })
    }
  })
}

const CustomAttribute = z
  .union([
    z.string(),
    z.number(),
    z.boolean(),
    z.null(),
    z.array(z.unknown()),
    z.object({ inc: z.number().int() }).strict(),
    z.object({ add: z.array(z.unknown()).optional(), remove: z.array(z.unknown()).optional() }).strict(),
    z.record(z.string(), z.unknown()),
  ])
  .describe('A custom attribute (name of 1 to 255 characters): a value, an array, {inc: n} to add to a number, {add, remove} to edit an array, an object, or null to remove it.')

export const AttributeObject = parsedBy(
  z
    .object({
      ...Identifying,
      email: z.string().nullable().optional().describe('an email address of at most 254 characters; null clears it'),
      phone: z.string().nullable().optional().describe('a phone number with its country code (E.164); null clears it'),
      first_name: z.string().max(10_000).nullable().optional(),
      last_name: z.string().max(10_000).nullable().optional(),
      gender: z.string().regex(/^[MFONPmfonp]$/).nullable().optional(),
      dob: z.string().regex(/^\d{4}-\d{2}-\d{2}$/).nullable().optional(),
      home_city: z.string().max(10_000).nullable().optional(),
      country: z.string().regex(/^[A-Za-z]{2}$/).nullable().optional().describe('ISO 3166-1 alpha-2'),
      language: z.string().regex(/^[A-Za-z]{2}$/).nullable().optional().describe('ISO 639-1'),
      time_zone: z.string().nullable().optional().describe('an IANA time zone such as America/New_York'),
      email_subscribe: SUBSCRIBE_STATE.optional(),
      push_subscribe: SUBSCRIBE_STATE.optional(),
      _update_existing_only: z.boolean().optional(),
      push_token_import: z.boolean().optional().describe('creates anonymous profiles by push token: send push_tokens and no external_id or service_id'),
      push_tokens: z.array(PushToken).optional(),
      subscription_groups: z.array(GroupState).optional(),
    })
    .catchall(CustomAttribute)
    .describe(`A user's attributes. ${IDENTIFY_RULE} Every other member is a custom attribute.`),
  (o) => parseAttributes(o, 0),
)

const Properties = z.record(z.string(), z.unknown())

/** The fields an event and a purchase share: who it happened to, and in which app. */
const OccurrenceFields = {
  ...Identifying,
  email: z.string().nullable().optional(),
  phone: z.string().nullable().optional(),
  app_id: z.string().optional(),
}

export const EventObject = parsedBy(
  z
    .object({
      ...OccurrenceFields,
      name: z.string().min(1).max(255),
      time: TIME,
      properties: Properties.optional(),
    })
    .describe(`An occurrence of a custom event. ${IDENTIFY_RULE}`),
  (o) => parseEvent(o, 0),
)

export const PurchaseObject = parsedBy(
  z
    .object({
      ...OccurrenceFields,
      product_id: z.string().min(1).max(255),
      currency: z.string().regex(/^[A-Za-z]{3}$/).describe('ISO 4217'),
      price: z.number(),
      quantity: z.number().int().min(1).max(100).nullable().optional().describe('1 when absent'),
      time: TIME,
      properties: Properties.optional(),
    })
    .describe(`A purchase. ${IDENTIFY_RULE}`),
  (o) => parsePurchase(o, 0),
)
