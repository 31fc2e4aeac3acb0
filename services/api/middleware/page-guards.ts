import type { NextFunction, Request, RequestHandler, Response } from 'express'
import { ApiError } from '../../../shared/errors.js'

/**
 * The headers of an HTML page the service serves (the queue dashboard, the API docs): no framing
 * by another site (clickjacking of the dashboard's retry and clean buttons), no content sniffing,
 * no Referer leaving the origin, and a Content-Security-Policy of the page's own scripts and
 * styles. `scriptSrc` and `connectSrc` add to 'self' what a page needs (an inline script's hash).
 */
export function pageHeaders(opts: { scriptSrc?: string[]; connectSrc?: string[] } = {}): RequestHandler {
  const csp = [
    "default-src 'self'",
    `script-src ${["'self'", ...(opts.scriptSrc ?? [])].join(' ')}`,
    // Both pages' React code and their loading screens set inline styles.
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    `connect-src ${["'self'", ...(opts.connectSrc ?? [])].join(' ')}`,
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ')
  return (_req: Request, res: Response, next: NextFunction) => {
    res.setHeader('Content-Security-Policy', csp)
    res.setHeader('X-Frame-Options', 'DENY')
    res.setHeader('X-Content-Type-Options', 'nosniff')
    // same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` on its own
    // same-origin POSTs, which requireSameOrigin would refuse.
    res.setHeader('Referrer-Policy', 'same-origin')
    next()
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

function originOf(url: string | undefined): string | undefined {
  if (!url) return undefined
  try {
    return new URL(url).origin
  } catch {
    return 'invalid'
  }
}

/**
 * Writes (anything but GET, HEAD, OPTIONS) must come from the service's own pages: `Origin`, or
 * `Referer` where a browser sent no Origin, must be PUBLIC_URL's origin. A request with neither
 * is no browser's (browsers send Origin on every cross-origin and every non-GET fetch), so it may
 * pass when `viaBearer` says it carried the token itself rather than a cookie a browser attaches
 * on its own.
 */
export function requireSameOrigin(publicUrl: string, viaBearer: (req: Request) => boolean): RequestHandler {
  const expected = new URL(publicUrl).origin
  return (req: Request, _res: Response, next: NextFunction) => {
    if (SAFE_METHODS.has(req.method)) return next()
    const origin = req.headers.origin
    const claimed = origin !== undefined ? origin : originOf(req.headers.referer)
    if (claimed === expected) return next()
    if (claimed === undefined && viaBearer(req)) return next()
    const what = origin !== undefined ? `Origin ${origin}` : claimed !== undefined ? `a Referer from ${claimed}` : 'neither Origin nor Referer'
    next(new ApiError(403, 'cross_origin', `a ${req.method} here must come from ${expected} (PUBLIC_URL); this request has ${what}`))
  }
}
