import { parse, type Filter } from 'scim2-parse-filter'
import { ApiError } from '../errors.js'

export const UserSchema = 'urn:ietf:params:scim:schemas:core:2.0:User'
export const ListResponseSchema = 'urn:ietf:params:scim:api:messages:2.0:ListResponse'
export const ErrorSchema = 'urn:ietf:params:scim:api:messages:2.0:Error'
export const ScimContentType = 'application/scim+json'
export const ScimBasePath = '/scim/v2'
export const PatchOpSchema = 'urn:ietf:params:scim:api:messages:2.0:PatchOp'
export const SearchRequestSchema = 'urn:ietf:params:scim:api:messages:2.0:SearchRequest'

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
export type ScimType = 'invalidValue' | 'invalidFilter' | 'uniqueness' | 'mutability' | 'invalidSyntax' | 'invalidPath' | 'noTarget'

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

/** One address of a user's `emails` (RFC 7643 section 4.1.2). */
export interface ScimEmail {
  value: string
  type?: string
  primary?: boolean
}

/** A company-wide dashboard user, provisioned through SCIM. */
export interface DashboardUser {
  id: string
  user_name: string
  external_id: string | null
  given_name: string
  family_name: string
  formatted_name: string | null
  display_name: string | null
  active: boolean
  emails: ScimEmail[]
  department: string
  permissions: UserPermissions
  last_sign_in_at: Date | null
  created_at: Date
  updated_at: Date
  /** Raised by every change; meta.version and the ETag are built from it. */
  version: number
}

export interface DashboardUserFields {
  externalId: string | null
  givenName: string
  familyName: string
  formattedName: string | null
  displayName: string | null
  active: boolean
  emails: ScimEmail[]
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

/** The weak entity tag of a user's current state: the ETag header and meta.version (RFC 7644 section 3.14). */
export const userVersion = (user: Pick<DashboardUser, 'version'>) => `W/"${user.version}"`

/**
 * Whether an If-Match or If-None-Match header names the user's current version: `*`, or one of a
 * list of tags compared weakly (W/ ignored), as RFC 7644 section 3.14 uses them.
 */
export function versionMatches(header: string, user: Pick<DashboardUser, 'version'>): boolean {
  const current = userVersion(user).slice(2)
  return header.split(',').some((tag) => {
    const t = tag.trim()
    return t === '*' || t.replace(/^W\//, '') === current
  })
}

/**
 * The SCIM representation of a dashboard user (interface.md 2.6 plus the RFC 7643 attributes of
 * docs/scim.md). Unassigned attributes are left out, as RFC 7643 section 2.5 allows; lastSignInAt
 * stays null as before.
 */
export function toScimUser(user: DashboardUser, baseUrl: string) {
  return {
    schemas: [UserSchema],
    id: user.id,
    ...(user.external_id !== null ? { externalId: user.external_id } : {}),
    userName: user.user_name,
    name: {
      ...(user.formatted_name !== null ? { formatted: user.formatted_name } : {}),
      givenName: user.given_name,
      familyName: user.family_name,
    },
    ...(user.display_name !== null ? { displayName: user.display_name } : {}),
    active: user.active,
    ...(user.emails.length ? { emails: user.emails.map((e) => ({ value: e.value, ...(e.type !== undefined ? { type: e.type } : {}), ...(e.primary !== undefined ? { primary: e.primary } : {}) })) } : {}),
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
      version: userVersion(user),
    },
  }
}
export type ScimUser = ReturnType<typeof toScimUser>

/** Attribute names of a resource, lower-cased, without the core User schema prefix (RFC 7643: names are case-insensitive). */
function attributeKey(name: string): string {
  const lower = name.trim().toLowerCase()
  return lower.startsWith(CorePrefix) ? lower.slice(CorePrefix.length) : lower
}

/**
 * `attributes` / `excludedAttributes` (RFC 7644 section 3.4.2.5) applied to one answered user:
 * `id` and `schemas` are always returned; `name.givenName` selects one sub-attribute. Names the
 * resource does not have select nothing.
 */
export function selectAttributes(resource: Record<string, unknown>, attributes: string[], excluded: string[]): Record<string, unknown> {
  const always = new Set(['schemas', 'id'])
  const wanted = attributes.map(attributeKey)
  const unwanted = excluded.map(attributeKey)
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(resource)) {
    const k = key.toLowerCase()
    if (always.has(k)) {
      out[key] = value
      continue
    }
    const subs = (names: string[]) => names.filter((n) => n.startsWith(`${k}.`)).map((n) => n.slice(k.length + 1))
    const pick = (v: unknown, keep: (sub: string) => boolean) =>
      Object.fromEntries(Object.entries(v as Record<string, unknown>).filter(([sk]) => keep(sk.toLowerCase())))
    const isObject = value !== null && typeof value === 'object' && !Array.isArray(value)
    let v: unknown = value
    if (wanted.length) {
      if (!wanted.includes(k)) {
        const some = subs(wanted)
        if (!some.length) continue
        if (isObject) v = pick(v, (sk) => some.includes(sk))
        // A sub-attribute of a multi-valued attribute selects the attribute (emails.value).
      }
    }
    if (unwanted.includes(k)) continue
    const dropped = subs(unwanted)
    if (dropped.length && isObject) v = pick(v, (sk) => !dropped.includes(sk))
    out[key] = v
  }
  return out
}

