import { Router } from 'express'
import { z } from 'zod'
import { addToEmailList, listEmailList, type EmailList } from '../../../shared/db/repositories/email-list-repository.js'
import { getWorkspace } from '../../../shared/db/repositories/workspace-repository.js'
import { EmailAddress } from '../../../shared/domain/email.js'
import { notFound } from '../../../shared/errors.js'
import { requireAdminToken } from '../middleware/auth.js'
import type { ApiDeps } from '../deps.js'
import type { ApiOperation } from '../api-operation.js'
import { parseOr400 } from '../validation.js'

const MAX_ADDED = 10_000
const PAGE_DEFAULT = 1000
const PAGE_MAX = 10_000

const AddEmails = z
  .object({
    emails: z
      .array(EmailAddress)
      .min(1, 'must hold at least 1 email address')
      .max(MAX_ADDED, `must hold at most ${MAX_ADDED} email addresses per request`),
  })
  .strict()

const Page = z.object({
  after: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(PAGE_MAX).default(PAGE_DEFAULT),
})

const lists: { path: string; list: EmailList }[] = [
  { path: 'email_spam_list', list: 'spam' },
  { path: 'email_bounce_list', list: 'bounce' },
]

export const openapi: ApiOperation[] = lists.flatMap(({ path, list }) => [
  {
    method: 'post' as const,
    path: `/admin/v1/workspaces/:ws/${path}`,
    summary: `Add addresses to the workspace email ${list} list`,
    auth: 'admin' as const,
    body: AddEmails,
    responses: { 200: '`{added, emails}`', 404: 'unknown workspace' },
  },
  {
    method: 'get' as const,
    path: `/admin/v1/workspaces/:ws/${path}`,
    summary: `List the workspace email ${list} list, page by page`,
    auth: 'admin' as const,
    query: Page,
    responses: { 200: '`{emails, next_after?}`', 404: 'unknown workspace' },
  },
])

/**
 * The operator's side of the spam and bounce lists (the public API only removes from them):
 * POST adds addresses, GET pages through a list in address order.
 */
export function adminEmailListRoutes(deps: ApiDeps): Router {
  const r = Router()
  r.use('/admin/v1', requireAdminToken(deps.adminToken))

  const workspaceOr404 = async (id: string) => {
    if (!(await getWorkspace(deps.pg, id))) throw notFound(`unknown workspace ${id}`)
  }

  for (const { path, list } of lists) {
    r.post(`/admin/v1/workspaces/:ws/${path}`, async (req, res) => {
      const body = parseOr400(AddEmails, req.body)
      await workspaceOr404(req.params.ws)
      const emails = [...new Set(body.emails)]
      const added = await addToEmailList(deps.pg, req.params.ws, list, emails)
      res.json({ added, emails })
    })

    r.get(`/admin/v1/workspaces/:ws/${path}`, async (req, res) => {
      const page = parseOr400(Page, req.query)
      await workspaceOr404(req.params.ws)
      const entries = await listEmailList(deps.pg, req.params.ws, list, page)
      const next = entries.length === page.limit ? entries[entries.length - 1].email : undefined
      res.json({ emails: entries, ...(next && { next_after: next }) })
    })
  }
  return r
}
