import { randomUUID } from 'node:crypto'
import type { Response } from 'express'
import { z } from 'zod'
import { createExport, failExport, type ExportRequest } from '../../../shared/db/repositories/export-repository.js'
import { getSegment } from '../../../shared/db/repositories/segment-repository.js'
import { getWorkspace } from '../../../shared/db/repositories/workspace-repository.js'
import type { Filter } from '../../../shared/domain/segment-filter.js'
import { filterLimitProblem } from '../../../shared/domain/segment-limits.js'
import { ExportableFields } from '../../../shared/domain/user-record.js'
import { ApiError, badRequest, conflict, notFound, UnavailableError } from '../../../shared/errors.js'
import { callbackUrlRefusal } from '../../../shared/net/callback-target.js'
import { submitRequest } from '../../../shared/queue/jobs.js'
import { downloadKey, downloadUrl } from '../../../shared/storage/download-link.js'
import { exportObjectPrefix } from '../../../shared/storage/export-layout.js'
import type { Config } from '../../../shared/config.js'
import type { ApiDeps } from '../deps.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'
import { parseOr400 } from '../validation.js'

/** interface.md 8: concurrent exports per company (a workspace here), segment and global control group alike. */
export const MAX_ACTIVE_EXPORTS = 100
const MAX_CUSTOM_ATTRIBUTES = 500

const CallbackEndpoint = z
  .url({ protocol: /^https?$/, error: 'must be an http or https URL' })
  .max(2000, 'must be at most 2000 characters')
const FieldsToExport = z
  .array(z.enum(ExportableFields, { error: (iss) => `unknown field ${JSON.stringify(iss.input)}; expected one of ${ExportableFields.join(', ')}` }), {
    error: (iss) => (iss.input === undefined ? 'is required: name the fields to export' : 'must be an array of field names'),
  })
  .min(1, 'is required: name at least one field to export')
const OutputFormat = z.enum(['zip', 'gzip'], { error: 'must be zip or gzip' }).default('zip')

export const SegmentExport = z
  .object({
    segment_id: z.string({ error: 'is required: the id of the segment to export' }).min(1, 'must not be empty'),
    callback_endpoint: CallbackEndpoint.optional(),
    fields_to_export: FieldsToExport,
    custom_attributes_to_export: z
      .array(z.string().min(1, 'must not be empty'), { error: 'must be an array of custom attribute names' })
      .max(MAX_CUSTOM_ATTRIBUTES, `may name at most ${MAX_CUSTOM_ATTRIBUTES} custom attributes`)
      .optional(),
    output_format: OutputFormat,
  })
  .strict()

export const GlobalControlGroupExport = z
  .object({ callback_endpoint: CallbackEndpoint.optional(), fields_to_export: FieldsToExport, output_format: OutputFormat })
  .strict()

const accepted = '`{message: "success", object_prefix, url?, export_id}`; `url` only without storage credentials'
const refused = {
  400: 'invalid input, or a `callback_endpoint` whose host is not a public address or does not resolve (docs/security.md): `message` names the field',
  404: 'unknown segment_id',
  409: 'a segment stored before the filter limits whose filter exceeds them (docs/exports.md)',
  429: 'an export of the segment is already queued or running, or the workspace has 100 queued or running',
  503: 'the host of `callback_endpoint` could not be resolved right now; `Retry-After` says when to ask again',
}

interface ExportOrder {
  kind: 'segment' | 'global_control_group'
  /** The segment id, or the workspace id for the global control group: the second part of the object prefix. */
  ownerId: string
  segmentId?: string
  request: Omit<ExportRequest, 'destination'>
}

/** Postgres for the export rows, the queues, what signs a download link, and whether callbacks may go to private addresses. */
type ExportDeps = Pick<ApiDeps, 'pg' | 'producer' | 'adminToken'> & { config: Pick<Config, 'PUBLIC_URL' | 'CALLBACK_ALLOW_PRIVATE'> }

/**
 * A callback the worker would refuse is refused now, with a 400 naming the field; the worker
 * checks again on the address it connects to, since a name may answer differently by then.
 */
