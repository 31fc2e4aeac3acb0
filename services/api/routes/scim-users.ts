import type { Request, Response } from 'express'
import { z } from 'zod'
import {
  createDashboardUser,
  deleteDashboardUser,
  ensureWorkspaceTeams,
  getDashboardUser,
  listDashboardUsers,
  lockDashboardUser,
  replaceDashboardUser,
  teamKey,
} from '../../../shared/db/repositories/dashboard-user-repository.js'
import { getWorkspaceByName } from '../../../shared/db/repositories/workspace-repository.js'
import { withTransaction, type Queryable } from '../../../shared/db/pool.js'
import {
  CompanyPermissions,
  Departments,
  ListResponseSchema,
  ScimBasePath,
  ScimContentType,
  SearchRequestSchema,
  UserSchema,
  WorkspacePermissions,
  parseUserFilter,
  scimError,
  selectAttributes,
  toScimUser,
  userNotFound,
  userVersion,
  versionMatches,
  type DashboardUser,
  type DashboardUserFields,
  type UserFilter,
  type UserPermissions,
} from '../../../shared/domain/scim.js'
import { applyPatch, patchOperations } from '../../../shared/domain/scim-patch.js'
import { MaxResults } from '../../../shared/domain/scim-schema.js'
import type { ApiDeps } from '../deps.js'
import { withAuth, type ApiRequest, type RouteFamily } from '../api-operation.js'
import { scimDiscoveryRoutes, type DiscoveryDeps } from './scim-discovery.js'

const DEFAULT_PAGE_SIZE = 100

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

/** A boolean, or the strings "True"/"False" in any case, which Entra ID sends. */
const BooleanValue = z.preprocess(
  (v) => (typeof v === 'string' && /^(true|false)$/i.test(v) ? v.toLowerCase() === 'true' : v),
  z.boolean({ error: 'must be true or false' }),
)
/** An optional text attribute; null or absent leaves it unassigned. */
const OptionalText = (max: number) => z.string().trim().min(1).max(max).nullish().transform((v) => v ?? null)
const Email = z.object({
  value: z.string().trim().min(1).max(320),
  type: z.string().trim().min(1).max(50).optional(),
  primary: BooleanValue.optional(),
})
const Emails = z
  .array(Email)
  .max(50)
  .nullish()
  .transform((v) => v ?? [])
  .refine((emails) => emails.filter((e) => e.primary).length <= 1, 'at most one address may be primary')

// Core attributes are not strict: identity providers send more (`title`, `phoneNumbers`, the
// enterprise extension, `meta`, ...), which RFC 7644 lets a service provider ignore.
const ReplaceUserBody = z.object({
  schemas: z.array(z.string()).refine((s) => s.includes(UserSchema), `must contain ${UserSchema}`),
  userName: z.string().optional(),
  externalId: OptionalText(512),
  name: z.object({ givenName: Text, familyName: Text, formatted: OptionalText(400) }),
  displayName: OptionalText(400),
  // Absent on a PUT: kept as it is (docs/scim.md); absent on a POST: true.
  active: BooleanValue.optional(),
  emails: Emails,
  department: namedEnum(Departments, 'department'),
  permissions: PermissionsBody,
})
const CreateUserBody = ReplaceUserBody.extend({ userName: z.email('must be an email address').max(320) })

/** The fields stored for a parsed body; `active` falls back to the given value when the body leaves it out. */
function userFields(body: z.infer<typeof ReplaceUserBody>, permissions: UserPermissions, active: boolean): DashboardUserFields {
  return {
    externalId: body.externalId,
    givenName: body.name.givenName,
    familyName: body.name.familyName,
    formattedName: body.name.formatted,
    displayName: body.displayName,
    active: body.active ?? active,
    emails: body.emails,
    department: body.department,
    permissions,
  }
}

const Paging = z.object({
  // RFC 7644 section 3.4.2.4: a startIndex below 1 means 1, a negative count means 0.
  startIndex: z.coerce.number().int().default(1).transform((n) => Math.max(1, n)),
  count: z.coerce.number().int().default(DEFAULT_PAGE_SIZE).transform((n) => Math.min(MaxResults, Math.max(0, n))),
})

