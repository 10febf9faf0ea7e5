import type { ClickHouse } from '@trackhouse/clickhouse';
import {
  createHttpApp,
  type HttpEnv,
  type Logger,
  mountOperationalRoutes,
  type ReadinessCheck,
} from '@trackhouse/core';
import type { Stores } from '@trackhouse/limits';
import type { Sql } from '@trackhouse/postgres';
import { Hono } from 'hono';
import type { Registry } from 'prom-client';

/** Everything the ingest service needs, built by main.ts (or a test) and injected. */
export interface IngestDeps {
  log: Logger;
  registry: Registry;
  sql: Sql;
  ch: ClickHouse;
  stores: Stores;
  secret: string;
  readiness: ReadinessCheck[];
}

/** The ingest endpoints alone, for mounting next to the query service in standalone mode. */
export function ingestRoutes(_deps: IngestDeps): Hono<HttpEnv> {
  return new Hono<HttpEnv>();
}

export function createApp(deps: IngestDeps): Hono<HttpEnv> {
  const app = createHttpApp({ service: 'ingest', log: deps.log, registry: deps.registry });
  mountOperationalRoutes(app, { registry: deps.registry, checks: deps.readiness });
  app.route('/', ingestRoutes(deps));
  return app;
}
