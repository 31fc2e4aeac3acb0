import { Router, type NextFunction, type Request, type Response } from 'express'
import { z } from 'zod'
import { findScimTokenByHash } from '../../../shared/db/repositories/credential-repository.js'
import {
  createDashboardUser,
  deleteDashboardUser,
  ensureWorkspaceTeams,
  getDashboardUser,
  listDashboardUsers,
  replaceDashboardUser,
  teamKey,
} from '../../../shared/db/repositories/dashboard-user-repository.js'
import { getWorkspaceByName } from '../../../shared/db/repositories/workspace-repository.js'
import { withTransaction, type Pool, type Queryable } from '../../../shared/db/pool.js'
import { ScimBucket } from '../../../shared/domain/rate-limits.js'
import {
  CompanyPermissions,
  Departments,
  ListResponseSchema,
  ScimBasePath,
  ScimContentType,
  UserSchema,
  WorkspacePermissions,
  parseUserFilter,
  scimError,
  toScimUser,
  userNotFound,
  type UserPermissions,
} from '../../../shared/domain/scim.js'
import type { ApiError } from '../../../shared/errors.js'
import type { Metrics } from '../../../shared/metrics.js'
import { hashSecret, hashesEqual } from '../../../shared/secrets.js'
import type { ApiDeps } from '../deps.js'
import { bearerToken } from '../middleware/auth.js'
import type { RateLimits } from '../middleware/rate-limit.js'
import type { ApiOperation } from '../api-operation.js'

const DEFAULT_PAGE_SIZE = 100
const MAX_PAGE_SIZE = 1000

/** An enum whose error names the refused value, as operator.md section 6 asks. */
function namedEnum<const T extends readonly [string, ...string[]]>(values: T, what: string) {
  return z.enum(values, {
    error: (iss) => `unknown ${what} ${JSON.stringify(iss.input)}; expected one of ${values.join(', ')}`,
  })
}

/** Refuses a list naming the same thing twice, pointing at the second mention. */
function uniqueBy<T>(key: (item: T) => string, what: string) {
  return (items: T[], ctx: z.RefinementCtx) => {
    const seen = new Set<string>()
    items.forEach((item, i) => {
      if (seen.has(key(item))) ctx.addIssue({ code: 'custom', path: [i], message: `${what} ${JSON.stringify(key(item))} is listed twice` })
      seen.add(key(item))
    })
  }
}

const Text = z.string().trim().min(1).max(200)
const WorkspacePermissionList = z.array(namedEnum(WorkspacePermissions, 'permission')).default([])
/** Response-only ids a client may echo back from a read; they are ignored, never trusted. */
const ReadOnlyId = z.string().optional()

const TeamBody = z
  .object({ teamName: Text, teamId: ReadOnlyId, teamPermissions: WorkspacePermissionList })
  .strict()
const WorkspaceGrantBody = z
  .object({
    appGroupName: Text,
    appGroupId: ReadOnlyId,
    appGroupPermissions: WorkspacePermissionList,
    team: z.array(TeamBody).default([]).superRefine(uniqueBy((t) => t.teamName, 'team')),
    // No permission-set registry exists: any non-empty name is accepted (docs/scim.md).
    appGroupPermissionSets: z.array(z.object({ appGroupPermissionSetName: Text }).strict()).default([]),
  })
  .strict()
// Our own extension: strict, so a misspelt key is refused instead of silently granting nothing.
const PermissionsBody = z
  .object({
    companyPermissions: z.array(namedEnum(CompanyPermissions, 'company permission')).default([]),
    appGroup: z.array(WorkspaceGrantBody).default([]).superRefine(uniqueBy((g) => g.appGroupName, 'workspace')),
  })
  .strict()

// Core attributes are not strict: identity providers send more (`active`, `emails`, `meta`, ...),
// which RFC 7644 lets a service provider ignore.
const ReplaceUserBody = z.object({
  schemas: z.array(z.string()).refine((s) => s.includes(UserSchema), `must contain ${UserSchema}`),
  userName: z.string().optional(),
  name: z.object({ givenName: Text, familyName: Text }),
  department: namedEnum(Departments, 'department'),
  permissions: PermissionsBody,
})
const CreateUserBody = ReplaceUserBody.extend({ userName: z.email('must be an email address').max(320) })

