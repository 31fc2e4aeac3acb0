import { CompanyPermissions, Departments, ListResponseSchema, ScimBasePath, UserSchema, WorkspacePermissions } from './scim.js'

/**
 * The discovery documents of RFC 7644 section 4 (ServiceProviderConfig, ResourceTypes, Schemas),
 * describing exactly what /scim/v2 does: Users only, PATCH, filters, ETags; no Groups, bulk,
 * sorting or password change.
 */

export const ServiceProviderConfigSchema = 'urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig'
export const ResourceTypeSchema = 'urn:ietf:params:scim:schemas:core:2.0:ResourceType'
export const SchemaSchema = 'urn:ietf:params:scim:schemas:core:2.0:Schema'
export const MaxResults = 1000

type Mutability = 'readOnly' | 'readWrite' | 'immutable'
interface AttributeOptions {
  multiValued?: boolean
  required?: boolean
  caseExact?: boolean
  mutability?: Mutability
  returned?: 'always' | 'default'
  uniqueness?: 'none' | 'server'
  canonicalValues?: readonly string[]
  description: string
}

interface SchemaAttribute {
  name: string
  type: string
  subAttributes?: SchemaAttribute[]
  [characteristic: string]: unknown
}

function attribute(name: string, type: string, o: AttributeOptions, subAttributes?: SchemaAttribute[]): SchemaAttribute {
  return {
    name,
    type,
    multiValued: o.multiValued ?? false,
    description: o.description,
    required: o.required ?? false,
    ...(type === 'string' ? { caseExact: o.caseExact ?? false } : {}),
    ...(o.canonicalValues ? { canonicalValues: [...o.canonicalValues] } : {}),
    mutability: o.mutability ?? 'readWrite',
    returned: o.returned ?? 'default',
    uniqueness: o.uniqueness ?? 'none',
    ...(subAttributes ? { subAttributes } : {}),
  }
}

const text = (name: string, description: string, o: Partial<AttributeOptions> = {}) => attribute(name, 'string', { description, ...o })
const permissionList = (name: string, values: readonly string[], description: string) =>
  attribute(name, 'string', { multiValued: true, caseExact: true, canonicalValues: values, description })

/** The User resource as stored: the RFC 7643 attributes kept here plus the interface's own (department, lastSignInAt, permissions). */
const userAttributes = [
  text('id', 'Assigned by the service.', { caseExact: true, mutability: 'readOnly', returned: 'always', uniqueness: 'server' }),
  text('externalId', 'The identity provider\'s own id for the user.', { caseExact: true }),
  text('userName', 'An email address, unique case-insensitively; it cannot change after creation.', { required: true, mutability: 'immutable', uniqueness: 'server' }),
  attribute('name', 'complex', { required: true, description: 'The user\'s name; givenName and familyName are required.' }, [
    text('formatted', 'The full name for display.'),
    text('givenName', 'Given name.', { required: true }),
    text('familyName', 'Family name.', { required: true }),
  ]),
  text('displayName', 'The name shown for the user.'),
  attribute('active', 'boolean', { description: 'false: the account keeps its permissions but is refused dashboard access.' }),
  attribute('emails', 'complex', { multiValued: true, description: 'Email addresses; at most one is primary.' }, [
    text('value', 'The address.', { required: true }),
    text('type', 'A label such as work or home.'),
    attribute('primary', 'boolean', { description: 'The preferred address.' }),
  ]),
  text('department', 'The user\'s department.', { required: true, caseExact: true, canonicalValues: Departments }),
  attribute('lastSignInAt', 'dateTime', { mutability: 'readOnly', description: 'Last dashboard sign-in; always null (no dashboard sign-in yet).' }),
  attribute('permissions', 'complex', { required: true, description: 'Company-wide and per-workspace permissions.' }, [
    permissionList('companyPermissions', CompanyPermissions, 'Company-wide permissions.'),
    attribute('appGroup', 'complex', { multiValued: true, description: 'Permissions in one workspace, named by appGroupName.' }, [
      text('appGroupId', 'The workspace id.', { caseExact: true, mutability: 'readOnly' }),
      text('appGroupName', 'The workspace name, as the operator API created it.', { required: true, caseExact: true }),
      permissionList('appGroupPermissions', WorkspacePermissions, 'Permissions in the workspace.'),
      attribute('team', 'complex', { multiValued: true, description: 'Teams of the workspace.' }, [
        text('teamId', 'The team id, the same for every user naming the team.', { caseExact: true, mutability: 'readOnly' }),
        text('teamName', 'The team name.', { required: true, caseExact: true }),
        permissionList('teamPermissions', WorkspacePermissions, 'Permissions in the team.'),
      ]),
      attribute('appGroupPermissionSets', 'complex', { multiValued: true, description: 'Named permission sets.' }, [
        text('appGroupPermissionSetName', 'The permission set name.', { required: true, caseExact: true }),
      ]),
    ]),
  ]),
]

const meta = (resourceType: string, location: string) => ({ resourceType, location })

export function serviceProviderConfig(baseUrl: string) {
  return {
    schemas: [ServiceProviderConfigSchema],
    documentationUri: `${baseUrl}/docs`,
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
    filter: { supported: true, maxResults: MaxResults },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: true },
    authenticationSchemes: [
      {
        type: 'oauthbearertoken',
        name: 'SCIM token',
        description: 'Authorization: Bearer <SCIM token from the operator API>, with X-Request-Origin equal to the origin the token was issued for.',
        primary: true,
      },
    ],
    meta: meta('ServiceProviderConfig', `${baseUrl}${ScimBasePath}/ServiceProviderConfig`),
  }
}

export function userResourceType(baseUrl: string) {
  return {
    schemas: [ResourceTypeSchema],
    id: 'User',
    name: 'User',
    endpoint: '/Users',
    description: 'A company-wide dashboard user',
    schema: UserSchema,
    schemaExtensions: [],
    meta: meta('ResourceType', `${baseUrl}${ScimBasePath}/ResourceTypes/User`),
  }
}

export function userSchema(baseUrl: string) {
  return {
    schemas: [SchemaSchema],
    id: UserSchema,
    name: 'User',
    description: 'Dashboard user account',
    attributes: userAttributes,
    meta: meta('Schema', `${baseUrl}${ScimBasePath}/Schemas/${UserSchema}`),
  }
}

/** A ListResponse of every item: discovery lists are short and never paged. */
export function listOf<T>(items: T[]) {
  return { schemas: [ListResponseSchema], totalResults: items.length, startIndex: 1, itemsPerPage: items.length, Resources: items }
}