/** Comma-separated attribute names (RFC 7644 section 3.9), in a query or as a SearchRequest list. */
const AttributeNames = z
  .union([z.string(), z.array(z.string())])
  .optional()
  .transform((v) => (v === undefined ? [] : [v].flat().flatMap((s) => s.split(',')).map((s) => s.trim()).filter(Boolean)))
const Projection = z.object({ attributes: AttributeNames, excludedAttributes: AttributeNames })
type Projection = z.infer<typeof Projection>

/** The query of a search, for the API document; the handler parses `filter` with the SCIM filter parser. */
const ListQuery = Paging.extend({
  filter: z.string().optional().describe('RFC 7644 filter on userName, externalId, emails, active, meta.lastModified, ... (docs/scim.md)'),
  attributes: z.string().optional().describe('comma-separated attributes to return (id and schemas always are)'),
  excludedAttributes: z.string().optional().describe('comma-separated attributes to leave out'),
})
/** RFC 7644 section 3.4.3; sortBy and sortOrder are accepted and ignored (sorting is not offered). */
const SearchRequest = z.object({
  schemas: z.array(z.string()).refine((s) => s.includes(SearchRequestSchema), `must contain ${SearchRequestSchema}`),
  filter: z.string().optional(),
  startIndex: z.number().int().optional(),
  count: z.number().int().optional(),
  attributes: z.array(z.string()).optional(),
  excludedAttributes: z.array(z.string()).optional(),
  sortBy: z.string().optional(),
  sortOrder: z.enum(['ascending', 'descending']).optional(),
})
/** The PatchOp body, for the API document; the handler checks the operations itself (shared/domain/scim-patch.ts). */
const PatchBody = z
  .object({
    schemas: z.array(z.string()).optional(),
    Operations: z.array(z.object({ op: z.string(), path: z.string().optional(), value: z.unknown().optional() })),
  })
  .describe('RFC 7644 section 3.5.2 PatchOp')

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
function filterOf(filter: unknown): UserFilter | undefined {
  if (filter === undefined) return undefined
  if (typeof filter !== 'string' || !filter.trim()) throw scimError(400, 'filter must be one non-empty string', 'invalidFilter')
  return parseUserFilter(filter)
}

/** Whether the request's If-Match (when sent) names the user's version; a stale one is a 412 (RFC 7644 section 3.14). */
function checkIfMatch(req: Request, user: DashboardUser): void {
  const header = req.get('if-match')
  if (header !== undefined && !versionMatches(header, user)) {
    throw scimError(412, `the user has changed: its version is ${userVersion(user)}, not ${header}`)
  }
}

/** Postgres for the users, and the public URL their locations name. */
type ScimDeps = Pick<ApiDeps, 'pg'> & DiscoveryDeps

/** One user answered with its ETag (equal to meta.version) and the requested attributes only. */
function sendUser(deps: ScimDeps, req: Request, res: Response, { status, user }: { status: number; user: DashboardUser }) {
  const { attributes, excludedAttributes } = parseScim(Projection, { attributes: req.query.attributes, excludedAttributes: req.query.excludedAttributes })
  res.setHeader('ETag', userVersion(user))
  sendScim(res, status, selectAttributes(toScimUser(user, deps.config.PUBLIC_URL), attributes, excludedAttributes))
}

async function search(deps: ScimDeps, res: Response, q: { filter?: UserFilter; startIndex: number; count: number } & Projection) {
  const { total, users } = await listDashboardUsers(deps.pg, { filter: q.filter, offset: q.startIndex - 1, limit: q.count })
  sendScim(res, 200, {
    schemas: [ListResponseSchema],
    totalResults: total,
    startIndex: q.startIndex,
    itemsPerPage: users.length,
    Resources: users.map((u) => selectAttributes(toScimUser(u, deps.config.PUBLIC_URL), q.attributes, q.excludedAttributes)),
  })
}

