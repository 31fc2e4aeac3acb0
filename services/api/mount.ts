import { Router, type RequestHandler } from 'express'
import type { ApiOperation, ApiRequest, AuthKind, RouteFamily } from './api-operation.js'
import { requirePermission } from './middleware/auth.js'

/** The middleware the auth chains are made of, built once per app (app.ts). */
export interface AuthMiddleware {
  /** Sets `res.locals.auth` from the API key, or answers 401. */
  apiKey: RequestHandler
  /** The workspace's rate limit of the bucket the path belongs to (shared/domain/rate-limits.ts). */
  rateLimit: (path: string) => RequestHandler
  /** For writes: the request id, then Idempotency-Key handling. */
  write: RequestHandler[]
  /** The operator's ADMIN_TOKEN. */
  admin: RequestHandler
  /** A SCIM token with its request origin, then the company-wide SCIM rate limit. */
  scim: RequestHandler[]
}

/** The checks of the kinds that need nothing of the route itself. */
function kindChain(auth: Exclude<AuthKind, 'api_key'>, m: AuthMiddleware): RequestHandler[] {
  return { admin: [m.admin], scim: m.scim, none: [] }[auth]
}

/**
 * The middleware before a route's handler. An API-key route: authenticate, rate-limit the
 * workspace in the route's bucket, check the permission; a write also gets a request id and
 * Idempotency-Key handling.
 */
function routeChain(route: ApiOperation, m: AuthMiddleware): RequestHandler[] {
  if (route.auth !== 'api_key') return kindChain(route.auth, m)
  return [m.apiKey, m.rateLimit(route.path), ...(route.permission ? [requirePermission(route.permission)] : []), ...(route.write ? m.write : [])]
}

/** One family's router: each route behind the chain its declaration implies, then the family's `rest`. */
export function mountFamily<D>(family: RouteFamily<D>, deps: D, m: AuthMiddleware): Router {
  const r = Router()
  const own = family.ownAuth?.(deps)
  for (const route of family.routes) {
    const chain = own ? [own] : routeChain(route, m)
    r[route.method](route.path, ...chain, (req, res) => route.handle(req as ApiRequest, res, deps))
  }
  if (family.rest) {
    const { path, auth, handler } = family.rest
    r.use(path, ...(own ? [own] : kindChain(auth, m)), ...(handler ? [handler(deps)].flat() : []))
  }
  return r
}
