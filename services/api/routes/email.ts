import type { Response } from 'express'
import { z } from 'zod'
import { removeFromEmailList, type EmailList } from '../../../shared/db/repositories/email-list-repository.js'
import { EmailAddress } from '../../../shared/domain/email.js'
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
    const request = { workspaceId: res.locals.auth!.workspaceId, requestId: res.locals.requestId! }
    const emailStateChanges = body.email.map((email) => ({ email, subscription_state: body.subscription_state }))
    const jobs = (layout: TrackLayout) => trackChangeJobs(request, { emailStateChanges }, layout.partitions)
    await submitRequest(deps.producer, { ...request, jobs })
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

/** interface.md 4.10 to 4.12. */
export const emailRoutes: RouteFamily<EmailDeps> = { routes: [emailStatus, removeRoute('spam'), removeRoute('bounce')] }
