import { z } from 'zod'
import { addToEmailList, listEmailList, type EmailList } from '../../../shared/db/repositories/email-list-repository.js'
import { getWorkspace } from '../../../shared/db/repositories/workspace-repository.js'
import { EmailAddress } from '../../../shared/domain/email.js'
import { notFound } from '../../../shared/errors.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'
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

type ListDeps = Pick<ApiDeps, 'pg'>

async function workspaceOr404(db: ListDeps['pg'], id: string) {
  if (!(await getWorkspace(db, id))) throw notFound(`unknown workspace ${id}`)
}

function listRoutes(path: string, list: EmailList): ApiRoute<ListDeps>[] {
  return [
    {
      method: 'post',
      path: `/admin/v1/workspaces/:ws/${path}`,
      summary: `Add addresses to the workspace email ${list} list`,
      auth: 'admin',
      body: AddEmails,
      responses: { 200: '`{added, emails}`', 404: 'unknown workspace' },
      handle: async (req, res, { pg }) => {
        const body = parseOr400(AddEmails, req.body)
        await workspaceOr404(pg, req.params.ws)
        const emails = [...new Set(body.emails)]
        const added = await addToEmailList(pg, req.params.ws, list, emails)
        res.json({ added, emails })
      },
    },
    {
      method: 'get',
      path: `/admin/v1/workspaces/:ws/${path}`,
      summary: `List the workspace email ${list} list, page by page`,
      auth: 'admin',
      query: Page,
      responses: { 200: '`{emails, next_after?}`', 404: 'unknown workspace' },
      handle: async (req, res, { pg }) => {
        const page = parseOr400(Page, req.query)
        await workspaceOr404(pg, req.params.ws)
        const entries = await listEmailList(pg, req.params.ws, list, page)
        const next = entries.length === page.limit ? entries[entries.length - 1].email : undefined
        res.json({ emails: entries, ...(next && { next_after: next }) })
      },
    },
  ]
}

/**
 * The operator's side of the spam and bounce lists (the public API only removes from them):
 * POST adds addresses, GET pages through a list in address order.
 */
export const adminEmailListRoutes: RouteFamily<ListDeps> = {
  routes: [listRoutes('email_spam_list', 'spam'), listRoutes('email_bounce_list', 'bounce')].flat(),
  // Like the rest of the operator API (admin.ts): any other /admin/v1 path asks for the admin token first.
  rest: { path: '/admin/v1', auth: 'admin' },
}
