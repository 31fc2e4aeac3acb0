import { z } from 'zod'
import { conflict } from '../../../shared/errors.js'
import type { TrackLayout } from '../../../shared/queue/track-layout.js'
import type { ApiDeps } from '../deps.js'
import { withAuth, type RouteFamily } from '../api-operation.js'
import { parseOr400 } from '../validation.js'

/** As TRACK_PARTITIONS: at least one queue, at most 256. */
export const TrackPartitionsBody = z.object({ partitions: z.number().int().min(1).max(256) }).strict()

type PartitionDeps = Pick<ApiDeps, 'queues' | 'tracker'>

/** The layout as an operator reads it: the partitions in force and, during a change, what the old layout still owes. */
async function described(deps: PartitionDeps, layout: TrackLayout) {
  return {
    partitions: layout.partitions,
    generation: layout.generation,
    changing: layout.previous
      ? { from_partitions: layout.previous.partitions, jobs_left: await deps.tracker.openJobs(layout.previous.generation) }
      : null,
  }
}

/**
 * The track partitions, changed online (shared/queue/track-layout.ts): requests accepted from the
 * change on go to the new partitions, which apply once the old ones have drained, so every user's
 * order holds across it and nothing is lost, doubled or refused.
 */
export const adminPartitionRoutes: RouteFamily<PartitionDeps> = {
  routes: withAuth<PartitionDeps>('admin', [
    {
      method: 'get',
      path: '/admin/v1/track_partitions',
      summary: 'The track partitions in force, and a change still draining',
      responses: { 200: '`{partitions, generation, changing: {from_partitions, jobs_left} | null}`' },
      handle: async (_req, res, deps) => {
        res.json(await described(deps, await deps.queues.layouts.refresh()))
      },
    },
    {
      method: 'put',
      path: '/admin/v1/track_partitions',
      summary: 'Change the number of track partitions, under load (the new ones apply once the old have drained)',
      body: TrackPartitionsBody,
      responses: { 200: '`{partitions, generation, changing}`', 409: 'the previous change is still draining' },
      handle: async (req, res, deps) => {
        const body = parseOr400(TrackPartitionsBody, req.body)
        const layouts = deps.queues.layouts
        const now = await layouts.refresh()
        if (now.partitions === body.partitions && !now.previous) return void res.json(await described(deps, now))
        const changed = await layouts.change(body.partitions)
        if (!changed) throw conflict(`the change to ${now.partitions} partitions is still draining (${await deps.tracker.openJobs(now.previous!.generation)} jobs left): try again once it is done`)
        res.json(await described(deps, changed))
      },
    },
  ]),
}