export type FilterAttributeType = 'string' | 'boolean' | 'dateTime'

/**
 * Attributes a filter may name, keyed by their lower-case spelling, with their RFC 7643 type and
 * case rule. `emails` alone means `emails.value` (RFC 7644 section 3.4.2.2).
 */
const FilterAttributes = {
  id: { name: 'id', type: 'string', caseExact: true },
  username: { name: 'userName', type: 'string', caseExact: false },
  externalid: { name: 'externalId', type: 'string', caseExact: true },
  displayname: { name: 'displayName', type: 'string', caseExact: false },
  'name.givenname': { name: 'name.givenName', type: 'string', caseExact: false },
  'name.familyname': { name: 'name.familyName', type: 'string', caseExact: false },
  'name.formatted': { name: 'name.formatted', type: 'string', caseExact: false },
  department: { name: 'department', type: 'string', caseExact: false },
  active: { name: 'active', type: 'boolean', caseExact: false },
  'meta.created': { name: 'meta.created', type: 'dateTime', caseExact: false },
  'meta.lastmodified': { name: 'meta.lastModified', type: 'dateTime', caseExact: false },
  emails: { name: 'emails.value', type: 'string', caseExact: false },
  'emails.value': { name: 'emails.value', type: 'string', caseExact: false },
  'emails.type': { name: 'emails.type', type: 'string', caseExact: false },
  'emails.primary': { name: 'emails.primary', type: 'boolean', caseExact: false },
} as const satisfies Record<string, { name: string; type: FilterAttributeType; caseExact: boolean }>
export type FilterAttribute = (typeof FilterAttributes)[keyof typeof FilterAttributes]['name']
export const filterAttributeOf = Object.fromEntries(Object.values(FilterAttributes).map((a) => [a.name, a])) as Record<
  FilterAttribute,
  { name: FilterAttribute; type: FilterAttributeType; caseExact: boolean }
>

export type CompareOp = 'eq' | 'ne' | 'co' | 'sw' | 'ew' | 'gt' | 'ge' | 'lt' | 'le'
export type UserFilter =
  | { op: 'and' | 'or'; filters: UserFilter[] }
  | { op: 'not'; filter: UserFilter }
  | { op: 'pr'; attribute: FilterAttribute }
  | { op: CompareOp; attribute: FilterAttribute; value: string | boolean }
  /** A value path, `emails[type eq "work" and value co "@x"]`: every condition on one address. */
  | { op: 'emails'; filter: UserFilter }

const invalidFilter = (detail: string) => scimError(400, detail, 'invalidFilter')
const CorePrefix = `${UserSchema.toLowerCase()}:`
const Operators: Record<FilterAttributeType, readonly CompareOp[]> = {
  string: ['eq', 'ne', 'co', 'sw', 'ew', 'gt', 'ge', 'lt', 'le'],
  boolean: ['eq', 'ne'],
  dateTime: ['eq', 'ne', 'gt', 'ge', 'lt', 'le'],
}
const supportedNames = [...new Set(Object.values(FilterAttributes).map((a) => a.name))].join(', ')

function attributeOf(attrPath: string, withinEmails: boolean) {
  const lower = withinEmails ? `emails.${attrPath.toLowerCase()}` : attributeKey(attrPath)
  const attribute = (FilterAttributes as Record<string, { name: FilterAttribute; type: FilterAttributeType }>)[lower]
  if (!attribute || (withinEmails && lower === 'emails.emails')) {
    throw invalidFilter(
      withinEmails ? `emails[...] filters on value, type and primary, not on ${attrPath}` : `filtering on ${attrPath} is not supported; use ${supportedNames}`,
    )
  }
  return attribute
}