/** PUT and PATCH: the row locked, If-Match checked, the new state computed and stored in one transaction. */
function replace(deps: ScimDeps, req: ApiRequest, next: (current: DashboardUser) => z.infer<typeof ReplaceUserBody>) {
  return withTransaction(deps.pg, async (tx) => {
    const current = await lockDashboardUser(tx, req.params.id)
    if (!current) throw userNotFound()
    checkIfMatch(req, current)
    const body = next(current)
    // userName is immutable (interface.md 4.16); repeating it, in any letter case, is fine.
    if (body.userName !== undefined && body.userName.toLowerCase() !== current.user_name.toLowerCase()) {
      throw scimError(400, `userName cannot be changed (it is ${current.user_name})`, 'mutability')
    }
    const permissions = await resolvePermissions(tx, body.permissions)
    return (await replaceDashboardUser(tx, current.id, userFields(body, permissions, current.active)))!
  })
}

const scimUser = 'the SCIM user'
const unknownUser = 'unknown user'
const ifMatch = { 412: 'If-Match names another version; nothing changed' }

const userRoutes = withAuth<ScimDeps>('scim', [
  {
    method: 'post',
    path: `${ScimBasePath}/Users`,
    summary: 'Create a dashboard user (SCIM)',
    body: CreateUserBody,
    responses: { 201: scimUser, 409: 'a user with that userName exists' },
    handle: async (req, res, deps) => {
      const body = parseScim(CreateUserBody, req.body)
      // One transaction, so a 409 leaves none of the teams it named behind.
      const user = await withTransaction(deps.pg, async (tx) => {
        const permissions = await resolvePermissions(tx, body.permissions)
        const created = await createDashboardUser(tx, { userName: body.userName, ...userFields(body, permissions, true) })
        if (!created) throw scimError(409, `a user with userName ${body.userName} already exists`, 'uniqueness')
        return created
      })
      res.location(toScimUser(user, deps.config.PUBLIC_URL).meta.location)
      sendUser(deps, req, res, { status: 201, user })
    },
  },
  {
    method: 'get',
    path: `${ScimBasePath}/Users`,
    summary: 'Search dashboard users by filter (SCIM)',
    query: ListQuery,
    responses: { 200: 'a SCIM ListResponse' },
    handle: async (req, res, deps) => {
      const filter = filterOf(req.query.filter)
      const paging = parseScim(Paging, { startIndex: req.query.startIndex, count: req.query.count })
      const projection = parseScim(Projection, { attributes: req.query.attributes, excludedAttributes: req.query.excludedAttributes })
      await search(deps, res, { filter, ...paging, ...projection })
    },
  },
  {
    method: 'post',
    path: `${ScimBasePath}/Users/.search`,
    summary: 'Search dashboard users with a SearchRequest body (SCIM)',
    body: SearchRequest,
    responses: { 200: 'a SCIM ListResponse' },
    handle: async (req, res, deps) => {
      const body = parseScim(SearchRequest, req.body)
      const filter = filterOf(body.filter)
      const paging = parseScim(Paging, { startIndex: body.startIndex, count: body.count })
      const projection = parseScim(Projection, { attributes: body.attributes, excludedAttributes: body.excludedAttributes })
      await search(deps, res, { filter, ...paging, ...projection })
    },
  },
  {
    method: 'get',
    path: `${ScimBasePath}/Users/:id`,
    summary: 'Read a dashboard user (SCIM); If-None-Match answers 304 when unchanged',
    responses: { 200: scimUser, 304: 'unchanged since the version named', 404: unknownUser },
    handle: async (req, res, deps) => {
      const user = await getDashboardUser(deps.pg, req.params.id)
      if (!user) throw userNotFound()
      const unchanged = req.get('if-none-match')
      if (unchanged !== undefined && versionMatches(unchanged, user)) {
        res.setHeader('ETag', userVersion(user))
        res.status(304).end()
        return
      }
      sendUser(deps, req, res, { status: 200, user })
    },
  },
  {
    method: 'put',
    path: `${ScimBasePath}/Users/:id`,
    summary: 'Replace a dashboard user (SCIM)',
    body: ReplaceUserBody,
    responses: { 200: scimUser, 404: unknownUser, ...ifMatch },
    handle: async (req, res, deps) => {
      // An unknown id is a 404 whatever the body holds.
      if (!(await getDashboardUser(deps.pg, req.params.id))) throw userNotFound()
      const body = parseScim(ReplaceUserBody, req.body)
      sendUser(deps, req, res, { status: 200, user: await replace(deps, req, () => body) })
    },
  },
  {
    method: 'patch',
    path: `${ScimBasePath}/Users/:id`,
    summary: 'Modify a dashboard user with PATCH operations, all or none (SCIM)',
    body: PatchBody,
    responses: { 200: scimUser, 404: unknownUser, ...ifMatch },
    handle: async (req, res, deps) => {
      if (!(await getDashboardUser(deps.pg, req.params.id))) throw userNotFound()
      const ops = patchOperations(req.body)
      // The operations apply to the locked row's state, so two PATCHes never lose each other's changes.
      const user = await replace(deps, req, (current) => parseScim(ReplaceUserBody, applyPatch(toScimUser(current, deps.config.PUBLIC_URL), ops)))
      sendUser(deps, req, res, { status: 200, user })
    },
  },
  {
    method: 'delete',
    path: `${ScimBasePath}/Users/:id`,
    summary: 'Delete a dashboard user (SCIM)',
    responses: { 204: 'deleted', 404: unknownUser, ...ifMatch },
    handle: async (req, res, deps) => {
      await withTransaction(deps.pg, async (tx) => {
        const current = await lockDashboardUser(tx, req.params.id)
        if (!current) throw userNotFound()
        checkIfMatch(req, current)
        await deleteDashboardUser(tx, current.id)
      })
      res.status(204).end()
    },
  },
])

