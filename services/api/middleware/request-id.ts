import { randomUUID } from 'node:crypto'
import type { NextFunction, Request, Response } from 'express'

declare module 'express-serve-static-core' {
  interface Locals {
    requestId?: string
  }
}

/** Each write gets an id, returned as X-Request-Id and followed with GET /requests/{id}. */
export function assignRequestId(_req: Request, res: Response, next: NextFunction) {
  const id = randomUUID()
  res.locals.requestId = id
  res.setHeader('X-Request-Id', id)
  next()
}
