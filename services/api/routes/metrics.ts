import { once } from 'node:events'
import type { Server } from 'node:http'
import express, { type Response } from 'express'
import type { Metrics } from '../../../shared/metrics.js'
import type { QueueRegistry } from '../../../shared/queue/queues.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'

async function sendMetrics(metrics: Metrics, res: Response): Promise<void> {
  const body = await metrics.registry.metrics()
  res.type(metrics.registry.contentType).send(body)
}

/**
 * GET /metrics on the API port takes the admin token: the API port is the one exposed to
 * callers. Unauthenticated scrapes go to the METRICS_PORT listener, meant for an internal network.
 */
const metricsRoute: ApiRoute<Pick<ApiDeps, 'metrics'>> = {
  method: 'get',
  path: '/metrics',
  summary: 'Prometheus metrics of this process (HTTP, jobs, queue depths, exports, rate limits)',
  auth: 'admin',
  responses: { 200: 'Prometheus text exposition format' },
  handle: (_req, res, deps) => sendMetrics(deps.metrics, res),
}

export const metricsRoutes: RouteFamily<Pick<ApiDeps, 'metrics'>> = { routes: [metricsRoute] }

interface MetricsListenerOptions {
  metrics: Metrics
  queues: QueueRegistry
  host: string
  port: number
}

/**
 * A listener of its own serving GET /metrics without auth, so worker-only processes (which have
 * no HTTP server) can be scraped too. It binds HOST, like the API.
 */
export async function startMetricsListener(opts: MetricsListenerOptions): Promise<Server> {
  opts.metrics.watchQueues(opts.queues)
  const app = express()
  app.disable('x-powered-by')
  app.get('/metrics', (_req, res) => sendMetrics(opts.metrics, res))
  const server = app.listen(opts.port, opts.host)
  await Promise.race([once(server, 'listening'), once(server, 'error').then(([e]) => Promise.reject(e))])
  return server
}
