import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import path from 'node:path'
import express, { type RequestHandler } from 'express'
import type { Config } from '../../../shared/config.js'
import type { ApiRoute, RouteFamily } from '../api-operation.js'
import { pageHeaders } from '../middleware/page-guards.js'

/** Swagger UI's files ship in the npm package, so the page works on a machine without internet. */
function swaggerUiDir(): string {
  return path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
}

// validatorUrl: null keeps Swagger UI from sending the document to an online validator.
const INIT_SCRIPT = `
    window.ui = SwaggerUIBundle({
      url: '/openapi.json',
      dom_id: '#swagger-ui',
      deepLinking: true,
      validatorUrl: null,
      presets: [SwaggerUIBundle.presets.apis],
      layout: 'BaseLayout',
    })
  `

const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>userdata service API</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script>${INIT_SCRIPT}</script>
</body>
</html>
`

/** The page's one inline script is allowed by its hash, so the policy needs no 'unsafe-inline' for scripts. */
const INIT_SCRIPT_HASH = `'sha256-${createHash('sha256').update(INIT_SCRIPT).digest('base64')}'`

/** The document of every route family, built on first request (app.ts). */
export interface DocsDeps {
  openApiDocument: () => object
}

/** "Try it out" sends requests to the document's server, PUBLIC_URL, which may be another origin than the page's. */
type DocsPageDeps = DocsDeps & { config: Pick<Config, 'PUBLIC_URL'> }

const openApiJson: ApiRoute<DocsPageDeps> = {
  method: 'get',
  path: '/openapi.json',
  summary: 'This OpenAPI 3.1 document',
  auth: 'none',
  responses: { 200: 'the document' },
  handle: (_req, res, deps) => {
    res.json(deps.openApiDocument())
  },
}

/** The page's headers: its own assets, its inline script by hash, requests to PUBLIC_URL. */
const pagePolicy = (deps: DocsPageDeps): RequestHandler =>
  pageHeaders({ scriptSrc: [INIT_SCRIPT_HASH], connectSrc: [new URL(deps.config.PUBLIC_URL).origin] })

const docsPage: ApiRoute<DocsPageDeps> = {
  method: 'get',
  path: '/docs',
  summary: 'Browsable API documentation (HTML)',
  auth: 'none',
  responses: { 200: 'an HTML page' },
  handle: (req, res, deps) => {
    pagePolicy(deps)(req, res, () => res.type('html').send(DOCS_PAGE))
  },
}

/** GET /openapi.json and the /docs page with its assets. All public: they describe the interface, not data. */
export const docsRoutes: RouteFamily<DocsPageDeps> = {
  routes: [openApiJson, docsPage],
  rest: { path: '/docs/assets', auth: 'none', handler: (deps) => [pagePolicy(deps), express.static(swaggerUiDir(), { index: false })] },
}
