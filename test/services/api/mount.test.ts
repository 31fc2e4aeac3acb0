import type { AddressInfo } from 'node:net'
import express, { type RequestHandler } from 'express'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ApiRoute, RouteFamily } from '../../../services/api/api-operation.js'
import { apiOperations } from '../../../services/api/app.js'
import { mountFamily, type AuthMiddleware } from '../../../services/api/mount.js'
import { RateLimitedPaths } from '../../../shared/domain/rate-limits.js'
import { request } from '../../helpers/harness.js'

/** Each piece of the auth chain notes its name on the request, so the order it ran in is read back. */
function recording(name: string): RequestHandler {
  return (_req, res, next) => {
    res.locals.ran = [...((res.locals.ran as string[] | undefined) ?? []), name]
    if (name === 'apiKey') res.locals.auth = { workspaceId: 'ws', keyId: 'k', permissions: new Set(['users.track']), generation: '' }
    next()
  }
}

const auth: AuthMiddleware = {
  apiKey: recording('apiKey'),
  rateLimit: (path) => recording(`rateLimit ${path}`),
  write: [recording('requestId'), recording('idempotency')],
  admin: recording('admin'),
  scim: [recording('scimToken'), recording('scimLimit')],
}

const answer: ApiRoute<{ tag: string }>['handle'] = (req, res, deps) => {
  res.json({ ran: res.locals.ran ?? [], tag: deps.tag, params: req.params })
}

const family: RouteFamily<{ tag: string }> = {
  routes: [
    { method: 'post', path: '/track', summary: '', auth: 'api_key', permission: 'users.track', write: true, responses: {}, handle: answer },
    { method: 'post', path: '/merge', summary: '', auth: 'api_key', permission: 'users.merge', write: true, responses: {}, handle: answer },
    { method: 'get', path: '/requests/:id', summary: '', auth: 'api_key', responses: {}, handle: answer },
    { method: 'get', path: '/op/things/:id', summary: '', auth: 'admin', responses: {}, handle: answer },
    { method: 'get', path: '/scim/Users', summary: '', auth: 'scim', responses: {}, handle: answer },
    { method: 'get', path: '/open', summary: '', auth: 'none', responses: {}, handle: answer },
  ],
  rest: { path: '/op', auth: 'admin', handler: () => (_req, res) => void res.status(404).json({ ran: res.locals.ran }) },
}

describe('mountFamily', () => {
  let server: ReturnType<ReturnType<typeof express>['listen']>
  let baseUrl: string

  beforeAll(async () => {
    const app = express().use(mountFamily(family, { tag: 'deps' }, auth))
    app.use((err: { status?: number; message: string }, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(err.status ?? 500).json({ message: err.message, ran: res.locals.ran })
    })
    server = app.listen(0, '127.0.0.1')
    await new Promise<void>((r) => server.once('listening', () => r()))
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()))
  })

  it('puts each route behind the chain its auth, permission and write imply, then hands the handler its deps', async () => {
    const track = await request(baseUrl, 'POST', '/track')
    expect(track.status).toBe(200)
    expect(track.body).toEqual({ ran: ['apiKey', 'rateLimit /track', 'requestId', 'idempotency'], tag: 'deps', params: {} })

    const progress = await request(baseUrl, 'GET', '/requests/r1')
    expect(progress.body).toEqual({ ran: ['apiKey', 'rateLimit /requests/:id'], tag: 'deps', params: { id: 'r1' } })

    expect((await request(baseUrl, 'GET', '/op/things/7')).body.ran).toEqual(['admin'])
    expect((await request(baseUrl, 'GET', '/scim/Users')).body.ran).toEqual(['scimToken', 'scimLimit'])
    expect((await request(baseUrl, 'GET', '/open')).body.ran).toEqual([])
  })

  it('checks the permission after the rate limit and before the write handling', async () => {
    const merge = await request(baseUrl, 'POST', '/merge')
    expect(merge.status).toBe(403)
    expect(merge.body).toEqual({ message: 'this API key lacks the permission users.merge', ran: ['apiKey', 'rateLimit /merge'] })
  })

  it('answers the rest of its prefix after the auth of the rest', async () => {
    const other = await request(baseUrl, 'GET', '/op/nothing-here')
    expect(other.status).toBe(404)
    expect(other.body).toEqual({ ran: ['admin'] })
  })
})

describe('the route tables', () => {
  it('name every path a rate-limit bucket lists, as an API-key route', () => {
    const apiKeyPaths = new Set(apiOperations().filter((op) => op.auth === 'api_key').map((op) => op.path))
    expect(RateLimitedPaths.filter((p) => !apiKeyPaths.has(p))).toEqual([])
  })
})
