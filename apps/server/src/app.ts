import { createHttpApp, type HttpEnv, mountOperationalRoutes } from '@trackhouse/core';
import { type IngestDeps, ingestRoutes } from '@trackhouse/ingest';
import { type QueryDeps, queryRoutes } from '@trackhouse/query';
import type { Hono } from 'hono';

/** Standalone: both services' routes on one app, one port, one set of operational routes. */
export function createStandaloneApp(ingest: IngestDeps, query: QueryDeps): Hono<HttpEnv> {
  const app = createHttpApp({ service: 'standalone', log: ingest.log, registry: ingest.registry });
  mountOperationalRoutes(app, { registry: ingest.registry, checks: ingest.readiness });
  app.route('/', ingestRoutes(ingest));
  app.route('/', queryRoutes(query));
  return app;
}
