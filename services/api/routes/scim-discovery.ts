import { Router, type Request, type Response } from 'express'
import { ScimBasePath, ScimContentType, UserSchema, scimError } from '../../../shared/domain/scim.js'
import { listOf, serviceProviderConfig, userResourceType, userSchema } from '../../../shared/domain/scim-schema.js'
import type { ApiOperation } from '../api-operation.js'

const scim = (op: Omit<ApiOperation, 'auth'>): ApiOperation => ({ ...op, auth: 'scim' })

export const openapi: ApiOperation[] = [
  scim({ method: 'get', path: '/scim/v2/ServiceProviderConfig', summary: 'What this SCIM service supports (RFC 7644 section 4)', responses: { 200: 'the ServiceProviderConfig', 403: 'a filter was sent' } }),
  scim({ method: 'get', path: '/scim/v2/ResourceTypes', summary: 'The SCIM resource types: User only', responses: { 200: 'a ListResponse of ResourceType' } }),
  scim({ method: 'get', path: '/scim/v2/ResourceTypes/:id', summary: 'One SCIM resource type', responses: { 200: 'the ResourceType', 404: 'unknown resource type' } }),
  scim({ method: 'get', path: '/scim/v2/Schemas', summary: 'The SCIM schemas: the User schema as stored here', responses: { 200: 'a ListResponse of Schema' } }),
  scim({ method: 'get', path: '/scim/v2/Schemas/:id', summary: 'One SCIM schema by its URN', responses: { 200: 'the Schema', 404: 'unknown schema' } }),
]

const send = (res: Response, body: unknown) => res.status(200).type(ScimContentType).json(body)

/**
 * RFC 7644 section 4: a filter on /ServiceProviderConfig is answered 403, so that no client takes
 * its conditions for true. The two discovery lists are short and not filterable either.
 */
function refuseFilter(req: Request, status: 400 | 403) {
  if (req.query.filter === undefined) return
  throw status === 403
    ? scimError(403, 'the ServiceProviderConfig cannot be filtered')
    : scimError(400, `${req.path.split('/').pop()} cannot be filtered: the list is read whole`, 'invalidFilter')
}

/** RFC 7644 section 4 discovery, mounted by scimUserRoutes behind its SCIM authentication and limit. */
export function scimDiscoveryRoutes(baseUrl: string): Router {
  const r = Router()
  r.get(`${ScimBasePath}/ServiceProviderConfig`, (req, res) => {
    refuseFilter(req, 403)
    send(res, serviceProviderConfig(baseUrl))
  })
  r.get(`${ScimBasePath}/ResourceTypes`, (req, res) => {
    refuseFilter(req, 400)
    send(res, listOf([userResourceType(baseUrl)]))
  })
  r.get(`${ScimBasePath}/ResourceTypes/:id`, (req, res) => {
    if (req.params.id !== 'User') throw scimError(404, `unknown resource type ${JSON.stringify(req.params.id)}: this service has User only`)
    send(res, userResourceType(baseUrl))
  })
  r.get(`${ScimBasePath}/Schemas`, (req, res) => {
    refuseFilter(req, 400)
    send(res, listOf([userSchema(baseUrl)]))
  })
  r.get(`${ScimBasePath}/Schemas/:id`, (req, res) => {
    // Schema URNs are compared case-insensitively (RFC 7643 section 2.1).
    if (req.params.id.toLowerCase() !== UserSchema.toLowerCase()) throw scimError(404, `unknown schema ${JSON.stringify(req.params.id)}: this service has ${UserSchema} only`)
    send(res, userSchema(baseUrl))
  })
  return r
}