const Paging = z.object({
  // RFC 7644 section 3.4.2.4: a startIndex below 1 means 1, a negative count means 0.
  startIndex: z.coerce.number().int().default(1).transform((n) => Math.max(1, n)),
  count: z.coerce.number().int().default(DEFAULT_PAGE_SIZE).transform((n) => Math.min(MAX_PAGE_SIZE, Math.max(0, n))),
})

/** The query of a search, for the API document; the handler parses `filter` with the SCIM filter parser. */
const ListQuery = Paging.extend({ filter: z.string().optional().describe('only `userName eq "<email>"`') })

const scim = (op: Omit<ApiOperation, 'auth'>): ApiOperation => ({ ...op, auth: 'scim' })
const scimUser = 'the SCIM user'
const unknownUser = 'unknown user'

export const openapi: ApiOperation[] = [
  scim({ method: 'post', path: '/scim/v2/Users', summary: 'Create a dashboard user (SCIM)', body: CreateUserBody, responses: { 201: scimUser, 409: 'a user with that userName exists' } }),
  scim({ method: 'get', path: '/scim/v2/Users', summary: 'Search dashboard users by filter (SCIM)', query: ListQuery, responses: { 200: 'a SCIM ListResponse' } }),
  scim({ method: 'get', path: '/scim/v2/Users/:id', summary: 'Read a dashboard user (SCIM)', responses: { 200: scimUser, 404: unknownUser } }),
  scim({ method: 'put', path: '/scim/v2/Users/:id', summary: 'Replace a dashboard user (SCIM)', body: ReplaceUserBody, responses: { 200: scimUser, 404: unknownUser } }),
  scim({ method: 'delete', path: '/scim/v2/Users/:id', summary: 'Delete a dashboard user (SCIM)', responses: { 204: 'deleted', 404: unknownUser } }),
  scim({ method: 'patch', path: '/scim/v2/Users/:id', summary: 'PATCH is not supported: use PUT (SCIM)', responses: { 501: 'not implemented' } }),
]

/** Parses with the schema; a failure is a 400 `invalidValue` naming every bad field. */
function parseScim<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const r = schema.safeParse(value)
  if (r.success) return r.data
  const detail = r.error.issues.map((i) => `${i.path.length ? i.path.join('.') : 'body'}: ${i.message}`).join('; ')
  throw scimError(400, detail, 'invalidValue')
}

function sendScim(res: Response, status: number, body: unknown): void {
  res.status(status).type(ScimContentType).json(body)
}

/** Bearer SCIM token (stored hashed) plus the `X-Request-Origin` it was issued for. */
function authenticateScim(db: Pool) {
  return async (req: Request, _res: Response, next: NextFunction) => {
    const token = bearerToken(req)
    if (!token) throw scimError(401, 'missing SCIM token: send Authorization: Bearer <SCIM_TOKEN>')
    const hash = hashSecret(token)
    const record = await findScimTokenByHash(db, hash)
    if (!record || !hashesEqual(record.token_hash, hash)) throw scimError(401, 'invalid SCIM token')
    const origin = req.get('x-request-origin')
    if (!origin) throw scimError(401, 'missing X-Request-Origin header')
    if (origin !== record.request_origin) throw scimError(403, 'X-Request-Origin does not match the origin of this SCIM token')
    next()
  }
}

/** SCIM users are company-wide, and so is their rate limit. */
function limitScim(limits: RateLimits, metrics: Metrics) {
  return async (_req: Request, res: Response, next: NextFunction) => {
    try {
      await limits.consume(res, ScimBucket, 'company')
    } catch (e) {
      if ((e as ApiError).status === 429) metrics.rateLimited.inc({ bucket: ScimBucket.name })
      throw e
    }
    next()
  }
}

/** Resolves workspace names to ids and team names to their stable ids; an unknown workspace is a 400. */
async function resolvePermissions(db: Queryable, body: z.infer<typeof PermissionsBody>): Promise<UserPermissions> {
  const workspaces = await Promise.all(body.appGroup.map((g) => getWorkspaceByName(db, g.appGroupName)))
  workspaces.forEach((ws, i) => {
    if (!ws) {
      const name = body.appGroup[i].appGroupName
      throw scimError(400, `permissions.appGroup.${i}.appGroupName: unknown workspace ${JSON.stringify(name)}`, 'invalidValue')
    }
  })
  const workspaceIds = workspaces.map((ws) => ws!.id)
  const teamIds = await ensureWorkspaceTeams(
    db,
    body.appGroup.flatMap((g, i) => g.team.map((t) => ({ workspaceId: workspaceIds[i], name: t.teamName }))),
  )
  return {
    companyPermissions: [...new Set(body.companyPermissions)],
    appGroup: body.appGroup.map((g, i) => ({
      appGroupId: workspaceIds[i],
      appGroupName: g.appGroupName,
      appGroupPermissions: [...new Set(g.appGroupPermissions)],
      team: g.team.map((t) => ({
        teamId: teamIds.get(teamKey(workspaceIds[i], t.teamName))!,
        teamName: t.teamName,
        teamPermissions: [...new Set(t.teamPermissions)],
      })),
      appGroupPermissionSets: g.appGroupPermissionSets,
    })),
  }
}

