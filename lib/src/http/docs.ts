// GET /docs: Swagger UI over /openapi.json with every asset served from this process (deployments may have no
// internet, so no CDN). The page loads no inline script, so a strict Content-Security-Policy holds.
import express, { type Express } from 'express';
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
// Only the assets' folder: the package's main module evaluates Swagger UI's 1.4 MB browser bundle in this process.
import getAbsoluteFSPath from 'swagger-ui-dist/absolute-path.js';
import { defineRoute, type RouteDefinition } from './routes.js';

const assetFiles = ['swagger-ui.css', 'swagger-ui-bundle.js', 'swagger-ui-standalone-preset.js', 'favicon-32x32.png'];

const initializer = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: new URL('../openapi.json', window.location.href).toString(),
    dom_id: '#swagger-ui',
    deepLinking: true,
    validatorUrl: null,
    persistAuthorization: false,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    layout: 'StandaloneLayout'
  });
});
`;

function page(title: string): string {
  const escaped = title.replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>${escaped}: API explorer</title>
  <link rel="stylesheet" href="./docs/swagger-ui.css">
  <link rel="icon" type="image/png" href="./docs/favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="./docs/swagger-ui-bundle.js"></script>
  <script src="./docs/swagger-ui-standalone-preset.js"></script>
  <script src="./docs/initializer.js"></script>
</body>
</html>
`;
}

const csp = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; font-src 'self' data:";

/** GET /docs as a route definition, so the page is in the OpenAPI document like every other route. */
export function docsRoute(title: string): RouteDefinition {
  const html = page(title);
  return defineRoute({
    method: 'get',
    path: '/docs',
    operationId: 'docs',
    summary: 'Interactive explorer over /openapi.json (every asset served locally)',
    tags: ['service'],
    security: [],
    responses: { 200: { description: 'HTML page', contentType: 'text/html' }, 301: { description: 'From `/docs/` to `/docs`' } },
    async handle({ req, res }) {
      // The page's links are relative to `/docs`; from `/docs/` they would miss.
      if (req.path.endsWith('/')) {
        res.redirect(301, '../docs');
        return 'handled';
      }
      res.setHeader('Content-Security-Policy', csp);
      res.type('html').send(html);
      return 'handled';
    },
  });
}

/** Serves Swagger UI's assets and our initializer under /docs/. */
export function mountDocAssets(app: Express): void {
  const root = getAbsoluteFSPath();
  for (const file of assetFiles) accessSync(join(root, file), constants.R_OK); // fail at start, not at first visit
  app.get('/docs/initializer.js', (_req, res) => {
    res.type('application/javascript').send(initializer);
  });
  const assets = express.static(root, { index: false, fallthrough: false, maxAge: '1h' });
  app.use('/docs', (req, res, next) => {
    if (!assetFiles.includes(req.path.replace(/^\//, ''))) return next();
    assets(req, res, next);
  });
}
