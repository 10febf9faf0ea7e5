import { createHttpApp, type HttpEnv, mountOperationalRoutes } from '@trackhouse/core';
import { type IngestDeps, ingestRoutes } from '@trackhouse/ingest';
import { queryRoutes } from '@trackhouse/query';
import type { Hono } from 'hono';

/** Standalone: both services' routes on one app, one port, one set of operational routes. */
export function createStandaloneApp(deps: IngestDeps): Hono<HttpEnv> {
  const app = createHttpApp({ service: 'standalone', log: deps.log, registry: deps.registry });
  mountOperationalRoutes(app, { registry: deps.registry, checks: deps.readiness });
  app.route('/', ingestRoutes(deps));
  app.route('/', queryRoutes(deps));
  return app;
}
