import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { createApp } from '../../../services/api/app.js'
import { apiDepsFrom } from '../../../services/api/deps.js'
import { buildOpenApiDocument, openApiPath } from '../../../services/api/openapi.js'
import { CreateSegment } from '../../../services/api/routes/admin.js'
import { ExportIdsBody } from '../../../services/api/routes/users-export-ids.js'
import { startTestEnv, type TestEnv } from '../../helpers/harness.js'

interface Layer {
  slash?: boolean
  route?: { path: string | string[]; methods: Record<string, boolean> }
  handle?: { stack?: Layer[] }
}

/**
 * Every (method, path) the Express 5 router serves, found by walking the router stacks. Routers
 * are mounted at the root (their routes carry full paths); a prefix would be invisible here.
 */
function routesOf(stack: Layer[]): string[] {
  return stack.flatMap((layer) => {
    if (layer.route) {
      const methods = Object.keys(layer.route.methods).filter((m) => m !== '_all')
      return [layer.route.path].flat().flatMap((p) => methods.map((m) => `${m.toUpperCase()} ${p}`))
    }
    if (!Array.isArray(layer.handle?.stack)) return []
    if (!layer.slash) throw new Error('a router is mounted under a path prefix: mount it at the root so its routes carry full paths')
    return routesOf(layer.handle.stack)
  })
}

function documentedRoutes(doc: { paths: Record<string, Record<string, unknown>> }): string[] {
  return Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`))
}

/** Every `$ref` in the document, each of which must name a component schema that exists. */
function refsOf(node: unknown): string[] {
  if (Array.isArray(node)) return node.flatMap(refsOf)
  if (node === null || typeof node !== 'object') return []
  return Object.entries(node).flatMap(([k, v]) => (k === '$ref' && typeof v === 'string' ? [v] : refsOf(v)))
}

function unresolvedRefs(doc: { components: { schemas: Record<string, unknown> } }): string[] {
  return refsOf(doc).filter((ref) => {
    const m = /^#\/components\/schemas\/([^/]+)$/.exec(ref)
    return !m || !(m[1] in doc.components.schemas)
  })
}

function inputSchemaOf(schema: z.ZodType) {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Record<string, unknown>
  return rest
}

describe('OpenAPI document', () => {
  let env: TestEnv
  let doc: any
  let routed: string[]

  beforeAll(async () => {
    env = await startTestEnv()
    const app = createApp(apiDepsFrom(env.ctx, env.metrics, env.adminToken))
    routed = routesOf(app.router.stack as Layer[]).map((r) => {
      const [method, p] = r.split(' ')
      return `${method} ${openApiPath(p)}`
    })
    const res = await fetch(`${env.baseUrl}/openapi.json`)
    expect(res.status).toBe(200)
    doc = await res.json()
  })

  afterAll(async () => {
    await env?.close()
  })

  it('is OpenAPI 3.1 and served without credentials', () => {
    expect(doc.openapi).toBe('3.1.0')
    expect(doc.info.title).toBe('userdata service')
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['adminToken', 'apiKey', 'scimToken'])
  })

  it('documents every route the router serves', () => {
    expect(routed.length).toBeGreaterThan(20)
    const documented = new Set(documentedRoutes(doc))
    const undocumented = routed.filter((r) => !documented.has(r))
    expect(undocumented, 'routes missing from the OpenAPI document: declare them in the route list of their family (services/api/api-operation.ts)').toEqual([])
  })

  it('documents no route the router does not serve', () => {
    const served = new Set(routed)
    expect(documentedRoutes(doc).filter((r) => !served.has(r))).toEqual([])
  })

  it('takes request bodies from the zod schemas the handlers validate with', () => {
    const exportIds = doc.paths['/users/export/ids'].post
    const exportIdsRef: string = exportIds.requestBody.content['application/json'].schema.$ref
    expect(doc.components.schemas[exportIdsRef.split('/').pop()!]).toEqual(inputSchemaOf(ExportIdsBody))
    expect(doc.components.schemas[exportIdsRef.split('/').pop()!].properties.fields_to_export.items.enum).toContain('external_id')

    const segment = doc.paths['/admin/v1/workspaces/{ws}/segments'].post
    const segmentRef: string = segment.requestBody.content['application/json'].schema.$ref
    expect(doc.components.schemas[segmentRef.split('/').pop()!]).toEqual(inputSchemaOf(CreateSegment))

    // /users/track describes each object, not just lists of anything.
    const trackRef: string = doc.paths['/users/track'].post.requestBody.content['application/json'].schema.$ref
    const track = doc.components.schemas[trackRef.split('/').pop()!].properties
    expect(track.attributes.items.properties.external_id).toEqual({ type: 'string', minLength: 1, maxLength: 512 })
    expect(track.events.items.required).toEqual(expect.arrayContaining(['name', 'time']))
    expect(track.purchases.items.required).toEqual(expect.arrayContaining(['product_id', 'currency', 'price', 'time']))
  })

  it('describes auth, permissions, path parameters and the queued-write headers', () => {
    const track = doc.paths['/users/track'].post
    expect(track.security).toEqual([{ apiKey: [] }])
    expect(track.description).toContain('users.track')
    expect(Object.keys(track.responses)).toEqual(expect.arrayContaining(['201', '400', '401', '403', '429']))
    expect(track.responses['201'].headers['X-Request-Id']).toBeDefined()
    expect(track.parameters.map((p: { name: string }) => p.name)).toContain('Idempotency-Key')

    const segment = doc.paths['/admin/v1/workspaces/{ws}/segments/{id}'].get
    expect(segment.security).toEqual([{ adminToken: [] }])
    expect(segment.parameters.filter((p: { in: string }) => p.in === 'path').map((p: { name: string }) => p.name)).toEqual(['ws', 'id'])

    expect(doc.paths['/healthz'].get.security).toBeUndefined()
  })

  it('resolves every schema reference inside the document', () => {
    expect(unresolvedRefs(doc)).toEqual([])
  })

  it('moves the definitions of recursive schemas into components', () => {
    type Tree = { name: string; children: Tree[] }
    const Tree: z.ZodType<Tree> = z.lazy(() => z.object({ name: z.string(), children: z.array(Tree) }))
    const built = buildOpenApiDocument({
      publicUrl: 'http://example.test',
      operations: [
        { method: 'post', path: '/trees', summary: 'a tree', auth: 'none', body: z.object({ left: Tree, right: Tree }), responses: { 201: 'made' } },
        { method: 'put', path: '/trees/:id', summary: 'a tree again', auth: 'none', body: Tree, responses: { 200: 'replaced' } },
      ],
    })
    expect(unresolvedRefs(built)).toEqual([])
    expect(Object.keys(built.components.schemas)).toEqual(expect.arrayContaining(['PostTreesBody', 'PutTreesIdBody']))
  })
})
