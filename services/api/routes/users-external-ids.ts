import type { Response } from 'express'
import { z } from 'zod'
import type { ObjectError } from '../../../shared/domain/object-error.js'
import { badRequest } from '../../../shared/errors.js'
import type { RemoveExternalIdOperation, RenameExternalIdOperation } from '../../../shared/queue/identity-jobs.js'
import type { RequestProgress } from '../../../shared/queue/request-tracker.js'
import type { Config } from '../../../shared/config.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'
import { parseOr400 } from '../validation.js'
import { ExternalId, submitOperations, type IdentityDeps } from './users-identity.js'

/** Renames and removals per request, as the reference allows. */
export const MAX_EXTERNAL_ID_CHANGES = 50

export const RenameBody = z
  .object({
    external_id_renames: z
      .array(z.object({ current_external_id: ExternalId, new_external_id: ExternalId }).strict())
      .min(1, 'must hold at least one external ID rename object')
      .max(MAX_EXTERNAL_ID_CHANGES, `must hold at most ${MAX_EXTERNAL_ID_CHANGES} external ID rename objects per request`),
  })
  .strict()

export const RemoveBody = z
  .object({
    external_ids: z
      .array(ExternalId)
      .min(1, 'must hold at least one external id')
      .max(MAX_EXTERNAL_ID_CHANGES, `must hold at most ${MAX_EXTERNAL_ID_CHANGES} external ids per request`),
  })
  .strict()

type ExternalIdDeps = IdentityDeps & Pick<ApiDeps, 'tracker'> & { config: Pick<Config, 'SYNC_WAIT_MS'> }

/**
 * Queues the operations on the identity queue (in order with merges, identifies and earlier track
 * work, exactly once), then waits for them to apply, since the answer lists what succeeded. Past
 * SYNC_WAIT_MS it answers 202 with `status: "queued"`: the work still applies, GET /requests/{id}
 * tells when.
 */
async function applyAndWait(
  deps: ExternalIdDeps,
  res: Response,
  operations: (RenameExternalIdOperation | RemoveExternalIdOperation)[],
): Promise<RequestProgress | undefined> {
  const locals = { workspaceId: res.locals.auth!.workspaceId, requestId: res.locals.requestId! }
  await submitOperations(deps, locals, operations)
  return deps.tracker.waitUntilFinished(locals.requestId, locals.workspaceId, deps.config.SYNC_WAIT_MS)
}

/** The reference's minor errors: one `[index, message]` pair per element that changed nothing. */
function minorErrors(progress: RequestProgress): { byIndex: Set<number>; list: [number, string][] } {
  const errors = (progress.errors ?? []) as ObjectError<string>[]
  return { byIndex: new Set(errors.map((e) => e.index)), list: errors.map((e) => [e.index, e.message]) }
}

const rename: ApiRoute<ExternalIdDeps> = {
  method: 'post',
  path: '/users/external_ids/rename',
  summary: "Rename users' external ids; each old id stays a deprecated id of its user until removed",
  auth: 'api_key',
  permission: 'users.external_ids.rename',
  write: true,
  body: RenameBody,
  responses: {
    201: '`{message: "success", external_ids, rename_errors}`: the current ids renamed, and `[index, message]` for each rename that changed nothing',
    202: '`{message: "success", status: "queued", external_ids: [], rename_errors: []}`: not applied within SYNC_WAIT_MS; it still applies',
  },
  handle: async (req, res, deps) => {
    const body = parseOr400(RenameBody, req.body ?? {})
    const operations = body.external_id_renames.map((r, index): RenameExternalIdOperation => {
      if (r.current_external_id === r.new_external_id) throw badRequest(`external_id_renames.${index}.new_external_id: must differ from current_external_id`)
      return { type: 'rename_external_id', index, currentExternalId: r.current_external_id, newExternalId: r.new_external_id }
    })
    if (await deps.workspaces.anyBlocked(res.locals.auth!.workspaceId, operations.map((op) => op.newExternalId))) {
      throw badRequest('provided external_id is blacklisted and disallowed')
    }
    const progress = await applyAndWait(deps, res, operations)
    if (!progress) return void res.status(202).json({ message: 'success', status: 'queued', external_ids: [], rename_errors: [] })
    const { byIndex, list } = minorErrors(progress)
    const renamed = operations.filter((op) => !byIndex.has(op.index)).map((op) => op.currentExternalId)
    res.status(201).json({ message: 'success', external_ids: renamed, rename_errors: list })
  },
}

const remove: ApiRoute<ExternalIdDeps> = {
  method: 'post',
  path: '/users/external_ids/remove',
  summary: 'Remove deprecated external ids (a primary id cannot be removed)',
  auth: 'api_key',
  permission: 'users.external_ids.remove',
  write: true,
  body: RemoveBody,
  responses: {
    201: '`{message: "success", removed_ids, removal_errors}`: `[index, message]` for each id not removed',
    202: '`{message: "success", status: "queued", removed_ids: [], removal_errors: []}`: not applied within SYNC_WAIT_MS; it still applies',
  },
  handle: async (req, res, deps) => {
    const body = parseOr400(RemoveBody, req.body ?? {})
    // An id repeated in one request is removed once, at its first place.
    const first = new Map<string, number>()
    body.external_ids.forEach((id, index) => first.has(id) || first.set(id, index))
    const operations = [...first].map(([externalId, index]): RemoveExternalIdOperation => ({ type: 'remove_external_id', index, externalId }))
    const progress = await applyAndWait(deps, res, operations)
    if (!progress) return void res.status(202).json({ message: 'success', status: 'queued', removed_ids: [], removal_errors: [] })
    const { byIndex, list } = minorErrors(progress)
    const removed = [...new Set(operations.filter((op) => !byIndex.has(op.index)).map((op) => op.externalId))]
    res.status(201).json({ message: 'success', removed_ids: removed, removal_errors: list })
  },
}

/** POST /users/external_ids/rename and /users/external_ids/remove (docs/identity.md). */
export const usersExternalIdRoutes: RouteFamily<ExternalIdDeps> = { routes: [rename, remove] }
