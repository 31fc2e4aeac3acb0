import type { NextFunction, Request, Response } from 'express'
import { findApiKeyByHash, type ApiKeyRecord } from '../../../shared/db/repositories/credential-repository.js'
import type { Pool } from '../../../shared/db/pool.js'
import type { Permission } from '../../../shared/domain/permissions.js'
import { ApiError } from '../../../shared/errors.js'
import { hashSecret, hashesEqual, secretsEqual } from '../../../shared/secrets.js'

export interface ApiAuth {
  workspaceId: string
  keyId: string
  permissions: Set<string>
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

const CACHE_MS = 1000

/**
 * Looks API keys up by their SHA-256 hash, cached for one second so that a revoked key stops
 * working within a second while a busy key costs one database read a second.
 */
export class ApiKeyAuthenticator {
  private readonly cache = new Map<string, { at: number; record: ApiKeyRecord | undefined }>()

  constructor(private readonly pg: Pool) {}

  async authenticate(key: string): Promise<ApiAuth | undefined> {
    const hash = hashSecret(key)
    const cacheKey = hash.toString('base64')
    const now = Date.now()
    let hit = this.cache.get(cacheKey)
    if (!hit || now - hit.at > CACHE_MS) {
      hit = { at: now, record: await findApiKeyByHash(this.pg, hash) }
      if (this.cache.size > 10_000) this.cache.clear()
      this.cache.set(cacheKey, hit)
    }
    const r = hit.record
    if (!r || !hashesEqual(r.key_hash, hash)) return undefined
    return { workspaceId: r.workspace_id, keyId: r.id, permissions: new Set(r.permissions) }
  }
}

/** 401 without a valid key; sets `res.locals.auth` for the rate limiter and the permission check. */
export function authenticateApiKey(auth: ApiKeyAuthenticator) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const key = bearerToken(req)
    if (!key) return next(new ApiError(401, 'unauthorized', 'missing API key: send Authorization: Bearer <API_KEY>'))
    const found = await auth.authenticate(key)
    if (!found) return next(new ApiError(401, 'unauthorized', 'invalid API key'))
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

/** The operator API's bearer token, compared in constant time. */
export function requireAdminToken(adminToken: string) {
  return (req: Request, _res: Response, next: NextFunction) => {
    const token = bearerToken(req)
    if (!token || !secretsEqual(token, adminToken)) {
      return next(new ApiError(401, 'unauthorized', 'missing or wrong admin token'))
    }
    next()
  }
}
