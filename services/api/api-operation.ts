import type { z } from 'zod'
import type { Permission } from '../../shared/domain/permissions.js'

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete'

/** Who may call an operation: a workspace's API key, the operator's ADMIN_TOKEN, a SCIM token, or anyone. */
export type AuthKind = 'api_key' | 'admin' | 'scim' | 'none'

/**
 * One documented operation. Each route family exports a list of these (`export const openapi`)
 * beside its handlers, naming the very zod schemas the handlers parse with, so the document
 * cannot drift from the validation. Its own module, so that routes never import openapi.ts,
 * which imports them.
 */
export interface ApiOperation {
  method: HttpMethod
  /** The Express pattern the router registers, e.g. `/admin/v1/workspaces/:ws`. */
  path: string
  summary: string
  auth: AuthKind
  permission?: Permission
  /** Queues work: answers X-Request-Id and honours Idempotency-Key (operator.md section 5). */
  write?: boolean
  body?: z.ZodType
  query?: z.ZodType
  /** Status code to description; 400, 401, 403 and 429 are added where the auth and inputs imply them. */
  responses: Record<number, string>
}
