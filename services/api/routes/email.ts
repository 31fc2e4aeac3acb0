import type { Response } from 'express'
import { z } from 'zod'
import {
  addToEmailList,
  queryBounceList,
  queryUnsubscribes,
  removeFromEmailList,
  type EmailList,
  type EmailListQuery,
} from '../../../shared/db/repositories/email-list-repository.js'
import { EmailAddress } from '../../../shared/domain/email.js'
import { badRequest } from '../../../shared/errors.js'
import { noEmailProvider, type EmailProviderLists } from '../../../shared/domain/email-provider.js'
import { ApiError } from '../../../shared/errors.js'
import { submitRequest } from '../../../shared/queue/jobs.js'
import { trackChangeJobs } from '../../../shared/queue/track-job-builder.js'
import type { TrackLayout } from '../../../shared/queue/track-layout.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'
import { parseOr400, upTo50 } from '../validation.js'

// One address or up to 50, as /email/spam/remove takes them (interface.md 4.11); each is applied as if sent alone.
const EmailStatusBody = z
  .object({ email: upTo50(EmailAddress, 'email addresses'), subscription_state: z.enum(['opted_in', 'subscribed', 'unsubscribed']) })
  .strict()

const RemoveBody = z.object({ email: upTo50(EmailAddress, 'email addresses') }).strict()

/**
 * Postgres for the lists, the queues and the partition count for state changes; `emailProvider`
 * is the email provider's list hook: without one, only the service's own lists change.
 */
export type EmailDeps = Pick<ApiDeps, 'pg' | 'producer'> & { emailProvider?: EmailProviderLists }

const removeFromProvider: Record<EmailList, (p: EmailProviderLists, emails: string[]) => Promise<void>> = {
  spam: (p, emails) => p.removeFromSpamList(emails),
  bounce: (p, emails) => p.removeFromBounceList(emails),
}

/**
 * Removes addresses from the service's list, then from the provider's. Both are idempotent, so a
 * client that gets the 502 of a provider failure simply repeats the request. The removal is
 * synchronous; its request id is recorded as done so that GET /requests/{id} answers like for
 * every other write.
 */
async function removeFromLists(deps: EmailDeps, res: Response, list: EmailList, emails: string[]) {
  const workspaceId = res.locals.auth!.workspaceId
  const unique = [...new Set(emails)]
  const removed = await removeFromEmailList(deps.pg, workspaceId, list, unique)
  try {
    await removeFromProvider[list](deps.emailProvider ?? noEmailProvider, unique)
  } catch (e) {
    throw new ApiError(502, 'email_provider_failed', `removed from the service's ${list} list, but the email provider's ${list} list could not be updated: ${(e as Error).message}`, { removed })
  }
  await submitRequest(deps.producer, { workspaceId, requestId: res.locals.requestId!, jobs: [] })
  res.status(201).json({ message: 'success', removed })
}

/**
 * Queues a state for each address as /email/status does: the track worker stores it for the
 * address and sets it on the profiles having the address now and those getting it later.
 */
async function queueEmailStates(deps: EmailDeps, res: Response, emails: string[], state: 'opted_in' | 'subscribed' | 'unsubscribed'): Promise<void> {
  const request = { workspaceId: res.locals.auth!.workspaceId, requestId: res.locals.requestId! }
  const emailStateChanges = emails.map((email) => ({ email, subscription_state: state }))
  await submitRequest(deps.producer, { ...request, jobs: (layout: TrackLayout) => trackChangeJobs(request, { emailStateChanges }, layout.partitions) })
}

const emailStatus: ApiRoute<EmailDeps> = {
  method: 'post',
  path: '/email/status',
  summary: 'Set the global email subscription state of one address or up to 50, tied to a user or not',
  auth: 'api_key',
  permission: 'email.status',
  write: true,
  body: EmailStatusBody,
  responses: { 201: '`{message: "success"}`' },
  handle: async (req, res, deps) => {
    const body = parseOr400(EmailStatusBody, req.body)
    await queueEmailStates(deps, res, body.email, body.subscription_state)
    res.status(201).json({ message: 'success' })
  },
}

const removeRoute = (list: EmailList): ApiRoute<EmailDeps> => ({
  method: 'post',
  path: `/email/${list}/remove`,
  summary: `Remove addresses from the ${list} list`,
  auth: 'api_key',
  permission: `email.${list}.remove`,
  write: true,
  body: RemoveBody,
  responses: { 201: '`{message: "success"}`' },
  handle: async (req, res, deps) => {
    const body = parseOr400(RemoveBody, req.body)
    await removeFromLists(deps, res, list, body.email)
  },
})

/**
 * Blocklisting an address unsubscribes it from email and marks it hard bounced (the reference's
 * /email/blocklist, and /email/blacklist, its older name): the address joins the bounce list at
 * once, and its `unsubscribed` state is queued like /email/status, for the profiles having it now
 * and those getting it later.
 */
