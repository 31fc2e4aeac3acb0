import type { Request, Response } from 'express'
import { ScimBasePath, ScimContentType, UserSchema, scimError } from '../../../shared/domain/scim.js'
import { listOf, serviceProviderConfig, userResourceType, userSchema } from '../../../shared/domain/scim-schema.js'
import type { Config } from '../../../shared/config.js'
import { withAuth, type ApiRoute } from '../api-operation.js'

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

/** The discovery documents name the service's public URL. */
export type DiscoveryDeps = { config: Pick<Config, 'PUBLIC_URL'> }

/** RFC 7644 section 4 discovery, part of the SCIM family (scim-users.ts) behind its authentication and limit. */
export const scimDiscoveryRoutes: ApiRoute<DiscoveryDeps>[] = withAuth<DiscoveryDeps>('scim', [
  {
    method: 'get',
    path: `${ScimBasePath}/ServiceProviderConfig`,
    summary: 'What this SCIM service supports (RFC 7644 section 4)',
    responses: { 200: 'the ServiceProviderConfig', 403: 'a filter was sent' },
    handle: (req, res, deps) => {
      refuseFilter(req, 403)
      send(res, serviceProviderConfig(deps.config.PUBLIC_URL))
    },
  },
  {
    method: 'get',
    path: `${ScimBasePath}/ResourceTypes`,
    summary: 'The SCIM resource types: User only',
    responses: { 200: 'a ListResponse of ResourceType' },
    handle: (req, res, deps) => {
      refuseFilter(req, 400)
      send(res, listOf([userResourceType(deps.config.PUBLIC_URL)]))
    },
  },
  {
    method: 'get',
    path: `${ScimBasePath}/ResourceTypes/:id`,
    summary: 'One SCIM resource type',
    responses: { 200: 'the ResourceType', 404: 'unknown resource type' },
    handle: (req, res, deps) => {
      if (req.params.id !== 'User') throw scimError(404, `unknown resource type ${JSON.stringify(req.params.id)}: this service has User only`)
      send(res, userResourceType(deps.config.PUBLIC_URL))
    },
  },
  {
    method: 'get',
    path: `${ScimBasePath}/Schemas`,
    summary: 'The SCIM schemas: the User schema as stored here',
    responses: { 200: 'a ListResponse of Schema' },
    handle: (req, res, deps) => {
      refuseFilter(req, 400)
      send(res, listOf([userSchema(deps.config.PUBLIC_URL)]))
    },
  },
  {
    method: 'get',
    path: `${ScimBasePath}/Schemas/:id`,
    summary: 'One SCIM schema by its URN',
    responses: { 200: 'the Schema', 404: 'unknown schema' },
    handle: (req, res, deps) => {
      // Schema URNs are compared case-insensitively (RFC 7643 section 2.1).
      if (req.params.id.toLowerCase() !== UserSchema.toLowerCase()) throw scimError(404, `unknown schema ${JSON.stringify(req.params.id)}: this service has ${UserSchema} only`)
      send(res, userSchema(deps.config.PUBLIC_URL))
    },
  },
])
