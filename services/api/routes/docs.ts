import { createRequire } from 'node:module'
import path from 'node:path'
import express, { Router } from 'express'
import type { ApiOperation } from '../api-operation.js'

export const openapi: ApiOperation[] = [
  { method: 'get', path: '/openapi.json', summary: 'This OpenAPI 3.1 document', auth: 'none', responses: { 200: 'the document' } },
  { method: 'get', path: '/docs', summary: 'Browsable API documentation (HTML)', auth: 'none', responses: { 200: 'an HTML page' } },
]

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

/**
 * GET /openapi.json and the /docs page. Both are public: they describe the interface, not data.
 * The document is built on first request, from the operations the route families declare.
 */
export function docsRoutes(document: () => object): Router {
  const r = Router()
  let built: object | undefined
  r.get('/openapi.json', (_req, res) => {
    built ??= document()
    res.json(built)
  })
  r.get('/docs', (_req, res) => {
    res.type('html').send(DOCS_PAGE)
  })
  r.use('/docs/assets', express.static(swaggerUiDir(), { index: false }))
  return r
}
