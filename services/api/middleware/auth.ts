import type { NextFunction, Request, Response } from 'express'
import { findApiKeyByHash, findScimTokenByHash, type ApiKeyRecord } from '../../../shared/db/repositories/credential-repository.js'
import type { Pool } from '../../../shared/db/pool.js'
import type { Permission } from '../../../shared/domain/permissions.js'
import { scimError } from '../../../shared/domain/scim.js'
import { ApiError } from '../../../shared/errors.js'
import { CoherentCache, MAX_REREADS, unsettled, type OperatorGeneration } from '../../../shared/operator-changes.js'
import { hashSecret, hashesEqual, secretsEqual } from '../../../shared/secrets.js'

export interface ApiAuth {
  workspaceId: string
  keyId: string
  permissions: ReadonlySet<string>
  /** The operator generation the key was read under: the rate limiter confirms it is still current. */
  generation: string
}

declare module 'express-serve-static-core' {
  interface Locals {
    auth?: ApiAuth
  }
}

export function bearerToken(req: Request): string | undefined {
  const h = req.headers.authorization
  if (!h) return undefined
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h)
  return m?.[1]
}

export const invalidApiKey = () => new ApiError(401, 'unauthorized', 'invalid API key')

interface CachedKey {
  record: ApiKeyRecord
  permissions: ReadonlySet<string>
}

/**
 * Looks API keys up by their SHA-256 hash in a per-process cache kept coherent with operator
 * changes (shared/operator-changes.ts). An accepted key is confirmed current by the rate limiter's
 * Redis call, which every API-key request makes anyway; a refusal, which makes no other Redis call,
 * is confirmed with one GET, so a key created a moment ago is not refused from an old miss.
 */
export class ApiKeyAuthenticator {
  private readonly cache: CoherentCache<CachedKey | undefined>

  constructor(
    pg: Pool,
    private readonly generation: OperatorGeneration,
  ) {
    this.cache = new CoherentCache(generation, async (hash) => {
      const record = await findApiKeyByHash(pg, Buffer.from(hash, 'base64'))
      return record && { record, permissions: new Set(record.permissions) }
    })
  }

  async authenticate(key: string): Promise<ApiAuth | undefined> {
    const hash = hashSecret(key)
    for (let attempt = 1; ; attempt++) {
      const { value, generation } = await this.cache.get(hash.toString('base64'))
      if (value && hashesEqual(value.record.key_hash, hash)) {
        return { workspaceId: value.record.workspace_id, keyId: value.record.id, permissions: value.permissions, generation }
      }
      if (await this.generation.isCurrent(generation)) return undefined
      if (attempt === MAX_REREADS) throw unsettled()
    }
  }
}

/** 401 without a valid key; sets `res.locals.auth` for the rate limiter and the permission check. */
export function authenticateApiKey(auth: ApiKeyAuthenticator) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const key = bearerToken(req)
    if (!key) return next(new ApiError(401, 'unauthorized', 'missing API key: send Authorization: Bearer <API_KEY>'))
    const found = await auth.authenticate(key)
    if (!found) return next(invalidApiKey())
    res.locals.auth = found
    next()
  }
}

export function requirePermission(permission: Permission) {
  return (_req: Request, res: Response, next: NextFunction) => {
    if (!res.locals.auth?.permissions.has(permission)) {
      return next(new ApiError(403, 'forbidden', `this API key lacks the permission ${permission}`))
    }
    next()
  }
}

/** Whether the request carries the operator's ADMIN_TOKEN as its bearer token, compared in constant time. */
export function hasAdminToken(req: Request, adminToken: string): boolean {
  const token = bearerToken(req)
  return token !== undefined && secretsEqual(token, adminToken)
}

/** The operator API's bearer token, compared in constant time. */
export function requireAdminToken(adminToken: string) {
  return (req: Request, _res: Response, next: NextFunction) => {
    if (!hasAdminToken(req, adminToken)) {
      return next(new ApiError(401, 'unauthorized', 'missing or wrong admin token'))
    }
    next()
  }
}

/** Bearer SCIM token (stored hashed) plus the `X-Request-Origin` it was issued for; refusals are SCIM errors. */
export function authenticateScim(db: Pool) {
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
