import type { Response } from 'express'
import { z } from 'zod'
import { isPlainObject } from '../../../shared/domain/attributes.js'
import type { ObjectError, TrackInputArray } from '../../../shared/domain/object-error.js'
import { AttributeObject, EventObject, PurchaseObject, parseAttributes, parseEvent, parsePurchase } from '../../../shared/domain/track-objects.js'
import type { AttributeOp, EventOp, PurchaseOp } from '../../../shared/domain/track-operations.js'
import { FieldError } from '../../../shared/domain/track-validation.js'
import { ApiError } from '../../../shared/errors.js'
import { BacklogFullError, submitRequest } from '../../../shared/queue/jobs.js'
import { trackRequestJobs } from '../../../shared/queue/track-job-builder.js'
import type { TrackLayout } from '../../../shared/queue/track-layout.js'
import type { Config } from '../../../shared/config.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'
import { jsonProblem, textsMayHoldProblems } from '../validation.js'

export const MAX_OBJECTS = 75

function trackBody(item: { attributes: z.ZodType; events: z.ZodType; purchases: z.ZodType }) {
  return z.object({
    attributes: z.array(item.attributes).max(MAX_OBJECTS, `at most ${MAX_OBJECTS} attributes objects per request`).optional(),
    events: z.array(item.events).max(MAX_OBJECTS, `at most ${MAX_OBJECTS} event objects per request`).optional(),
    purchases: z.array(item.purchases).max(MAX_OBJECTS, `at most ${MAX_OBJECTS} purchase objects per request`).optional(),
  })
}

/**
 * The body as the handler parses it: the lists and their limits. Each object is then parsed on its
 * own (shared/domain/track-objects.ts), so that a bad one is reported without refusing the others.
 */
const TrackBody = trackBody({ attributes: z.unknown(), events: z.unknown(), purchases: z.unknown() })

/** The same body as documented: each object with its schema, which accepts what its parser accepts. */
const TrackBodyDocument = trackBody({ attributes: AttributeObject, events: EventObject, purchases: PurchaseObject })

/**
 * A track object refused while validating (`invalid_object`), or one of its members refused alone
 * (`invalid_field`: the rest of the object applies); the rest of its request goes ahead.
 */
type TrackError = ObjectError<'invalid_object' | 'invalid_field', TrackInputArray>

/** A full backlog answers 429 with a Retry-After; nothing was enqueued. */
export function backlogFull(e: BacklogFullError, res: Response, deps: Pick<TrackDeps, 'metrics'>): ApiError {
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

/**
 * Parses each object on its own: a bad one becomes a non-fatal error in `errors`, the rest go
 * ahead. A parser may also leave out members refused alone (`dropped`), each a non-fatal error of
 * its own. `texts` as parseTrackObjects says.
 */
function parseEach<T>(
  list: unknown[] | undefined,
  inputArray: TrackInputArray,
  parse: (raw: unknown, i: number, dropped: string[]) => T,
  { errors, texts }: { errors: TrackError[]; texts: boolean },
): T[] {
  const out: T[] = []
  const dropped: string[] = []
  ;(list ?? []).forEach((raw, i) => {
    try {
      const problem = jsonProblem(raw, texts)
      if (problem) {
        const where = problem.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('')
        throw new FieldError(`${inputArray}[${i}]${where}: ${problem.message}`)
      }
      out.push(parse(raw, i, dropped))
      for (const message of dropped) errors.push({ type: 'invalid_field', input_array: inputArray, index: i, message })
      dropped.length = 0
    } catch (e) {
      dropped.length = 0
      if (!(e instanceof FieldError)) throw e
      errors.push({ type: 'invalid_object', input_array: inputArray, index: i, message: e.message })
    }
  })
  return out
}

type TrackLists = z.infer<typeof TrackBody>

/** The body's lists, or a 400 for a body that is no object, lists too long, or nothing to do. */
export function trackBodyOf(raw: unknown): TrackLists {
  if (!isPlainObject(raw)) throw fatal('request body must be a JSON object')
  const parsed = TrackBody.safeParse(raw)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    throw fatal(`${issue.path.join('.') || 'body'}: ${issue.message}`)
  }
  const body = parsed.data
  // Empty lists count as absent: clients that always send all three lists send [] for the unused ones.
  if (!body.attributes?.length && !body.events?.length && !body.purchases?.length) throw fatal('request must contain attributes, events or purchases')
  return body
}