/** Each SCIM resource path as a pattern, with the methods it allows (HEAD goes with GET, as Express answers it). */
function allowedMethods(routes: { method: string; path: string }[]): { pattern: RegExp; methods: string[] }[] {
  const byPath = new Map<string, Set<string>>()
  for (const r of routes) byPath.set(r.path, (byPath.get(r.path) ?? new Set()).add(r.method.toUpperCase()))
  const order = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']
  return [...byPath].map(([path, methods]) => {
    if (methods.has('GET')) methods.add('HEAD')
    return {
      pattern: new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:\w+/g, '[^/]+')}/?$`, 'i'),
      methods: order.filter((m) => methods.has(m)),
    }
  })
}

/**
 * Any other request under /scim/v2, authenticated and counted like the rest: a method a resource
 * does not allow is a SCIM 405 with an Allow header (RFC 7231 6.5.5), any other path a SCIM 404.
 */
function noSuchEndpoint(resources: { pattern: RegExp; methods: string[] }[]) {
  return (req: Request, res: Response): never => {
    const path = req.originalUrl.split('?')[0]
    const resource = resources.find((r) => r.pattern.test(path))
    if (resource) {
      res.setHeader('Allow', resource.methods.join(', '))
      throw scimError(405, `${req.method} is not allowed on ${path}; allowed: ${resource.methods.join(', ')}`)
    }
    const unsupported = /^\/scim\/v2\/(Groups|Bulk|Me)(\/|$)/i.test(path) ? ': this service provides Users only (no Groups, Bulk or /Me; see /scim/v2/ServiceProviderConfig)' : ''
    throw scimError(404, `no such SCIM endpoint: ${req.method} ${path}${unsupported}`)
  }
}

/**
 * SCIM 2.0 Users (interface.md 4.13 to 4.17, and RFC 7644 beyond them: docs/scim.md) and the
 * discovery endpoints under /scim/v2, with its own auth and limit (the `scim` auth kind); its
 * errors answer SCIM error bodies through the app's error handler (middleware/errors.ts).
 */
export const scimUserRoutes: RouteFamily<ScimDeps> = {
  routes: [...scimDiscoveryRoutes, ...userRoutes],
  rest: { path: ScimBasePath, auth: 'scim', handler: () => noSuchEndpoint(allowedMethods([...scimDiscoveryRoutes, ...userRoutes])) },
}
