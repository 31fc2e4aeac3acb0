import express, { type Router } from 'express'
import { httpLogger } from '../../shared/logger.js'
import { authenticateApiKey, ApiKeyAuthenticator, requirePermission } from './middleware/auth.js'
import { errorHandler, notFoundHandler, requireJson } from './middleware/errors.js'
import { idempotency } from './middleware/idempotency.js'
import { guardJsonBody } from './middleware/json-guard.js'
import { rateLimitApi } from './middleware/rate-limit.js'
import { assignRequestId } from './middleware/request-id.js'
import type { ApiDeps, Guard } from './deps.js'
import { apiOperations, buildOpenApiDocument } from './openapi.js'
import { adminRoutes } from './routes/admin.js'
import { adminEmailListRoutes } from './routes/admin-email-lists.js'
import { docsRoutes } from './routes/docs.js'
import { exportDownloadRoutes } from './routes/export-download.js'
import { emailRoutes } from './routes/email.js'
import { healthRoutes } from './routes/health.js'
import { metricsRoutes } from './routes/metrics.js'
import { queueDashboardRoutes } from './routes/queue-dashboard.js'
import { requestRoutes } from './routes/requests.js'
import { scimUserRoutes } from './routes/scim-users.js'
import { subscriptionRoutes } from './routes/subscriptions.js'
import { usersExportIdsRoutes } from './routes/users-export-ids.js'
import { usersExportRoutes } from './routes/users-export.js'
import { usersIdentityRoutes } from './routes/users-identity.js'
import { usersTrackRoutes } from './routes/users-track.js'

export const BODY_LIMIT = '4mb'

/** Middleware order: request log, metrics, JSON parsing, routers (each applies its own auth), 404, errors. */
export function createApp(deps: ApiDeps): express.Express {
  const app = express()
  app.disable('x-powered-by')
  app.set('query parser', 'extended')

  app.use(httpLogger(deps.logger))

  app.use((req, res, next) => {
    const end = deps.metrics.httpDuration.startTimer()
    res.on('finish', () => {
      // The route pattern, never the raw path, so labels stay few and free of user data.
      const labels = { method: req.method, route: req.route ? `${req.baseUrl}${req.route.path}` : 'unmatched' }
      end(labels)
      deps.metrics.httpRequests.inc({ ...labels, status: String(res.statusCode) })
    })
    next()
  })
  app.use(requireJson)
  app.use(express.json({ limit: BODY_LIMIT, type: ['application/json', 'application/scim+json'] }))
  app.use(guardJsonBody)

  const authenticator = new ApiKeyAuthenticator(deps.pg, deps.operator)
  const authenticate = authenticateApiKey(authenticator)
  const limit = rateLimitApi({
    limits: deps.rateLimits,
    workspaces: deps.workspaces,
    authenticator,
    onLimited: (bucket) => deps.metrics.rateLimited.inc({ bucket }),
  })
  const idem = idempotency(deps.redis, deps.config.QUEUE_PREFIX)
  const guard: Guard = (permission, opts = {}) => [
    authenticate,
    limit,
    requirePermission(permission),
    ...(opts.write ? [assignRequestId, idem] : []),
  ]

  // Each request walks the routers in turn: the one taking by far the most requests comes first.
  const routers: Router[] = [
    usersTrackRoutes(deps, guard),
    healthRoutes(deps),
    metricsRoutes(deps),
    docsRoutes(() => buildOpenApiDocument({ publicUrl: deps.config.PUBLIC_URL, operations: apiOperations() })),
    queueDashboardRoutes(deps),
    adminRoutes(deps),
    adminEmailListRoutes(deps),
    requestRoutes(deps, authenticate, limit),
    usersExportIdsRoutes(deps, guard),
    usersIdentityRoutes(deps, guard),
    usersExportRoutes(deps, guard),
    exportDownloadRoutes(deps),
    subscriptionRoutes(deps, guard),
    emailRoutes(deps, guard),
    scimUserRoutes(deps),
  ]
  for (const r of routers) app.use(r)

  app.use(notFoundHandler)
  app.use(errorHandler(deps.logger))
  return app
}
