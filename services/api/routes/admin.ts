import { z } from 'zod'
import {
  createApiKey,
  createScimToken,
  revokeApiKey,
  revokeScimToken,
  setApiKeyPermissions,
} from '../../../shared/db/repositories/credential-repository.js'
import { getExport } from '../../../shared/db/repositories/export-repository.js'
import { createSegment, getSegment } from '../../../shared/db/repositories/segment-repository.js'
import { createSubscriptionGroup } from '../../../shared/db/repositories/subscription-group-repository.js'
import {
  createWorkspace,
  getWorkspace,
  replaceBlockedExternalIds,
  setExportStorage,
  setGlobalControlPercent,
  setRateLimits,
} from '../../../shared/db/repositories/workspace-repository.js'
import { Permissions } from '../../../shared/domain/permissions.js'
import { RateLimitedPaths, bucketFor, DefaultBuckets } from '../../../shared/domain/rate-limits.js'
import type { Filter } from '../../../shared/domain/segment-filter.js'
import { BoundedFilter, filterLimitProblem } from '../../../shared/domain/segment-limits.js'
import { conflict, notFound } from '../../../shared/errors.js'
import type { ApiDeps } from '../deps.js'
import { withAuth, type RouteFamily } from '../api-operation.js'
import { parseOr400 } from '../validation.js'

const Name = z.string().trim().min(1).max(200)

export const CreateWorkspace = z.object({ name: Name }).strict()
const PermissionList = z.array(z.enum(Permissions)).min(1)
export const CreateApiKey = z.object({ name: Name, permissions: PermissionList }).strict()
export const ApiKeyPermissions = z.object({ permissions: PermissionList }).strict()
export const CreateScimToken = z.object({ request_origin: z.string().trim().min(1).max(500) }).strict()
export const CreateSubscriptionGroup = z.object({ name: Name, channel: z.enum(['email', 'sms', 'whatsapp']) }).strict()
export const CreateSegment = z.object({ name: Name, filter: BoundedFilter }).strict()
export const GlobalControlGroup = z.object({ percent: z.number().min(0).max(100) }).strict()
export const ExportStorageBody = z
  .object({
    bucket: z.string().regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'must be a DNS-style bucket name'),
    region: z.string().min(1),
    endpoint: z.string().url().optional(),
    force_path_style: z.boolean().optional(),
    access_key_id: z.string().min(1),
    secret_access_key: z.string().min(1),
  })
  .strict()
const Limit = z.object({ limit: z.number().int().min(1).max(1e9), window_seconds: z.number().int().min(1).max(31 * 86400) }).strict()
export const RateLimitsBody = z
  .object({
    default_per_hour: z.number().int().min(1).max(1e9).optional(),
    endpoints: z.partialRecord(z.enum(RateLimitedPaths as [string, ...string[]]), Limit).optional(),
  })
  .strict()
// External ids are at most 512 characters wherever they are accepted (and an index row holds no more than 2704 bytes).
export const BlockedIds = z.object({ external_ids: z.array(z.string().min(1).max(512)).max(100_000) }).strict()

/** What the operator API uses: Postgres, the announcement of operator changes, segment sizes. */
type AdminDeps = Pick<ApiDeps, 'pg' | 'operator' | 'clickhouseReads'>

async function workspaceOr404(db: AdminDeps['pg'], id: string) {
  const ws = await getWorkspace(db, id)
  if (!ws) throw notFound(`unknown workspace ${id}`)
  return ws
}

/** The limits in force for a workspace, bucket by bucket. */
function limitsInForce(settings: z.infer<typeof RateLimitsBody>) {
  return Object.fromEntries(
    Object.entries(DefaultBuckets).map(([name, b]) => {
      const inForce = bucketFor(b.paths[0] ?? '/', settings)
      return [name, { paths: b.paths, limit: inForce.limit, window_seconds: inForce.windowSeconds }]
    }),
  )
}

/**
 * The operator API of operator.md section 2. A change to anything API processes cache (keys,
 * workspace settings, blocked ids) is announced after its commit and before the answer, so it holds
 * for the next request to any process (shared/operator-changes.ts). SCIM tokens, segments and
 * subscription groups are read from Postgres where they are used: nothing to announce.
 */
