import { createHmac } from 'node:crypto'
import { createBullBoard } from '@bull-board/api'
import type { Queue } from 'bullmq'
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter'
import { ExpressAdapter } from '@bull-board/express'
import type { NextFunction, Request, RequestHandler, Response } from 'express'
import { ApiError } from '../../../shared/errors.js'
import type { Config } from '../../../shared/config.js'
import { queueFamily } from '../../../shared/metrics.js'
import { queueLagSeconds, trackLagSeconds } from '../../../shared/queue/lag.js'
import type { QueueRegistry } from '../../../shared/queue/queues.js'
import type { RequestTracker } from '../../../shared/queue/request-tracker.js'
import { secretsEqual } from '../../../shared/secrets.js'
import { hasAdminToken } from '../middleware/auth.js'
import { pageHeaders, requireSameOrigin } from '../middleware/page-guards.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'

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
    if (hasAdminToken(req, adminToken)) return next()
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

const BACKLOG_PATH = '/backlog'

/**
 * A track partition on the board: its description shows the partition's lag and the track
 * backlog, refreshed each time the board reads the queue's counts (every UI poll).
 */
class TrackPartitionAdapter extends BullMQAdapter {
  constructor(
    private readonly partitionQueue: Queue,
    /** `bound`: TRACK_BACKLOG_MAX_OBJECTS. */
    private readonly board: { about: string; queues: QueueRegistry; tracker: RequestTracker; bound: number },
  ) {
    super(partitionQueue, { delimiter: '-', description: board.about })
    this.live = board.about
  }

  private live: string

  override async getJobCounts() {
    const [counts, lag, backlog] = await Promise.all([
      super.getJobCounts(),
      queueLagSeconds(this.partitionQueue, this.board.queues.connection).catch(() => undefined),
      this.board.tracker.backlog().catch(() => undefined),
    ])
    const live = [
      lag === undefined ? undefined : `lag ${lag.toFixed(1)} s (oldest job not yet applied)`,
      backlog === undefined ? undefined : `track backlog ${backlog.all.toLocaleString('en')} of ${this.board.bound.toLocaleString('en')} objects (all partitions; per workspace: ${DASHBOARD_PATH}${BACKLOG_PATH})`,
    ].filter(Boolean)
    this.live = [this.board.about, ...live].join(' · ')
    return counts
  }

  override getDescription(): string {
    return this.live
  }
}

/** Track partitions appear grouped under `track` in the menu, each named by its partition. */
function boardQueues(deps: DashboardDeps): BullMQAdapter[] {
  const { queues } = deps
  return queues.allNames().map((name) => {
    const { family, partition } = queueFamily(name)
    if (partition === undefined) return new BullMQAdapter(queues.get(name))
    const about = `partition ${partition} of the ${family} queue (${queues.layouts.current().partitions} partitions): /users/track work, applied in order`
    return new TrackPartitionAdapter(queues.get(name), { about, queues, tracker: deps.tracker, bound: deps.config.TRACK_BACKLOG_MAX_OBJECTS })
  })
}

/** The backlog page linked from the board: bounds, objects per workspace (largest first), lag per partition. */
async function backlogReport(deps: DashboardDeps) {
  const [backlog, lag] = await Promise.all([deps.tracker.backlog(), trackLagSeconds(deps.queues)])
  return {
    track_backlog: {
      objects: backlog.all,
      limit: deps.config.TRACK_BACKLOG_MAX_OBJECTS,
      per_workspace_limit: deps.config.TRACK_BACKLOG_MAX_OBJECTS_PER_WORKSPACE,
      workspaces: [...backlog.byWorkspace].sort((a, b) => b[1] - a[1]).map(([workspace_id, objects]) => ({ workspace_id, objects })),
    },
    lag_seconds: Object.fromEntries([...lag].map(([queue, seconds]) => [queue, Number(seconds.toFixed(3))])),
  }
}

type DashboardDeps = Pick<ApiDeps, 'queues' | 'tracker' | 'adminToken'> & { config: Pick<Config, 'PUBLIC_URL' | 'TRACK_BACKLOG_MAX_OBJECTS' | 'TRACK_BACKLOG_MAX_OBJECTS_PER_WORKSPACE'> }

const backlogPage: ApiRoute<DashboardDeps> = {
  method: 'get',
  path: `${DASHBOARD_PATH}${BACKLOG_PATH}`,
  summary: 'Track backlog (objects accepted, not yet applied: in all, bounds, per workspace) and lag per track partition; linked from the queue dashboard',
  auth: 'admin',
  responses: {
    200: '`{track_backlog: {objects, limit, per_workspace_limit, workspaces: [{workspace_id, objects}]}, lag_seconds: {"track-0": s, ...}}`',
  },
  handle: async (_req, res, deps) => {
    res.json(await backlogReport(deps))
  },
}

/**
 * Bull Board: every queue and track partition, with its retry and clean actions; a header link
 * opens the backlog page. Its pages carry the security headers, and its writes (retry, clean,
 * pause... all POST, PUT or DELETE) must come from PUBLIC_URL's origin, which holds even where a
 * browser would send the SameSite=Strict session cookie cross-site.
 */
function board(deps: DashboardDeps): RequestHandler[] {
  const serverAdapter = new ExpressAdapter()
  serverAdapter.setBasePath(DASHBOARD_PATH)
  createBullBoard({
    queues: boardQueues(deps),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'userdata queues', miscLinks: [{ text: 'Track backlog and lag (JSON)', url: `${DASHBOARD_PATH}${BACKLOG_PATH}` }] } },
  })
  return [pageHeaders(), requireSameOrigin(deps.config.PUBLIC_URL, (req) => hasAdminToken(req, deps.adminToken)), serverAdapter.getRouter()]
}

/**
 * The queue dashboard at /admin/queues and its backlog page, behind the admin token or the
 * session cookie it hands a browser.
 */
export const queueDashboardRoutes: RouteFamily<DashboardDeps> = {
  routes: [backlogPage],
  ownAuth: (deps) => dashboardAuth(deps.adminToken, deps.config.PUBLIC_URL.startsWith('https:')),
  rest: { path: DASHBOARD_PATH, auth: 'admin', handler: board },
}
