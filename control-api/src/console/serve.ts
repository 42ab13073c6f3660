// GET /console: the web console (the `@agentplane/console` workspace, built into its dist/ by `npm run build:console`),
// served as static files under a strict Content-Security-Policy: scripts, styles and calls from this origin only,
// no inline script, never framed (docs/decisions/0083-console-stack.md). A deployment without the built console
// answers 404 saying how to build it; the rest of the control plane does not depend on it.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { Router, type RequestHandler, type Response } from 'express';

export const consoleCsp = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
  "form-action 'self'",
].join('; ');

/** Where the built console is: the console package's dist/, or undefined when the package is not installed. */
export function builtConsoleDir(): string | undefined {
  try {
    // Resolved, not imported: the console is static files the control plane serves, not code it runs.
    return join(dirname(fileURLToPath(import.meta.resolve('@agentplane/console/package.json'))), 'dist');
  } catch {
    return undefined;
  }
}

function secure(res: Response): void {
  res.setHeader('Content-Security-Policy', consoleCsp);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
}

/** The router mounted at /console: hashed assets cached for good, the page itself never, any other path the page. */
export function consoleRouter(dir: string | undefined): RequestHandler {
  const router = Router();
  router.use((req, res, next) => {
    secure(res);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      res.status(405).json({ detail: 'the console is read with GET', code: 'method_not_allowed', request_id: res.locals.requestId });
      return;
    }
    // Asset URLs are relative to /console/, so /console itself is sent there.
    if (req.originalUrl.split('?')[0] === '/console') return res.redirect(301, '/console/');
    if (!dir || !existsSync(join(dir, 'index.html'))) {
      res.status(404).type('text/plain').send('The console is not built: run `npm run build:console` (npm start does) and reload.\n');
      return;
    }
    next();
  });
  if (dir) {
    router.use('/assets', express.static(join(dir, 'assets'), { index: false, immutable: true, maxAge: '365d' }), (_req, res) => {
      res.status(404).type('text/plain').send('No such console asset: the console may have been rebuilt; reload the page.\n');
    });
    const page: RequestHandler = (_req, res) => {
      res.setHeader('Cache-Control', 'no-cache');
      res.sendFile(join(dir, 'index.html'));
    };
    router.use(page);
  }
  return router;
}
