import type { Request, RequestHandler, Response } from 'express'
import type { z } from 'zod'
import type { Permission } from '../../shared/domain/permissions.js'

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete'

/** Who may call an operation: a workspace's API key, the operator's ADMIN_TOKEN, a SCIM token, or anyone. */
export type AuthKind = 'api_key' | 'admin' | 'scim' | 'none'

/**
 * One operation as documented: what openapi.ts reads. Its own module, so that routes never import
 * openapi.ts or the app, which import them.
 */
export interface ApiOperation {
  method: HttpMethod
  /** The Express pattern the route is registered with, e.g. `/admin/v1/workspaces/:ws`; also its metrics label. */
  path: string
  summary: string
  auth: AuthKind
  /** Checked after authentication and the rate limit (API-key routes only). */
  permission?: Permission
  /** Queues work: answers X-Request-Id and honours Idempotency-Key (operator.md section 5). */
  write?: boolean
  /** The zod schemas the handler parses with, so the document cannot drift from the validation. */
  body?: z.ZodType
  query?: z.ZodType
  /** Status code to description; 400, 401, 403 and 429 are added where the auth and inputs imply them. */
  responses: Record<number, string>
}

/**
 * One endpoint, declared once: its operation (mounted by mount.ts with the auth chain its `auth`,
 * `permission` and `write` imply, and documented by openapi.ts) and the handler answering it.
 * `D` is what the handler uses of the API's dependencies.
 */
export interface ApiRoute<D> extends ApiOperation {
  handle: (req: ApiRequest, res: Response, deps: D) => unknown
}

/** A request to a route: no path has a wildcard, so each path parameter is one string. */
export type ApiRequest = Request<Record<string, string>>

/** Routes sharing one auth kind, declared without repeating it. */
export function withAuth<D>(auth: AuthKind, routes: Omit<ApiRoute<D>, 'auth'>[]): ApiRoute<D>[] {
  return routes.map((route) => ({ ...route, auth }))
}

/**
 * A route family: the endpoints of one file under routes/, and what they use (`D`, a part of
 * ApiDeps). The app mounts each family as one router, in the order of app.ts.
 */
export interface RouteFamily<D> {
  routes: ApiRoute<D>[]
  /** The family's own check, in place of the service-wide one of its auth kind (the queue dashboard's session cookie). */
  ownAuth?: (deps: D) => RequestHandler
  /**
   * What the family answers under `path` besides its routes, after the auth of `auth`: static
   * files, an embedded app, its own 404. Without `handler` the request goes on to the next family,
   * so the prefix asks for credentials before telling which paths exist.
   */
  rest?: { path: string; auth: Exclude<AuthKind, 'api_key'>; handler?: (deps: D) => RequestHandler | RequestHandler[] }
}