async function refuseUnreachableCallback(config: ExportDeps['config'], endpoint: string | undefined): Promise<void> {
  if (endpoint === undefined) return
  let refusal: string | undefined
  try {
    refusal = await callbackUrlRefusal(endpoint, { allowPrivate: config.CALLBACK_ALLOW_PRIVATE })
  } catch {
    throw new UnavailableError('the host of callback_endpoint cannot be resolved right now; retry the request')
  }
  if (refusal) {
    const message = `callback_endpoint: ${refusal}`
    throw badRequest(message, { errors: [message] })
  }
}

/** Records the export, queues its run and answers with where the files will be. */
async function accept(deps: ExportDeps, res: Response, order: ExportOrder) {
  const workspaceId = res.locals.auth!.workspaceId
  const requestId = res.locals.requestId!
  const workspace = await getWorkspace(deps.pg, workspaceId)
  const destination = workspace?.export_storage ? 's3' : 'local'
  const id = randomUUID()
  const objectPrefix = exportObjectPrefix({ kind: order.kind, ownerId: order.ownerId, startedAt: new Date(), uuid: randomUUID() })
  const url = destination === 'local' ? downloadUrl(deps.config.PUBLIC_URL, downloadKey(deps.adminToken), id) : undefined
  const created = await createExport(deps.pg, {
    id,
    workspaceId,
    kind: order.kind,
    segmentId: order.segmentId,
    request: { ...order.request, destination },
    objectPrefix,
    url,
    maxActive: MAX_ACTIVE_EXPORTS,
  })
  if (!created.created) throw tooManyExports(created.reason, order.segmentId)
  try {
    await submitRequest(deps.producer, { workspaceId, requestId, jobs: [{ name: 'runExport', data: { workspaceId, requestId, exportId: id } }] })
  } catch (e) {
    // Not queued means never run: free the segment at once instead of leaving it "queued".
    await failExport(deps.pg, id, 'the export could not be queued')
    throw e
  }
  res.status(201).json({ message: 'success', object_prefix: objectPrefix, ...(url ? { url } : {}), export_id: id })
}

const segmentExport: ApiRoute<ExportDeps> = {
  method: 'post',
  path: '/users/export/segment',
  summary: 'Export the users of a segment (files in S3 or a download URL)',
  auth: 'api_key',
  permission: 'users.export.segment',
  write: true,
  body: SegmentExport,
  responses: { 201: accepted, ...refused },
  handle: async (req, res, deps) => {
    const body = parseOr400(SegmentExport, req.body)
    await refuseUnreachableCallback(deps.config, body.callback_endpoint)
    const segment = await getSegment(deps.pg, res.locals.auth!.workspaceId, body.segment_id)
    if (!segment) throw notFound(`unknown segment_id ${body.segment_id}`)
    const overLimit = filterLimitProblem(segment.filter as Filter)
    if (overLimit) throw conflict(`segment ${segment.id} cannot be exported: its filter ${overLimit}; create it anew within the limits`)
    const { segment_id: _id, ...request } = body
    await accept(deps, res, { kind: 'segment', ownerId: segment.id, segmentId: segment.id, request })
  },
}

const globalControlGroupExport: ApiRoute<ExportDeps> = {
  method: 'post',
  path: '/users/export/global_control_group',
  summary: 'Export the users of the global control group',
  auth: 'api_key',
  permission: 'users.export.global_control_group',
  write: true,
  body: GlobalControlGroupExport,
  responses: { 201: accepted, 400: refused[400], 429: refused[429], 503: refused[503] },
  handle: async (req, res, deps) => {
    const request = parseOr400(GlobalControlGroupExport, req.body)
    await refuseUnreachableCallback(deps.config, request.callback_endpoint)
    await accept(deps, res, { kind: 'global_control_group', ownerId: res.locals.auth!.workspaceId, request })
  },
}

/** POST /users/export/segment and /users/export/global_control_group (interface.md 4.5 and 4.6). */
export const usersExportRoutes: RouteFamily<ExportDeps> = { routes: [segmentExport, globalControlGroupExport] }

function tooManyExports(reason: 'segment_busy' | 'workspace_busy', segmentId?: string): ApiError {
  if (reason === 'segment_busy') {
    return new ApiError(429, 'export_running', `an export of segment ${segmentId} is already queued or running; retry when it is done`)
  }
  return new ApiError(
    429,
    'too_many_exports',
    `this workspace already has ${MAX_ACTIVE_EXPORTS} exports queued or running, the most allowed at once; retry when one is done`,
  )
}
