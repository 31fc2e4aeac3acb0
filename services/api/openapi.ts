import { z } from 'zod'
import type { ApiOperation, AuthKind } from './api-operation.js'

type JsonSchema = Record<string, unknown>

const ErrorBody = z.object({ message: z.string(), errors: z.array(z.unknown()).optional() })

const SecuritySchemeOf: Record<Exclude<AuthKind, 'none'>, string> = { api_key: 'apiKey', admin: 'adminToken', scim: 'scimToken' }

const TagOf: Record<AuthKind, string> = { api_key: 'REST API', admin: 'Operator API', scim: 'SCIM', none: 'Service' }

/** `/admin/v1/workspaces/:ws` -> `/admin/v1/workspaces/{ws}`. */
export function openApiPath(expressPath: string): string {
  return expressPath.replace(/:(\w+)/g, '{$1}')
}

function pathParameters(expressPath: string) {
  return [...expressPath.matchAll(/:(\w+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }))
}

function operationId(op: ApiOperation): string {
  const words = op.path.split(/[^A-Za-z0-9]+/).filter(Boolean)
  return op.method + words.map((w) => w[0].toUpperCase() + w.slice(1)).join('')
}

/** Input-side JSON Schema (what a caller sends); refinements zod cannot express become `{}`. */
function jsonSchemaOf(schema: z.ZodType): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io: 'input',
    unrepresentable: 'any',
    cycles: 'ref',
  }) as JsonSchema
  return rest
}

/**
 * Rewrites a schema's local `$ref`s (`#` and `#/$defs/x`) to component schemas, since inside
 * the OpenAPI document `#` is the document itself.
 */
function rehomeRefs(node: unknown, name: string): unknown {
  if (Array.isArray(node)) return node.map((n) => rehomeRefs(n, name))
  if (node === null || typeof node !== 'object') return node
  return Object.fromEntries(
    Object.entries(node).map(([k, v]) => {
      if (k !== '$ref' || typeof v !== 'string') return [k, rehomeRefs(v, name)]
      if (v === '#') return [k, `#/components/schemas/${name}`]
      return [k, v.replace(/^#\/\$defs\//, `#/components/schemas/${name}_`)]
    }),
  )
}

/** Adds a named component schema (and the definitions it needs) and answers a reference to it. */
function addComponent(components: Record<string, JsonSchema>, name: string, schema: z.ZodType): JsonSchema {
  const { $defs, ...root } = jsonSchemaOf(schema) as JsonSchema & { $defs?: Record<string, JsonSchema> }
  components[name] = rehomeRefs(root, name) as JsonSchema
  for (const [defName, def] of Object.entries($defs ?? {})) components[`${name}_${defName}`] = rehomeRefs(def, name) as JsonSchema
  return { $ref: `#/components/schemas/${name}` }
}

function queryParameters(query: z.ZodType) {
  const schema = jsonSchemaOf(query) as { properties?: Record<string, JsonSchema>; required?: string[] }
  return Object.entries(schema.properties ?? {}).map(([name, s]) => ({
    name,
    in: 'query',
    required: schema.required?.includes(name) ?? false,
    schema: s,
  }))
}

/** The responses an operation declares, plus the refusals its auth and inputs make possible. */
function responsesOf(op: ApiOperation) {
  const implied: [number, string | false | undefined][] = [
    [400, (op.body || op.query) && 'invalid input: `message` names the field'],
    [401, op.auth !== 'none' && 'missing or wrong credentials'],
    [403, op.permission && `the API key lacks the permission ${op.permission}`],
    [429, op.auth === 'api_key' && 'rate limit of the workspace exceeded'],
  ]
  const all = { ...Object.fromEntries(implied.filter(([, d]) => d)), ...op.responses }
  return Object.fromEntries(
    Object.entries(all).map(([status, description]) => {
      const failure = Number(status) >= 400
      const requestIdHeader = op.write && !failure ? { headers: { 'X-Request-Id': { description: 'follow with GET /requests/{id}', schema: { type: 'string' } } } } : {}
      // SCIM answers its own error shape (RFC 7644), described by the SCIM schemas, not ours.
      const errorBody = failure && op.auth !== 'scim' ? { content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } } : {}
      return [status, { description, ...requestIdHeader, ...errorBody }]
    }),
  )
}

function headerParameters(op: ApiOperation) {
  return [
    ...(op.write ? [{ name: 'Idempotency-Key', in: 'header', required: false, description: 'repeat a write safely for 24 hours', schema: { type: 'string' } }] : []),
    ...(op.auth === 'scim' ? [{ name: 'X-Request-Origin', in: 'header', required: true, description: 'the request_origin of the SCIM token', schema: { type: 'string' } }] : []),
  ]
}

function operationObject(op: ApiOperation, components: Record<string, JsonSchema>) {
  const id = operationId(op)
  const parameters = [...pathParameters(op.path), ...(op.query ? queryParameters(op.query) : []), ...headerParameters(op)]
  return {
    operationId: id,
    summary: op.summary,
    tags: [TagOf[op.auth]],
    ...(op.permission && { description: `Permission: \`${op.permission}\`` }),
    ...(op.auth !== 'none' && { security: [{ [SecuritySchemeOf[op.auth]]: [] }] }),
    ...(parameters.length && { parameters }),
    ...(op.body && {
      requestBody: {
        required: true,
        content: { 'application/json': { schema: addComponent(components, `${id[0].toUpperCase()}${id.slice(1)}Body`, op.body) } },
      },
    }),
    responses: responsesOf(op),
  }
}

/** The OpenAPI 3.1 document of the given operations, served at /openapi.json. */
export function buildOpenApiDocument(opts: { publicUrl: string; operations: ApiOperation[] }) {
  const components: Record<string, JsonSchema> = {}
  addComponent(components, 'Error', ErrorBody)
  const paths: Record<string, Record<string, unknown>> = {}
  for (const op of opts.operations) {
    const p = openApiPath(op.path)
    paths[p] ??= {}
    if (paths[p][op.method]) throw new Error(`${op.method.toUpperCase()} ${op.path} is documented twice`)
    paths[p][op.method] = operationObject(op, components)
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'userdata service',
      version: '1',
      description: 'Customer-engagement data API: the REST API of interface.md, the operator API and SCIM of operator.md.',
    },
    servers: [{ url: opts.publicUrl }],
    tags: Object.values(TagOf).map((name) => ({ name })),
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key of the workspace' },
        adminToken: { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN of the deployment' },
        scimToken: { type: 'http', scheme: 'bearer', description: 'A SCIM token; send X-Request-Origin too' },
      },
    },
  }
}