export const adminRoutes: RouteFamily<AdminDeps> = {
  routes: withAuth<AdminDeps>('admin', [
    {
      method: 'post',
      path: '/admin/v1/workspaces',
      summary: 'Create a workspace',
      body: CreateWorkspace,
      responses: { 201: '`{id, name}`', 409: 'the name exists' },
      handle: async (req, res, { pg: db }) => {
        const body = parseOr400(CreateWorkspace, req.body)
        const ws = await createWorkspace(db, body.name)
        if (!ws) throw conflict(`a workspace named ${body.name} already exists`)
        res.status(201).json({ id: ws.id, name: ws.name })
      },
    },
    {
      method: 'post',
      path: '/admin/v1/workspaces/:ws/api_keys',
      summary: 'Create an API key (the key is shown once)',
      body: CreateApiKey,
      responses: { 201: '`{id, key, permissions}`', 404: 'unknown workspace' },
      handle: async (req, res, { pg: db, operator }) => {
        const body = parseOr400(CreateApiKey, req.body)
        await workspaceOr404(db, req.params.ws)
        const key = await createApiKey(db, { workspaceId: req.params.ws, name: body.name, permissions: [...new Set(body.permissions)] })
        // A process may hold a miss for this key's hash (someone tried it before it existed).
        await operator.announce()
        res.status(201).json(key)
      },
    },
    {
      method: 'delete',
      path: '/admin/v1/api_keys/:id',
      summary: 'Revoke an API key at once',
      responses: { 204: 'revoked', 404: 'unknown key' },
      handle: async (req, res, { pg: db, operator }) => {
        if (!(await revokeApiKey(db, req.params.id))) throw notFound(`unknown API key ${req.params.id}`)
        await operator.announce()
        res.status(204).end()
      },
    },
    {
      method: 'put',
      path: '/admin/v1/api_keys/:id/permissions',
      summary: "Replace an API key's permissions, in force at once",
      body: ApiKeyPermissions,
      responses: { 200: '`{id, permissions}`', 404: 'unknown or revoked key' },
      handle: async (req, res, { pg: db, operator }) => {
        const body = parseOr400(ApiKeyPermissions, req.body)
        const permissions = [...new Set(body.permissions)]
        if (!(await setApiKeyPermissions(db, req.params.id, permissions))) throw notFound(`unknown or revoked API key ${req.params.id}`)
        await operator.announce()
        res.json({ id: req.params.id, permissions })
      },
    },
    {
      method: 'post',
      path: '/admin/v1/scim_tokens',
      summary: 'Create a SCIM token',
      body: CreateScimToken,
      responses: { 201: '`{id, token}`' },
      handle: async (req, res, { pg: db }) => {
        const body = parseOr400(CreateScimToken, req.body)
        res.status(201).json(await createScimToken(db, body.request_origin))
      },
    },
    {
      method: 'delete',
      path: '/admin/v1/scim_tokens/:id',
      summary: 'Revoke a SCIM token at once',
      responses: { 204: 'revoked', 404: 'unknown token' },
      handle: async (req, res, { pg: db }) => {
        if (!(await revokeScimToken(db, req.params.id))) throw notFound(`unknown SCIM token ${req.params.id}`)
        res.status(204).end()
      },
    },
    {
      method: 'post',
      path: '/admin/v1/workspaces/:ws/subscription_groups',
      summary: 'Create a subscription group',
      body: CreateSubscriptionGroup,
      responses: { 201: '`{subscription_group_id, name, channel}`', 404: 'unknown workspace', 409: 'the name exists' },
      handle: async (req, res, { pg: db }) => {
        const body = parseOr400(CreateSubscriptionGroup, req.body)
        await workspaceOr404(db, req.params.ws)
        const g = await createSubscriptionGroup(db, { workspaceId: req.params.ws, ...body })
        if (!g) throw conflict(`a subscription group named ${body.name} already exists`)
        res.status(201).json({ subscription_group_id: g.id, name: g.name, channel: g.channel })
      },
    },
    {
      method: 'post',
      path: '/admin/v1/workspaces/:ws/segments',
      summary: 'Create a segment from a filter (operator.md section 3)',
      body: CreateSegment,
      responses: {
        201: '`{segment_id, name}`',
        400: 'a filter of the wrong shape, or over a limit (conditions, custom_event and purchase conditions, depth, bytes, compiled query; docs/exports.md): `message` names it',
        404: 'unknown workspace',
        409: 'the name exists',
      },
      handle: async (req, res, { pg: db }) => {
        const body = parseOr400(CreateSegment, req.body)
        await workspaceOr404(db, req.params.ws)
        const s = await createSegment(db, { workspaceId: req.params.ws, ...body })
        if (!s) throw conflict(`a segment named ${body.name} already exists`)
        res.status(201).json({ segment_id: s.id, name: s.name })
      },
    },
    {
      method: 'get',
      path: '/admin/v1/workspaces/:ws/segments/:id',
      summary: 'Read a segment and its current size',
      responses: {
        200: '`{segment_id, name, filter, size}`; size is the current member count',
        404: 'unknown segment',
        409: 'a segment stored before the filter limits whose filter exceeds them: it cannot be counted; create it anew within the limits',
        503: 'ClickHouse cannot answer now (the worker holding the embedded engine is down or busy past CLICKHOUSE_READ_TIMEOUT_MS); `Retry-After` says when to ask again',
      },
      handle: async (req, res, { pg: db, clickhouseReads }) => {
        const s = await getSegment(db, req.params.ws, req.params.id)
        if (!s) throw notFound(`unknown segment ${req.params.id}`)
        const overLimit = filterLimitProblem(s.filter as Filter)
        if (overLimit) throw conflict(`segment ${s.id} cannot be counted: its filter ${overLimit}; create it anew within the limits`)
        const size = await clickhouseReads.segmentSize(s.workspace_id, s.filter as Filter)
        res.json({ segment_id: s.id, name: s.name, filter: s.filter, size })
      },
    },
    {
      method: 'put',
      path: '/admin/v1/workspaces/:ws/global_control_group',
      summary: 'Set the global control group percentage',
      body: GlobalControlGroup,
      responses: { 200: '`{percent, random_bucket_below}`', 404: 'unknown workspace' },
      handle: async (req, res, { pg: db, operator }) => {
        const body = parseOr400(GlobalControlGroup, req.body)
        if (!(await setGlobalControlPercent(db, req.params.ws, body.percent))) throw notFound(`unknown workspace ${req.params.ws}`)
        await operator.announce()
        res.json({ percent: body.percent, random_bucket_below: Math.round(body.percent * 100) })
      },
    },
    {
      method: 'put',
      path: '/admin/v1/workspaces/:ws/export_storage',
      summary: "Send the workspace's exports to an S3 bucket",
      body: ExportStorageBody,
      responses: { 200: 'the storage settings, without the secret', 404: 'unknown workspace' },
      handle: async (req, res, { pg: db, operator }) => {
        const body = parseOr400(ExportStorageBody, req.body)
        if (!(await setExportStorage(db, req.params.ws, body))) throw notFound(`unknown workspace ${req.params.ws}`)
        await operator.announce()
        const { secret_access_key: _secret, ...shown } = body
        res.json(shown)
      },
    },
    {
      method: 'delete',
      path: '/admin/v1/workspaces/:ws/export_storage',
      summary: 'Back to download URLs for exports',
      responses: { 204: 'removed', 404: 'unknown workspace' },
      handle: async (req, res, { pg: db, operator }) => {
        if (!(await setExportStorage(db, req.params.ws, null))) throw notFound(`unknown workspace ${req.params.ws}`)
        await operator.announce()
        res.status(204).end()
      },
    },
    {
      method: 'put',
      path: '/admin/v1/workspaces/:ws/rate_limits',
      summary: 'Set the rate limits of a workspace',
      body: RateLimitsBody,
      responses: { 200: 'the settings and `in_force`, the limits now in force per bucket', 404: 'unknown workspace' },
      handle: async (req, res, { pg: db, operator }) => {
        const body = parseOr400(RateLimitsBody, req.body)
        if (!(await setRateLimits(db, req.params.ws, body))) throw notFound(`unknown workspace ${req.params.ws}`)
        await operator.announce()
        res.json({ ...body, in_force: limitsInForce(body) })
      },
    },
    {
      method: 'put',
      path: '/admin/v1/workspaces/:ws/blocked_external_ids',
      summary: 'Replace the blocked external ids of a workspace',
      body: BlockedIds,
      responses: { 200: '`{external_ids}`', 404: 'unknown workspace' },
      handle: async (req, res, { pg: db, operator }) => {
        const body = parseOr400(BlockedIds, req.body)
        await workspaceOr404(db, req.params.ws)
        const ids = [...new Set(body.external_ids)]
        await replaceBlockedExternalIds(db, req.params.ws, ids)
        await operator.announce()
        res.json({ external_ids: ids })
      },
    },
    {
      method: 'get',
      path: '/admin/v1/workspaces/:ws/exports/:id',
      summary: 'Status and files of an export',
      responses: { 200: '`{id, kind, segment_id?, status, users_exported, files, started_at, finished_at?, error?}`', 404: 'unknown export' },
      handle: async (req, res, { pg: db }) => {
        const e = await getExport(db, req.params.ws, req.params.id)
        if (!e) throw notFound(`unknown export ${req.params.id}`)
        res.json(e)
      },
    },
  ]),
  // Any other /admin/v1 path asks for the admin token too, before answering that it does not exist.
  rest: { path: '/admin/v1', auth: 'admin' },
}
