import { notFound } from '../../../shared/errors.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'

/** GET /requests/{id}: progress of queued work, for any key of the same workspace (no permission needed). */
const requestProgress: ApiRoute<Pick<ApiDeps, 'tracker'>> = {
  method: 'get',
  path: '/requests/:id',
  summary: 'Progress of queued work, by the X-Request-Id a write answered',
  auth: 'api_key',
  responses: { 200: '`{request_id, status: "queued" | "processing" | "done" | "failed", errors?}`', 404: 'unknown request id' },
  handle: async (req, res, deps) => {
    const progress = await deps.tracker.get(String(req.params.id), res.locals.auth!.workspaceId)
    if (!progress) throw notFound('unknown request id')
    res.json(progress)
  },
}

export const requestRoutes: RouteFamily<Pick<ApiDeps, 'tracker'>> = { routes: [requestProgress] }
