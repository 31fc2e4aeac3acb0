import { pendingMigrations } from '../../../shared/db/migrate.js'
import { hasAdminToken } from '../middleware/auth.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'

/** Readiness asks each store this process talks to; its details are the operator's. */
type HealthDeps = Pick<ApiDeps, 'pg' | 'redis' | 'clickhouseReads' | 'adminToken'>

const liveness: ApiRoute<HealthDeps> = {
  method: 'get',
  path: '/healthz',
  summary: 'Liveness of the process',
  auth: 'none',
  responses: { 200: '`{status: "ok"}`' },
  handle: (_req, res) => {
    res.json({ status: 'ok' })
  },
}

const readiness: ApiRoute<HealthDeps> = {
  method: 'get',
  path: '/readyz',
  summary:
    'Readiness: Postgres (with migrations current), Redis and ClickHouse reachable from this process (the embedded engine through the worker holding it). `checks` only with `Authorization: Bearer <ADMIN_TOKEN>`',
  auth: 'none',
  responses: {
    200: '`{status: "ready"}`; with the admin token also `checks`: each `ok`, ClickHouse\'s saying how it is reached',
    503: '`{status: "not ready"}`; with the admin token also `checks` naming what is not ready',
  },
  handle: async (req, res, deps) => {
    const checks: Record<string, string> = {}
    await Promise.all([
      deps.pg
        .query('SELECT 1')
        .then(() => pendingMigrations(deps.pg))
        .then((p) => (checks.postgres = p.length ? `migrations pending: ${p.join(', ')}` : 'ok'))
        .catch((e) => (checks.postgres = (e as Error).message)),
      deps.redis
        .ping()
        .then(() => (checks.redis = 'ok'))
        .catch((e) => (checks.redis = (e as Error).message)),
      deps.clickhouseReads
        .check()
        .then((how) => (checks.clickhouse = how))
        .catch((e) => (checks.clickhouse = (e as Error).message)),
    ])
    const ready = Object.values(checks).every((v) => v.startsWith('ok'))
    // Anyone may probe; only the operator learns which process holds what on which host, or a store's error.
    const status = ready ? 'ready' : 'not ready'
    res.status(ready ? 200 : 503).json(hasAdminToken(req, deps.adminToken) ? { status, checks } : { status })
  },
}

/** Liveness of the process, and readiness of everything it depends on. */
export const healthRoutes: RouteFamily<HealthDeps> = { routes: [liveness, readiness] }
