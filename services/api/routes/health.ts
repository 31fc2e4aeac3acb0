import { Router } from 'express'
import { pendingMigrations } from '../../../shared/db/migrate.js'
import type { ApiDeps } from '../deps.js'
import type { ApiOperation } from '../api-operation.js'

export const openapi: ApiOperation[] = [
  { method: 'get', path: '/healthz', summary: 'Liveness of the process', auth: 'none', responses: { 200: '`{status: "ok"}`' } },
  {
    method: 'get',
    path: '/readyz',
    summary: 'Readiness: Postgres (with migrations current), Redis and ClickHouse reachable',
    auth: 'none',
    responses: { 200: '`{status: "ready", checks}`', 503: '`{status: "not ready", checks}` naming what is not ready' },
  },
]

/** Liveness of the process, and readiness of everything it depends on. */
export function healthRoutes(deps: ApiDeps): Router {
  const r = Router()
  r.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' })
  })
  r.get('/readyz', async (_req, res) => {
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
      deps.clickhouse
        ? deps.clickhouse.client
            .ping()
            .then((p) => (checks.clickhouse = p.success ? 'ok' : 'unreachable'))
            .catch((e) => (checks.clickhouse = (e as Error).message))
        : Promise.resolve((checks.clickhouse = 'not used by this process')),
    ])
    const ready = Object.values(checks).every((v) => v === 'ok' || v === 'not used by this process')
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not ready', checks })
  })
  return r
}