/** The optional `filter` query parameter, parsed; anything but one string is an invalid filter. */
function filterOf(req: Request) {
  const filter = req.query.filter
  if (filter === undefined) return undefined
  if (typeof filter !== 'string' || !filter.trim()) throw scimError(400, 'filter must be one non-empty string', 'invalidFilter')
  return parseUserFilter(filter)
}

/**
 * SCIM 2.0 Users (interface.md 4.13 to 4.17) under /scim/v2, with its own auth and limit; its
 * errors answer SCIM error bodies through the app's error handler (middleware/errors.ts).
 */
export function scimUserRoutes(deps: ApiDeps): Router {
  const r = Router()
  const db = deps.pg
  const baseUrl = deps.config.PUBLIC_URL
  r.use(ScimBasePath, authenticateScim(db), limitScim(deps.rateLimits, deps.metrics))

  r.post(`${ScimBasePath}/Users`, async (req, res) => {
    const body = parseScim(CreateUserBody, req.body)
    // One transaction, so a 409 leaves none of the teams it named behind.
    const user = await withTransaction(db, async (tx) => {
      const permissions = await resolvePermissions(tx, body.permissions)
      const created = await createDashboardUser(tx, { userName: body.userName, ...body.name, department: body.department, permissions })
      if (!created) throw scimError(409, `a user with userName ${body.userName} already exists`, 'uniqueness')
      return created
    })
    const scimUser = toScimUser(user, baseUrl)
    res.location(scimUser.meta.location)
    sendScim(res, 201, scimUser)
  })

  r.get(`${ScimBasePath}/Users`, async (req, res) => {
    const filter = filterOf(req)
    const { startIndex, count } = parseScim(Paging, { startIndex: req.query.startIndex, count: req.query.count })
    const { total, users } = await listDashboardUsers(db, { filter, offset: startIndex - 1, limit: count })
    sendScim(res, 200, {
      schemas: [ListResponseSchema],
      totalResults: total,
      startIndex,
      itemsPerPage: users.length,
      Resources: users.map((u) => toScimUser(u, baseUrl)),
    })
  })

  r.get(`${ScimBasePath}/Users/:id`, async (req, res) => {
    const user = await getDashboardUser(db, req.params.id)
    if (!user) throw userNotFound()
    sendScim(res, 200, toScimUser(user, baseUrl))
  })

  r.put(`${ScimBasePath}/Users/:id`, async (req, res) => {
    // An unknown id is a 404 whatever the body holds.
    const current = await getDashboardUser(db, req.params.id)
    if (!current) throw userNotFound()
    const body = parseScim(ReplaceUserBody, req.body)
    // userName is immutable (interface.md 4.16); repeating it, in any letter case, is fine.
    if (body.userName !== undefined && body.userName.toLowerCase() !== current.user_name.toLowerCase()) {
      throw scimError(400, `userName cannot be changed (it is ${current.user_name})`, 'mutability')
    }
    const user = await withTransaction(db, async (tx) => {
      const permissions = await resolvePermissions(tx, body.permissions)
      const replaced = await replaceDashboardUser(tx, req.params.id, { ...body.name, department: body.department, permissions })
      if (!replaced) throw userNotFound()
      return replaced
    })
    sendScim(res, 200, toScimUser(user, baseUrl))
  })

  r.delete(`${ScimBasePath}/Users/:id`, async (req, res) => {
    if (!(await deleteDashboardUser(db, req.params.id))) throw userNotFound()
    res.status(204).end()
  })

  r.patch(`${ScimBasePath}/Users/:id`, () => {
    throw scimError(501, 'PATCH is not supported; replace the user with PUT')
  })

  r.use(ScimBasePath, (req) => {
    throw scimError(404, `no such SCIM endpoint: ${req.method} ${req.originalUrl.split('?')[0]}`)
  })
  return r
}