/** A comparison value checked against the attribute's type; booleans may arrive as "true"/"false". */
function valueFor(attrPath: string, type: FilterAttributeType, op: CompareOp, value: unknown): string | boolean {
  if (!Operators[type].includes(op)) throw invalidFilter(`${attrPath} is a ${type}: ${op} does not apply; use ${Operators[type].join(', ')}`)
  if (type === 'boolean') {
    const b = typeof value === 'string' ? { true: true, false: false }[value.toLowerCase()] : value
    if (typeof b !== 'boolean') throw invalidFilter(`${attrPath} ${op} needs true or false`)
    return b
  }
  if (typeof value !== 'string') throw invalidFilter(`${attrPath} ${op} needs a quoted string value`)
  if (type === 'dateTime') {
    const t = Date.parse(value)
    if (Number.isNaN(t)) throw invalidFilter(`${attrPath} ${op} needs a date and time such as "2024-05-13T04:42:34Z"`)
    return new Date(t).toISOString()
  }
  return value
}

function toUserFilter(f: Filter, withinEmails = false): UserFilter {
  switch (f.op) {
    case 'and':
    case 'or':
      return { op: f.op, filters: f.filters.map((x) => toUserFilter(x, withinEmails)) }
    case 'not':
      return { op: 'not', filter: toUserFilter(f.filter, withinEmails) }
    case 'pr':
      return { op: 'pr', attribute: attributeOf(f.attrPath, withinEmails).name }
    case '[]':
      if (withinEmails || attributeKey(f.attrPath) !== 'emails') throw invalidFilter(`a [...] value filter applies to emails only, not to ${f.attrPath}`)
      return { op: 'emails', filter: toUserFilter(f.valFilter, true) }
    case 'eq':
    case 'ne':
    case 'co':
    case 'sw':
    case 'ew':
    case 'gt':
    case 'ge':
    case 'lt':
    case 'le': {
      const attribute = attributeOf(f.attrPath, withinEmails)
      return { op: f.op, attribute: attribute.name, value: valueFor(f.attrPath, attribute.type, f.op, f.compValue) }
    }
    default:
      throw invalidFilter(`operator ${(f as { op: string }).op} is not supported`)
  }
}

/**
 * What a filter (and a PATCH path's value filter) may be, checked before it is parsed: the parser
 * recurses once per parenthesis, `not (` or `[`, and a filter nested 20,000 deep overflowed the stack.
 */
export const ScimFilterLimits = { length: 4096, nesting: 32 } as const

/** Why a filter is over a limit (`what` names it: "filter", "path"), or undefined. */
export function filterBoundsProblem(text: string, what: string): string | undefined {
  if (text.length > ScimFilterLimits.length) {
    return `${what} is ${text.length.toLocaleString('en')} characters long; at most ${ScimFilterLimits.length.toLocaleString('en')} are allowed`
  }
  let depth = 0
  let deepest = 0
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (quoted) {
      if (c === '\\') i++
      else if (c === '"') quoted = false
    } else if (c === '"') quoted = true
    else if (c === '(' || c === '[') deepest = Math.max(deepest, ++depth)
    else if (c === ')' || c === ']') depth--
  }
  if (deepest > ScimFilterLimits.nesting) return `${what} nests parentheses and brackets ${deepest.toLocaleString('en')} deep; at most ${ScimFilterLimits.nesting} are allowed`
  return undefined
}

/**
 * A parser's syntax message, which helps the caller; anything else it might throw (a TypeError of
 * a parser bug, a RangeError) is the runtime's and is not quoted.
 */
export const parserMessage = (e: unknown) => (e instanceof Error && e.constructor === Error ? `: ${e.message}` : '')

/** Parses a SCIM filter (RFC 7644 section 3.4.2.2) into the subset this service can answer. */
export function parseUserFilter(text: string): UserFilter {
  const tooLarge = filterBoundsProblem(text, 'filter')
  if (tooLarge) throw invalidFilter(tooLarge)
  let ast: Filter
  try {
    ast = parse(text)
  } catch (e) {
    throw invalidFilter(`malformed filter ${JSON.stringify(text)}${parserMessage(e)}`)
  }
  return toUserFilter(ast)
}
