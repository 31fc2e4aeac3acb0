import { Router, type RequestHandler } from 'express'
import { notFound } from '../../../shared/errors.js'
import type { ApiDeps } from '../deps.js'
import type { ApiOperation } from '../api-operation.js'

export const openapi: ApiOperation[] = [
  {
    method: 'get',
    path: '/requests/:id',
    summary: 'Progress of queued work, by the X-Request-Id a write answered',
    auth: 'api_key',
    responses: { 200: '`{request_id, status: "queued" | "processing" | "done" | "failed", errors?}`', 404: 'unknown request id' },
  },
]

/** GET /requests/{id}: progress of queued work, for any key of the same workspace. */
export function requestRoutes(deps: ApiDeps, authenticate: RequestHandler, limit: RequestHandler): Router {
  const r = Router()
  r.get('/requests/:id', authenticate, limit, async (req, res) => {
    const progress = await deps.tracker.get(String(req.params.id), res.locals.auth!.workspaceId)
    if (!progress) throw notFound('unknown request id')
    res.json(progress)
  })
  return r
}
