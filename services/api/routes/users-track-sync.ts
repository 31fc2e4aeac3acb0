import { z } from 'zod'
import { findProfilesForRead } from '../../../shared/db/repositories/profile-lookup-repository.js'
import { loadStoredRecords } from '../../../shared/db/repositories/user-record-repository.js'
import { isPlainObject } from '../../../shared/domain/attributes.js'
import { identifierKey, type Identifier } from '../../../shared/domain/identifiers.js'
import { AttributeObject, EventObject, PurchaseObject } from '../../../shared/domain/track-objects.js'
import { ApiError } from '../../../shared/errors.js'
import { BacklogFullError, submitRequest } from '../../../shared/queue/jobs.js'
import type { TrackLayout } from '../../../shared/queue/track-layout.js'
import { trackRequestJobs } from '../../../shared/queue/track-job-builder.js'
import type { Config } from '../../../shared/config.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'
import { textsMayHoldProblems } from '../validation.js'
import { backlogFull, parseTrackObjects, refuseBlockedExternalIds } from './users-track.js'

function fatal(message: string, errors: unknown[] = [message]): ApiError {
  return new ApiError(400, 'bad_request', message, { errors })
}

/** One object, or a list holding one (the reference's examples send the list form). */
const OneOf = (item: z.ZodType) => z.union([item, z.array(item).max(1)]).optional()

/** As documented: at most one attributes, one event and one purchase object, all naming the same user. */
const TrackSyncBody = z.object({ attributes: OneOf(AttributeObject), events: OneOf(EventObject), purchases: OneOf(PurchaseObject) })

type Lists = { attributes?: unknown[]; events?: unknown[]; purchases?: unknown[] }

/** The body as lists of at most one object each, or a fatal 400. */
function syncBodyOf(raw: unknown): Lists {
  if (!isPlainObject(raw)) throw fatal('request body must be a JSON object')
  const unknownKey = Object.keys(raw).find((k) => k !== 'attributes' && k !== 'events' && k !== 'purchases')
  if (unknownKey) throw fatal(`${unknownKey}: unknown field; send attributes, events or purchases`)
  const lists: Lists = {}
  for (const name of ['attributes', 'events', 'purchases'] as const) {
    const value = raw[name]
    if (value === undefined) continue
    const list = Array.isArray(value) ? value : [value]
    if (list.length > 1) throw fatal(`${name}: /users/track/sync takes one ${name === 'attributes' ? 'attributes' : name.slice(0, -1)} object per request`)
    if (list.length === 1) lists[name] = list
  }
  if (!lists.attributes && !lists.events && !lists.purchases) throw fatal('request must contain one attributes, event or purchase object')
  return lists
}

type SyncDeps = Pick<ApiDeps, 'workspaces' | 'producer' | 'tracker' | 'pg' | 'clickhouseReads' | 'metrics'> & {
  config: Pick<Config, 'TRACK_BACKLOG_MAX_OBJECTS' | 'TRACK_BACKLOG_MAX_OBJECTS_PER_WORKSPACE' | 'SYNC_WAIT_MS'>
}

/** How the answer names the user: the identifier as the request sent it. */
function sentIdentifier(id: Identifier): Record<string, unknown> {
  switch (id.kind) {
    case 'user_alias':
      return { user_alias: { alias_name: id.alias_name, alias_label: id.alias_label } }
    case 'service_id':
      return { service_id: id.value }
    default:
      return { [id.kind]: id.value }
  }
}

/**
 * The user after the work applied, as the reference answers it: the identifier, the custom
 * attributes the request named, and the summaries of the event and product the request sent.
 * An email or phone several users hold names the most recently updated one, as /users/track applies it.
 */
