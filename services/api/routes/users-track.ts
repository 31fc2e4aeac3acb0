import { Router, type Response } from 'express'
import { z } from 'zod'
import { isPlainObject } from '../../../shared/domain/attributes.js'
import type { Identifier } from '../../../shared/domain/identifiers.js'
import {
  FieldError,
  customAttribute,
  identifierOf,
  parseTime,
  properties,
  standardField,
} from '../../../shared/domain/track-validation.js'
import { ApiError } from '../../../shared/errors.js'
import { BacklogFullError, submitRequest } from '../../../shared/queue/jobs.js'
import { trackRequestJobs } from '../../../shared/queue/track-job-builder.js'
import type { AttributeOp, EventOp, PurchaseOp, StandardFields } from '../../../shared/queue/track-jobs.js'
import type { ApiDeps, Guard } from '../deps.js'
import type { ApiOperation } from '../api-operation.js'
import { jsonProblem } from '../validation.js'

export const MAX_OBJECTS = 75

export const TrackBody = z.object({
  attributes: z.array(z.unknown()).max(MAX_OBJECTS, `at most ${MAX_OBJECTS} attributes objects per request`).optional(),
  events: z.array(z.unknown()).max(MAX_OBJECTS, `at most ${MAX_OBJECTS} event objects per request`).optional(),
  purchases: z.array(z.unknown()).max(MAX_OBJECTS, `at most ${MAX_OBJECTS} purchase objects per request`).optional(),
})

const STANDARD = ['first_name', 'last_name', 'gender', 'dob', 'home_city', 'country', 'language', 'time_zone', 'email', 'phone', 'email_subscribe', 'push_subscribe'] as const
const IDENTIFIERS = new Set(['external_id', 'user_alias', 'service_id'])
const CONTROL = new Set(['_update_existing_only', 'push_token_import', 'push_tokens', 'subscription_groups'])

// Bounded: app_id and token make the key of an index row (at most 2704 bytes).
const PushToken = z.object({ app_id: z.string().min(1).max(255), token: z.string().min(1).max(1024), device_id: z.string().optional() }).strict()
const GroupState = z.object({ subscription_group_id: z.string().min(1), subscription_state: z.enum(['subscribed', 'unsubscribed']) }).strict()

export interface TrackError {
  type: string
  input_array: 'attributes' | 'events' | 'purchases'
  index: number
  message: string
}

/** A full backlog answers 429 with a Retry-After; nothing was enqueued. */
function backlogFull(e: BacklogFullError, res: Response, deps: ApiDeps): ApiError {
  res.setHeader('Retry-After', String(e.retryAfterSeconds))
  deps.metrics.rateLimited.inc({ bucket: 'track_backlog' })
  const whose = e.refusal.scope === 'workspace' ? "this workspace's" : "the service's"
  return new ApiError(429, 'backlog_full', `backlog full: ${whose} accepted work not yet applied is at its limit; retry after ${e.retryAfterSeconds} s`, {
    reason: 'backlog_full',
    scope: e.refusal.scope,
  })
}

function fatal(message: string): ApiError {
  return new ApiError(400, 'bad_request', message, { errors: [message] })
}

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

export function parseEvent(raw: unknown, index: number, requestId: string): EventOp {
  const at = `events[${index}]`
  const obj = asObject(raw, at)
  if (typeof obj.name !== 'string' || obj.name.length === 0 || obj.name.length > 255) {
    throw new FieldError(`${at}.name: must be a string of 1 to 255 characters`)
  }
  return {
    index,
    eventId: `${requestId}:e:${index}`,
    identifier: identifierOf(obj, at),
    app_id: appId(obj.app_id, `${at}.app_id`),
    name: obj.name,
    time: parseTime(obj.time, `${at}.time`),
    properties: properties(obj.properties, `${at}.properties`),
  }
}

