import { pendingMigrations } from '../../../shared/db/migrate.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'

/** Readiness asks each store this process talks to. */
type HealthDeps = Pick<ApiDeps, 'pg' | 'redis' | 'clickhouseReads'>

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
  summary: 'Readiness: Postgres (with migrations current), Redis and ClickHouse reachable from this process (the embedded engine through the worker holding it)',
  auth: 'none',
  responses: { 200: '`{status: "ready", checks}`: each check `ok`, ClickHouse\'s saying how it is reached', 503: '`{status: "not ready", checks}` naming what is not ready' },
  handle: async (_req, res, deps) => {
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
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not ready', checks })
  },
}

/** Liveness of the process, and readiness of everything it depends on. */
export const healthRoutes: RouteFamily<HealthDeps> = { routes: [liveness, readiness] }
