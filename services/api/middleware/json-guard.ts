import type { NextFunction, Request, Response } from 'express'
import { ApiError } from '../../../shared/errors.js'
import { jsonProblem } from '../validation.js'

/**
 * Refuses, for every endpoint at once, JSON that no field rule should have to think of: NUL
 * characters and unpaired surrogates (Postgres stores neither) and nesting too deep for recursive
 * code. /users/track checks this per object instead, so that one bad object spares the others.
 */
export function guardJsonBody(req: Request, _res: Response, next: NextFunction) {
  if (req.body === undefined || req.path === '/users/track') return next()
  const problem = jsonProblem(req.body)
  if (!problem) return next()
  const message = `${problem.path.length ? problem.path.map(String).join('.') : 'body'}: ${problem.message}`
  next(new ApiError(400, 'bad_request', message, { errors: [message] }))
}
