import { parse, type Filter } from 'scim2-parse-filter'
import { ApiError } from '../errors.js'

export const UserSchema = 'urn:ietf:params:scim:schemas:core:2.0:User'
export const ListResponseSchema = 'urn:ietf:params:scim:api:messages:2.0:ListResponse'
export const ErrorSchema = 'urn:ietf:params:scim:api:messages:2.0:Error'
export const ScimContentType = 'application/scim+json'
export const ScimBasePath = '/scim/v2'

/** The vocabulary of operator.md section 6; nothing beyond it is accepted. */
export const Departments = [
  'agency', 'bi_or_analytics', 'c_suite', 'crm_lifecycle', 'engineering', 'finance', 'marketing',
  'product_management', 'other',
] as const
export const CompanyPermissions = [
  'admin', 'manage_company_settings', 'add_company_users', 'edit_company_users', 'remove_company_users',
] as const
export const WorkspacePermissions = [
  'admin', 'basic_access', 'send_campaigns_canvases', 'export_user_data', 'view_pii', 'manage_apps',
  'manage_subscription_groups',
] as const

export type CompanyPermission = (typeof CompanyPermissions)[number]
export type WorkspacePermission = (typeof WorkspacePermissions)[number]

/** SCIM `scimType` values of RFC 7644 section 3.12 that this service answers. */
export type ScimType = 'invalidValue' | 'invalidFilter' | 'uniqueness' | 'mutability' | 'invalidSyntax'

export interface TeamGrant {
  teamId: string
  teamName: string
  teamPermissions: WorkspacePermission[]
}
export interface WorkspaceGrant {
  appGroupId: string
  appGroupName: string
  appGroupPermissions: WorkspacePermission[]
  team: TeamGrant[]
  appGroupPermissionSets: { appGroupPermissionSetName: string }[]
}
/** A user's permissions as stored and answered: names together with the ids they resolved to. */
export interface UserPermissions {
  companyPermissions: CompanyPermission[]
  appGroup: WorkspaceGrant[]
}

/** A company-wide dashboard user, provisioned through SCIM. */
export interface DashboardUser {
  id: string
  user_name: string
  given_name: string
  family_name: string
  department: string
  permissions: UserPermissions
  last_sign_in_at: Date | null
  created_at: Date
  updated_at: Date
}

export interface DashboardUserFields {
  givenName: string
  familyName: string
  department: string
  permissions: UserPermissions
}

/** An error answered as a SCIM error body; `scimType` travels in `extra`. */
export function scimError(status: number, detail: string, scimType?: ScimType): ApiError {
  return new ApiError(status, scimType ?? 'scim_error', detail, scimType ? { scimType } : {})
}

export const userNotFound = () => scimError(404, 'User not found')

/**
 * The error body of RFC 7644 section 3.12. `status` is a number, as interface.md section 7 writes
 * it ("status 404"), although the RFC's examples quote it; clients read the HTTP status anyway.
 */
export function scimErrorBody(status: number, detail: string, scimType?: string) {
  return scimType ? { schemas: [ErrorSchema], scimType, detail, status } : { schemas: [ErrorSchema], detail, status }
}

export function userLocation(baseUrl: string, id: string): string {
  return `${baseUrl}${ScimBasePath}/Users/${encodeURIComponent(id)}`
}

/** The SCIM representation of a dashboard user (interface.md 2.6 plus RFC 7643 `meta`). */
export function toScimUser(user: DashboardUser, baseUrl: string) {
  return {
    schemas: [UserSchema],
    id: user.id,
    userName: user.user_name,
    name: { givenName: user.given_name, familyName: user.family_name },
    department: user.department,
    lastSignInAt: user.last_sign_in_at?.toISOString() ?? null,
    // Rebuilt key by key: jsonb stores object keys in its own order.
    permissions: {
      companyPermissions: user.permissions.companyPermissions,
      appGroup: user.permissions.appGroup.map((g) => ({
        appGroupId: g.appGroupId,
        appGroupName: g.appGroupName,
        appGroupPermissions: g.appGroupPermissions,
        team: g.team.map((t) => ({ teamId: t.teamId, teamName: t.teamName, teamPermissions: t.teamPermissions })),
        appGroupPermissionSets: g.appGroupPermissionSets.map((s) => ({ appGroupPermissionSetName: s.appGroupPermissionSetName })),
      })),
    },
    meta: {
      resourceType: 'User',
      created: user.created_at.toISOString(),
      lastModified: user.updated_at.toISOString(),
      location: userLocation(baseUrl, user.id),
    },
  }
}

/** Attributes a filter may name, keyed by their lower-case spelling (RFC 7643: names are case-insensitive). */
const FilterAttributes = {
  id: 'id',
  username: 'userName',
  'name.givenname': 'name.givenName',
  'name.familyname': 'name.familyName',
  department: 'department',
} as const
export type FilterAttribute = (typeof FilterAttributes)[keyof typeof FilterAttributes]

export type StringOp = 'eq' | 'ne' | 'co' | 'sw' | 'ew'
export type UserFilter =
  | { op: 'and' | 'or'; filters: UserFilter[] }
  | { op: 'not'; filter: UserFilter }
  | { op: 'pr'; attribute: FilterAttribute }
  | { op: StringOp; attribute: FilterAttribute; value: string }

const invalidFilter = (detail: string) => scimError(400, detail, 'invalidFilter')
const CorePrefix = `${UserSchema.toLowerCase()}:`

function attributeOf(attrPath: string): FilterAttribute {
  const lower = attrPath.toLowerCase()
  const name = lower.startsWith(CorePrefix) ? lower.slice(CorePrefix.length) : lower
  const attribute = FilterAttributes[name as keyof typeof FilterAttributes]
  if (!attribute) {
    throw invalidFilter(`filtering on ${attrPath} is not supported; use ${Object.values(FilterAttributes).join(', ')}`)
  }
  return attribute
}

function toUserFilter(f: Filter): UserFilter {
  switch (f.op) {
    case 'and':
    case 'or':
      return { op: f.op, filters: f.filters.map(toUserFilter) }
    case 'not':
      return { op: 'not', filter: toUserFilter(f.filter) }
    case 'pr':
      return { op: 'pr', attribute: attributeOf(f.attrPath) }
    case 'eq':
    case 'ne':
    case 'co':
    case 'sw':
    case 'ew': {
      const attribute = attributeOf(f.attrPath)
      if (typeof f.compValue !== 'string') throw invalidFilter(`${f.attrPath} ${f.op} needs a quoted string value`)
      return { op: f.op, attribute, value: f.compValue }
    }
    default:
      throw invalidFilter(`operator ${f.op} is not supported; use eq, ne, co, sw, ew, pr, and, or, not`)
  }
}

/** Parses a SCIM filter (RFC 7644 section 3.4.2.2) into the subset this service can answer. */
export function parseUserFilter(text: string): UserFilter {
  let ast: Filter
  try {
    ast = parse(text)
  } catch (e) {
    throw invalidFilter(`malformed filter ${JSON.stringify(text)}: ${(e as Error).message}`)
  }
  return toUserFilter(ast)
}