const blocklistRoute = (path: '/email/blocklist' | '/email/blacklist'): ApiRoute<EmailDeps> => ({
  method: 'post',
  path,
  summary: path === '/email/blocklist' ? 'Unsubscribe addresses from email and mark them hard bounced' : 'The older name of /email/blocklist',
  auth: 'api_key',
  permission: 'email.blacklist',
  write: true,
  body: RemoveBody,
  responses: { 201: '`{message: "success"}`' },
  handle: async (req, res, deps) => {
    const body = parseOr400(RemoveBody, req.body)
    const emails = [...new Set(body.email)]
    await addToEmailList(deps.pg, res.locals.auth!.workspaceId, 'bounce', emails)
    await queueEmailStates(deps, res, emails, 'unsubscribed')
    res.status(201).json({ message: 'success' })
  },
})

const Day = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date YYYY-MM-DD').refine((d) => !Number.isNaN(Date.parse(`${d}T00:00:00Z`)), 'must be a valid date')
const Count = (max: number, fallback: number) => z.coerce.number().int('must be an integer').min(0, 'must be 0 or more').max(max, `must be at most ${max}`).default(fallback)

/** The query of the list endpoints, as the reference documents it. */
const ListQuery = z.object({
  start_date: Day.optional(),
  end_date: Day.optional(),
  limit: Count(500, 100).refine((n) => n > 0, 'must be at least 1'),
  offset: Count(Number.MAX_SAFE_INTEGER, 0),
  email: upTo50(EmailAddress, 'email addresses').optional(),
})
const UnsubscribesQuery = ListQuery.extend({ sort_direction: z.enum(['asc', 'desc']).default('desc') })

/**
 * Addresses win over dates, as the reference says; `end_date` is needed with `start_date` only (a
 * query by address needs no dates). A date range runs from `start_date` 00:00 UTC
 * through the whole of `end_date` (a range naming one day holds that day).
 */
function listQueryOf(q: z.infer<typeof ListQuery>, descending: boolean): EmailListQuery {
  const page = { descending, limit: q.limit, offset: q.offset }
  if (q.email) return { ...page, emails: q.email }
  if (!q.start_date) throw badRequest('start_date: send start_date or email')
  if (!q.end_date) throw badRequest('end_date: is required with start_date (YYYY-MM-DD)')
  if (q.start_date > q.end_date) throw badRequest('start_date: must be earlier than end_date')
  const to = new Date(Date.parse(`${q.end_date}T00:00:00Z`) + 86_400_000).toISOString()
  return { ...page, range: { from: `${q.start_date}T00:00:00.000Z`, to } }
}

const hardBounces: ApiRoute<EmailDeps> = {
  method: 'get',
  path: '/email/hard_bounces',
  summary: 'List hard-bounced addresses of a date range, or tell whether addresses bounced',
  auth: 'api_key',
  permission: 'email.hard_bounces',
  query: ListQuery,
  responses: { 200: '`{emails: [{email, hard_bounced_at}], message: "success"}`, newest first' },
  handle: async (req, res, deps) => {
    const q = parseOr400(ListQuery, req.query)
    const emails = await queryBounceList(deps.pg, res.locals.auth!.workspaceId, listQueryOf(q, true))
    res.json({ emails, message: 'success' })
  },
}

/** The reference's form of an unsubscribe time: `2016-08-25 15:24:32 +0000`. */
const unsubscribeTime = (d: Date) => `${d.toISOString().slice(0, 19).replace('T', ' ')} +0000`

const unsubscribes: ApiRoute<EmailDeps> = {
  method: 'get',
  path: '/email/unsubscribes',
  summary: 'List addresses unsubscribed from email in a date range, or tell whether addresses are',
  auth: 'api_key',
  permission: 'email.unsubscribe',
  query: UnsubscribesQuery,
  responses: { 200: '`{emails: [{email, unsubscribed_at}], message: "success"}`, newest first unless `sort_direction=asc`' },
  handle: async (req, res, deps) => {
    const q = parseOr400(UnsubscribesQuery, req.query)
    const rows = await queryUnsubscribes(deps.pg, res.locals.auth!.workspaceId, listQueryOf(q, q.sort_direction === 'desc'))
    res.json({ emails: rows.map((r) => ({ email: r.email, unsubscribed_at: unsubscribeTime(r.unsubscribed_at) })), message: 'success' })
  },
}

/** interface.md 4.10 to 4.12, and the reference's list and blocklist endpoints (docs/subscriptions.md). */
export const emailRoutes: RouteFamily<EmailDeps> = {
  routes: [emailStatus, removeRoute('spam'), removeRoute('bounce'), blocklistRoute('/email/blocklist'), blocklistRoute('/email/blacklist'), hardBounces, unsubscribes],
}