/**
 * Each object of the body parsed on its own (bench/validation.ts measures this with trackBodyOf);
 * `texts` false when no string or key of the body can hold a NUL or an unpaired surrogate (textsMayHoldProblems).
 */
export function parseTrackObjects(
  body: TrackLists,
  texts = true,
): { attributes: AttributeOp[]; events: EventOp[]; purchases: PurchaseOp[]; errors: TrackError[] } {
  const errors: TrackError[] = []
  const attributes = parseEach(body.attributes, 'attributes', parseAttributes, { errors, texts })
  const events = parseEach(body.events, 'events', parseEvent, { errors, texts })
  const purchases = parseEach(body.purchases, 'purchases', parsePurchase, { errors, texts })
  return { attributes, events, purchases, errors }
}

/**
 * A fatal 400 when an object names an external id the workspace blocks, before any object is
 * checked (/users/track and /users/track/sync).
 */
export async function refuseBlockedExternalIds(
  deps: Pick<ApiDeps, 'workspaces'>,
  workspaceId: string,
  lists: { attributes?: unknown[]; events?: unknown[]; purchases?: unknown[] },
): Promise<void> {
  const externalIds = [...(lists.attributes ?? []), ...(lists.events ?? []), ...(lists.purchases ?? [])]
    // An id with a NUL cannot be stored, so it is blocked by no list: its object is refused when parsed.
    .map((o) => (isPlainObject(o) && typeof o.external_id === 'string' && !o.external_id.includes('\u0000') ? o.external_id : undefined))
    .filter((x): x is string => x !== undefined)
  if (await deps.workspaces.anyBlocked(workspaceId, externalIds)) throw fatal('provided external_id is blacklisted and disallowed')
}

/** What /users/track uses: blocked ids, the partition count and backlog bounds, the queues, the 429 counter. */
type TrackDeps = Pick<ApiDeps, 'workspaces' | 'producer' | 'metrics'> & {
  config: Pick<Config, 'TRACK_BACKLOG_MAX_OBJECTS' | 'TRACK_BACKLOG_MAX_OBJECTS_PER_WORKSPACE'>
}

/** POST /users/track (interface.md 4.1). */
const track: ApiRoute<TrackDeps> = {
  method: 'post',
  path: '/users/track',
  summary: 'Record attributes, events and purchases of users',
  auth: 'api_key',
  permission: 'users.track',
  write: true,
  body: TrackBodyDocument,
  responses: {
    201: '`{message: "success", attributes_processed?, events_processed?, purchases_processed?, errors?}`',
    429: 'rate limit of the workspace exceeded, or `{reason: "backlog_full", scope: "workspace" | "all"}`: accepted work not yet applied is at its bound; nothing was enqueued, retry after `Retry-After` seconds',
  },
  handle: async (req, res, deps) => {
    const body = trackBodyOf(req.body)
    const workspaceId = res.locals.auth!.workspaceId
    const requestId = res.locals.requestId!
    await refuseBlockedExternalIds(deps, workspaceId, body)

    const { attributes, events, purchases, errors } = parseTrackObjects(body, textsMayHoldProblems(req))
    if (attributes.length + events.length + purchases.length === 0) {
      throw new ApiError(400, 'bad_request', errors[0].message, { errors })
    }
    const jobs = (layout: TrackLayout) => trackRequestJobs({ workspaceId, requestId }, { attributes, events, purchases }, layout.partitions)
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
  },
}

export const usersTrackRoutes: RouteFamily<TrackDeps> = { routes: [track] }
