import { expect } from 'vitest'
import { request, type HttpResult } from './harness.js'

export const SCIM_ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error'

/**
 * A SCIM caller as an identity provider calls: the SCIM token, `X-Request-Origin`, and the SCIM
 * media type on bodies. `target` is read at each call (test files set it up in beforeAll).
 */
export function scimCaller(target: () => { baseUrl: string; token: string; origin: string }) {
  return (method: string, path: string, opts: { body?: unknown; headers?: Record<string, string> } = {}): Promise<HttpResult> => {
    const { baseUrl, token, origin } = target()
    return request(baseUrl, method, path, {
      token,
      body: opts.body,
      headers: { 'x-request-origin': origin, ...(opts.body !== undefined ? { 'content-type': 'application/scim+json' } : {}), ...opts.headers },
    })
  }
}

/** A SCIM error body (RFC 7644 section 3.12) of that status and scimType, in the SCIM media type. */
export function expectScimError(r: HttpResult, status: number, scimType?: string): void {
  expect(r.status, r.text).toBe(status)
  expect(r.headers.get('content-type')).toMatch(/^application\/scim\+json/)
  expect(r.body).toMatchObject({ schemas: [SCIM_ERROR_SCHEMA], status, detail: expect.any(String) })
  expect(r.body.scimType).toBe(scimType)
}