export function parsePurchase(raw: unknown, index: number, requestId: string): PurchaseOp {
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
    eventId: `${requestId}:p:${index}`,
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

/** Parses each object on its own: a bad one becomes a non-fatal error, the rest go ahead. */
function parseEach<T>(list: unknown[] | undefined, inputArray: TrackError['input_array'], parse: (raw: unknown, i: number) => T, errors: TrackError[]): T[] {
  const out: T[] = []
  ;(list ?? []).forEach((raw, i) => {
    try {
      const problem = jsonProblem(raw)
      if (problem) {
        const where = problem.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('')
        throw new FieldError(`${inputArray}[${i}]${where}: ${problem.message}`)
      }
      out.push(parse(raw, i))
    } catch (e) {
      if (!(e instanceof FieldError)) throw e
      errors.push({ type: 'invalid_object', input_array: inputArray, index: i, message: e.message })
    }
  })
  return out
}

export const openapi: ApiOperation[] = [
  {
    method: 'post',
    path: '/users/track',
    summary: 'Record attributes, events and purchases of users',
    auth: 'api_key',
    permission: 'users.track',
    write: true,
    body: TrackBody,
    responses: {
      201: '`{message: "success", attributes_processed?, events_processed?, purchases_processed?, errors?}`',
      429: 'rate limit of the workspace exceeded, or `{reason: "backlog_full", scope: "workspace" | "all"}`: accepted work not yet applied is at its bound; nothing was enqueued, retry after `Retry-After` seconds',
    },
  },
]

/** POST /users/track (interface.md 4.1). */
export function usersTrackRoutes(deps: ApiDeps, guard: Guard): Router {
  const r = Router()
  r.post('/users/track', ...guard('users.track', { write: true }), async (req, res) => {
    if (!isPlainObject(req.body)) throw fatal('request body must be a JSON object')
    const parsed = TrackBody.safeParse(req.body)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw fatal(`${issue.path.join('.') || 'body'}: ${issue.message}`)
    }
    const body = parsed.data
    if (!body.attributes && !body.events && !body.purchases) throw fatal('request must contain attributes, events or purchases')

    const workspaceId = res.locals.auth!.workspaceId
    const requestId = res.locals.requestId!
    const externalIds = [...(body.attributes ?? []), ...(body.events ?? []), ...(body.purchases ?? [])]
      // An id with a NUL cannot be looked up (nor stored): its object is refused below.
      .map((o) => (isPlainObject(o) && typeof o.external_id === 'string' && !o.external_id.includes('\u0000') ? o.external_id : undefined))
      .filter((x): x is string => x !== undefined)
    if (await deps.workspaces.anyBlocked(workspaceId, externalIds)) {
      throw fatal('provided external_id is blacklisted and disallowed')
    }

    const errors: TrackError[] = []
    const attributes = parseEach(body.attributes, 'attributes', parseAttributes, errors)
    const events = parseEach(body.events, 'events', (o, i) => parseEvent(o, i, requestId), errors)
    const purchases = parseEach(body.purchases, 'purchases', (o, i) => parsePurchase(o, i, requestId), errors)
    if (attributes.length + events.length + purchases.length === 0) {
      throw new ApiError(400, 'bad_request', errors[0].message, { errors })
    }
    const jobs = trackRequestJobs({ workspaceId, requestId }, { attributes, events, purchases }, deps.config.TRACK_PARTITIONS)
    const backlogBound = { all: deps.config.TRACK_BACKLOG_MAX_OBJECTS, workspace: deps.config.TRACK_BACKLOG_MAX_OBJECTS_PER_WORKSPACE }
    try {
      await submitRequest(deps.producer, { workspaceId, requestId, jobs, errors, backlogBound })
    } catch (e) {
      if (e instanceof BacklogFullError) throw backlogFull(e, res, deps)
      throw e
    }
    res.status(201).json({
      message: 'success',
      ...(body.attributes && { attributes_processed: attributes.length }),
      ...(body.events && { events_processed: events.length }),
      ...(body.purchases && { purchases_processed: purchases.length }),
      ...(errors.length && { errors }),
    })
  })
  return r
}
