import { createHmac } from 'node:crypto'
import { createBullBoard } from '@bull-board/api'
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter'
import { ExpressAdapter } from '@bull-board/express'
import { Router, type NextFunction, type Request, type Response } from 'express'
import { ApiError } from '../../../shared/errors.js'
import { queueFamily } from '../../../shared/metrics.js'
import type { QueueRegistry } from '../../../shared/queue/queues.js'
import { secretsEqual } from '../../../shared/secrets.js'
import { bearerToken } from '../middleware/auth.js'
import type { ApiDeps } from '../deps.js'

const DASHBOARD_PATH = '/admin/queues'
export const SESSION_COOKIE = 'uds_queue_dashboard'
const SESSION_MS = 12 * 3600 * 1000

/**
 * The cookie holds an expiry and its HMAC under the admin token, never the token itself; a new
 * admin token ends every session.
 */
function sessionValue(adminToken: string, expiresAt: number): string {
  const mac = createHmac('sha256', adminToken).update(`queue-dashboard/v1:${expiresAt}`).digest('base64url')
  return `${expiresAt}.${mac}`
}

function sessionValid(adminToken: string, cookie: string | undefined, now: number): boolean {
  if (!cookie) return false
  const expiresAt = Number(cookie.split('.')[0])
  if (!Number.isSafeInteger(expiresAt) || expiresAt <= now) return false
  return secretsEqual(cookie, sessionValue(adminToken, expiresAt))
}

function cookieOf(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=')
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}

/** The same URL without `?token=`, so the token leaves the address bar and the browser history. */
function withoutToken(originalUrl: string): string {
  const url = new URL(originalUrl, 'http://local')
  url.searchParams.delete('token')
  return url.pathname + url.search
}

/**
 * The admin token as a bearer header (scripts), or once as `?token=` from a browser, which then
 * gets an HttpOnly, SameSite=Strict session cookie scoped to the dashboard. All comparisons are
 * in constant time.
 */
function dashboardAuth(adminToken: string, secureCookie: boolean) {
  return (req: Request, res: Response, next: NextFunction) => {
    const bearer = bearerToken(req)
    if (bearer && secretsEqual(bearer, adminToken)) return next()
    if (sessionValid(adminToken, cookieOf(req, SESSION_COOKIE), Date.now())) return next()
    const given = typeof req.query.token === 'string' ? req.query.token : undefined
    if (given && secretsEqual(given, adminToken)) {
      const expiresAt = Date.now() + SESSION_MS
      res.cookie(SESSION_COOKIE, sessionValue(adminToken, expiresAt), {
        httpOnly: true,
        sameSite: 'strict',
        secure: secureCookie,
        path: DASHBOARD_PATH,
        expires: new Date(expiresAt),
      })
      return res.redirect(303, withoutToken(req.originalUrl))
    }
    next(new ApiError(401, 'unauthorized', `open ${DASHBOARD_PATH}?token=<ADMIN_TOKEN> once, or send Authorization: Bearer <ADMIN_TOKEN>`))
  }
}

/** Track partitions appear grouped under `track` in the menu, each named by its partition. */
function boardQueues(queues: QueueRegistry): BullMQAdapter[] {
  return queues.allNames().map((name) => {
    const { family, partition } = queueFamily(name)
    if (partition === undefined) return new BullMQAdapter(queues.get(name))
    return new BullMQAdapter(queues.get(name), {
      delimiter: '-',
      description: `partition ${partition} of ${queues.partitions} of the ${family} queue: /users/track work, one job at a time`,
    })
  })
}

/** Bull Board at /admin/queues: every queue and track partition, with its retry and clean actions. */
export function queueDashboardRoutes(deps: Pick<ApiDeps, 'queues' | 'adminToken' | 'config'>): Router {
  const serverAdapter = new ExpressAdapter()
  serverAdapter.setBasePath(DASHBOARD_PATH)
  createBullBoard({
    queues: boardQueues(deps.queues),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'userdata queues' } },
  })
  const r = Router()
  r.use(DASHBOARD_PATH, dashboardAuth(deps.adminToken, deps.config.PUBLIC_URL.startsWith('https:')), serverAdapter.getRouter())
  return r
}
