import express from 'express'
import { httpLogger } from '../../shared/logger.js'
import type { ApiOperation, RouteFamily } from './api-operation.js'
import { authenticateApiKey, authenticateScim, ApiKeyAuthenticator, requireAdminToken } from './middleware/auth.js'
import { errorHandler, notFoundHandler, requireJson } from './middleware/errors.js'
import { idempotency } from './middleware/idempotency.js'
import { guardJsonBody } from './middleware/json-guard.js'
import { rateLimitApi, rateLimitScim } from './middleware/rate-limit.js'
import { assignRequestId } from './middleware/request-id.js'
import type { ApiDeps } from './deps.js'
import { noteUnicodeEscapes } from './validation.js'
import { mountFamily, type AuthMiddleware } from './mount.js'
import { buildOpenApiDocument } from './openapi.js'
import { adminRoutes } from './routes/admin.js'
import { adminEmailListRoutes } from './routes/admin-email-lists.js'
import { adminPartitionRoutes } from './routes/admin-partitions.js'
import { docsRoutes, type DocsDeps } from './routes/docs.js'
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
import { usersAliasRoutes } from './routes/users-aliases.js'
import { usersExternalIdRoutes } from './routes/users-external-ids.js'
import { usersIdentityRoutes } from './routes/users-identity.js'
import { usersTrackRoutes } from './routes/users-track.js'
import { usersTrackSyncRoutes } from './routes/users-track-sync.js'

export const BODY_LIMIT = '4mb'

/** What the route families are given: the API's dependencies, and the OpenAPI document for the docs family. */
type RouteDeps = ApiDeps & DocsDeps

/**
 * Every route family, in the order each request walks them: the one taking by far the most
 * requests comes first. The OpenAPI document is built from the same list.
 */
const routeFamilies: RouteFamily<RouteDeps>[] = [
  usersTrackRoutes,
  healthRoutes,
  metricsRoutes,
  docsRoutes,
  queueDashboardRoutes,
  adminPartitionRoutes,
  adminRoutes,
  adminEmailListRoutes,
  requestRoutes,
  usersExportIdsRoutes,
  usersIdentityRoutes,
  usersAliasRoutes,
  usersExternalIdRoutes,
  usersTrackSyncRoutes,
  usersExportRoutes,
  exportDownloadRoutes,
  subscriptionRoutes,
  emailRoutes,
  scimUserRoutes,
]

/** Every route the API serves, as documented. */
export function apiOperations(): ApiOperation[] {
  return routeFamilies.flatMap((f) => f.routes)
}

/** Middleware order: request log, metrics, JSON parsing, one router per route family (each route behind its auth), 404, errors. */
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
  app.use(express.json({ limit: BODY_LIMIT, type: ['application/json', 'application/scim+json'], verify: noteUnicodeEscapes }))
  app.use(guardJsonBody)

  const authenticator = new ApiKeyAuthenticator(deps.pg, deps.operator)
  const onLimited = (bucket: string) => deps.metrics.rateLimited.inc({ bucket })
  const auth: AuthMiddleware = {
    apiKey: authenticateApiKey(authenticator),
    rateLimit: rateLimitApi({ limits: deps.rateLimits, workspaces: deps.workspaces, authenticator, onLimited }),
    write: [assignRequestId, idempotency(deps.redis, deps.config.QUEUE_PREFIX)],
    admin: requireAdminToken(deps.adminToken),
    scim: [authenticateScim(deps.pg), rateLimitScim(deps.rateLimits, onLimited)],
  }
  // /metrics reports queue depths and the track backlog.
  deps.metrics.watchQueues(deps.queues)
  let document: object | undefined
  const routeDeps: RouteDeps = {
    ...deps,
    openApiDocument: () => (document ??= buildOpenApiDocument({ publicUrl: deps.config.PUBLIC_URL, operations: apiOperations() })),
  }
  for (const family of routeFamilies) app.use(mountFamily(family, routeDeps, auth))

  app.use(notFoundHandler)
  app.use(errorHandler(deps.logger))
  return app
}
