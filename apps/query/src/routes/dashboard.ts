import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { HttpEnv } from '@trackhouse/core';
import { DASHBOARD_DIST } from '@trackhouse/dashboard/build';
import type { Context, Hono } from 'hono';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};

/**
 * The dashboard runs no inline code and talks to its own origin only: everything else is
 * refused, so injected markup (a visitor-controlled page title, say) could not run or leak.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** The dashboard's app routes: each answers index.html, and the app draws the page. */
const APP_ROUTE = /^\/(?:sites\/[^/]+(?:\/settings)?\/?)?$/;

/**
 * Serves the built dashboard (`apps/dashboard/dist`): hashed assets cached for a year,
 * index.html revalidated every time so a new build is picked up at once. Files are known from
 * a listing of the folder, so no request path ever reaches the file system.
 */
export function mountDashboard(app: Hono<HttpEnv>, dir = DASHBOARD_DIST): void {
  const send = (c: Context, file: string, cache: string) => {
    const path = join(dir, file);
    if (!existsSync(path)) {
      return c.json(
        { success: false, error: 'The dashboard is not built (pnpm start builds it)', code: 'NOT_BUILT' },
        503,
      );
    }
    const type = TYPES[extname(file)] ?? 'application/octet-stream';
    const body = readFileSync(path);
    // Text is sent gzipped to clients that take it (a third of the size); compressing a few
    // tens of kilobytes per request costs well under a millisecond.
    const zip = type.startsWith('text/') && /\bgzip\b/.test(c.req.header('accept-encoding') ?? '');
    return c.body(zip ? gzipSync(body) : body, 200, {
      'Content-Type': type,
      ...(zip ? { 'Content-Encoding': 'gzip' } : {}),
      Vary: 'Accept-Encoding',
      'Cache-Control': cache,
      'Content-Security-Policy': DASHBOARD_CSP,
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
    });
  };
  const assets = () => {
    const folder = join(dir, 'assets');
    return new Set(existsSync(folder) ? readdirSync(folder) : []);
  };
  app.get('/assets/:name', (c) => {
    const name = c.req.param('name');
    if (!assets().has(name)) return c.notFound();
    return send(c, join('assets', name), 'public, max-age=31536000, immutable');
  });
  app.get('*', (c, next) => {
    if (!APP_ROUTE.test(c.req.path)) return next();
    return send(c, 'index.html', 'no-cache');
  });
}