async function userAfter(deps: SyncDeps, workspaceId: string, id: Identifier, named: { attributes: string[]; event?: string; product?: string }) {
  const lookup = {
    externalIds: id.kind === 'external_id' ? [id.value] : [],
    aliases: id.kind === 'user_alias' ? [{ alias_label: id.alias_label, alias_name: id.alias_name }] : [],
    serviceIds: id.kind === 'service_id' ? [id.value] : [],
    emails: id.kind === 'email' ? [id.value] : [],
    phones: id.kind === 'phone' ? [id.value] : [],
  }
  const matches = await findProfilesForRead(deps.pg, workspaceId, lookup)
  const stored = await loadStoredRecords(deps.pg, [...new Set(matches.map((m) => m.profile_id))])
  const latest = stored.sort((a, b) => (a.profile.updated_at < b.profile.updated_at ? 1 : a.profile.updated_at > b.profile.updated_at ? -1 : b.profile.id - a.profile.id))[0]
  if (!latest) return undefined
  const user: Record<string, unknown> = sentIdentifier(id)
  const custom = latest.record.custom_attributes ?? {}
  if (named.attributes.length) user.custom_attributes = Object.fromEntries(named.attributes.filter((n) => n in custom).map((n) => [n, custom[n]]))
  if (named.event !== undefined || named.product !== undefined) {
    const summaries = (await deps.clickhouseReads.eventSummaries(workspaceId, [latest.profile.id])).get(latest.profile.id) ?? []
    const summary = (kind: 'event' | 'purchase', name: string) =>
      summaries.filter((s) => s.kind === kind && s.name === name).map((s) => ({ first: s.first, last: s.last, count: Number(s.count) }))
    if (named.event !== undefined) user.custom_events = summary('event', named.event).map((s) => ({ name: named.event, ...s }))
    if (named.product !== undefined) user.purchase_events = summary('purchase', named.product).map((s) => ({ product_id: named.product, ...s }))
  }
  return user
}

/**
 * POST /users/track/sync: one object (or one of each kind) for one user, applied exactly as
 * /users/track applies it (same partition, same order, same exactly-once), answered once it
 * applied with the fields the request touched. Past SYNC_WAIT_MS it answers 202 with the
 * request id (docs/compatibility.md).
 */
const trackSync: ApiRoute<SyncDeps> = {
  method: 'post',
  path: '/users/track/sync',
  summary: 'Record one attributes, event or purchase object of one user and answer once it is applied',
  auth: 'api_key',
  permission: 'users.track.sync',
  write: true,
  body: TrackSyncBody,
  responses: {
    201: '`{users: [{<identifier>, custom_attributes?, custom_events?, purchase_events?}], message: "success", errors?}`; `users` is empty when no user exists (`_update_existing_only`)',
    202: '`{message: "success", status: "queued", users: []}`: not applied within SYNC_WAIT_MS; it still applies (GET /requests/{id})',
    429: 'rate limit of the workspace exceeded, or the track backlog is full (`Retry-After`)',
  },
  handle: async (req, res, deps) => {
    const lists = syncBodyOf(req.body)
    const workspaceId = res.locals.auth!.workspaceId
    const requestId = res.locals.requestId!
    await refuseBlockedExternalIds(deps, workspaceId, lists)
    const { attributes, events, purchases, errors } = parseTrackObjects(lists, textsMayHoldProblems(req))
    if (errors.length) throw new ApiError(400, 'bad_request', errors[0].message, { errors })
    const identifiers = [...attributes.map((a) => a.identifier), ...events.map((e) => e.identifier), ...purchases.map((p) => p.identifier)]
    const [user] = identifiers
    if (!user) throw fatal('attributes: /users/track/sync needs a user identifier (push_token_import is not supported here)')
    if (identifiers.some((id) => !id || identifierKey(id) !== identifierKey(user))) throw fatal('every object of a /users/track/sync request must name the same user')

    const jobs = (layout: TrackLayout) => trackRequestJobs({ workspaceId, requestId }, { attributes, events, purchases }, layout.partitions)
    const backlogBound = { all: deps.config.TRACK_BACKLOG_MAX_OBJECTS, workspace: deps.config.TRACK_BACKLOG_MAX_OBJECTS_PER_WORKSPACE }
    try {
      await submitRequest(deps.producer, { workspaceId, requestId, jobs, backlogBound })
    } catch (e) {
      if (e instanceof BacklogFullError) throw backlogFull(e, res, deps)
      throw e
    }
    const progress = await deps.tracker.waitUntilFinished(requestId, workspaceId, deps.config.SYNC_WAIT_MS)
    if (!progress) return void res.status(202).json({ message: 'success', status: 'queued', users: [] })
    const after = await userAfter(deps, workspaceId, user, {
      attributes: Object.keys(attributes[0]?.custom ?? {}),
      event: events[0]?.name,
      product: purchases[0]?.product_id,
    })
    res.status(201).json({ users: after ? [after] : [], message: 'success', ...(progress.errors?.length && { errors: progress.errors }) })
  },
}

export const usersTrackSyncRoutes: RouteFamily<SyncDeps> = { routes: [trackSync] }
