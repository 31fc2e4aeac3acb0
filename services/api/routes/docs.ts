import { createRequire } from 'node:module'
import path from 'node:path'
import express from 'express'
import type { ApiRoute, RouteFamily } from '../api-operation.js'

/** Swagger UI's files ship in the npm package, so the page works on a machine without internet. */
function swaggerUiDir(): string {
  return path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
}

// validatorUrl: null keeps Swagger UI from sending the document to an online validator.
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
  <script>
    window.ui = SwaggerUIBundle({
      url: '/openapi.json',
      dom_id: '#swagger-ui',
      deepLinking: true,
      validatorUrl: null,
      presets: [SwaggerUIBundle.presets.apis],
      layout: 'BaseLayout',
    })
  </script>
</body>
</html>
`

/** The document of every route family, built on first request (app.ts). */
export interface DocsDeps {
  openApiDocument: () => object
}

const openApiJson: ApiRoute<DocsDeps> = {
  method: 'get',
  path: '/openapi.json',
  summary: 'This OpenAPI 3.1 document',
  auth: 'none',
  responses: { 200: 'the document' },
  handle: (_req, res, deps) => {
    res.json(deps.openApiDocument())
  },
}

const docsPage: ApiRoute<DocsDeps> = {
  method: 'get',
  path: '/docs',
  summary: 'Browsable API documentation (HTML)',
  auth: 'none',
  responses: { 200: 'an HTML page' },
  handle: (_req, res) => {
    res.type('html').send(DOCS_PAGE)
  },
}

/** GET /openapi.json and the /docs page with its assets. All public: they describe the interface, not data. */
export const docsRoutes: RouteFamily<DocsDeps> = {
  routes: [openApiJson, docsPage],
  rest: { path: '/docs/assets', auth: 'none', handler: () => express.static(swaggerUiDir(), { index: false }) },
}
