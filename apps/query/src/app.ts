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

/** Everything the query service needs, built by main.ts (or a test) and injected. */
export interface QueryDeps {
  log: Logger;
  registry: Registry;
  sql: Sql;
  ch: ClickHouse;
  stores: Stores;
  readiness: ReadinessCheck[];
}

/** The query endpoints alone, for mounting next to the ingest service in standalone mode. */
export function queryRoutes(_deps: QueryDeps): Hono<HttpEnv> {
  return new Hono<HttpEnv>();
}

export function createApp(deps: QueryDeps): Hono<HttpEnv> {
  const app = createHttpApp({ service: 'query', log: deps.log, registry: deps.registry });
  mountOperationalRoutes(app, { registry: deps.registry, checks: deps.readiness });
  app.route('/', queryRoutes(deps));
  return app;
}
