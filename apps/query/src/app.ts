import type { ClickHouse } from '@trackhouse/clickhouse';
import {
  type Config,
  createHttpApp,
  type HttpEnv,
  type Logger,
  mountOperationalRoutes,
  type ReadinessCheck,
  rateLimitMessage,
} from '@trackhouse/core';
import type { Stores } from '@trackhouse/limits';
import type { Sql } from '@trackhouse/postgres';
import type { Hono } from 'hono';
import { cors } from 'hono/cors';
import type { Registry } from 'prom-client';
import { Authorizer } from './auth';
import { router } from './context';
import { apiKeyRoutes } from './routes/api-keys';
import { mountDocs } from './routes/docs';
import { eventRoutes } from './routes/events';
import { goalRoutes } from './routes/goals';
import { organizationRoutes } from './routes/organizations';
import { sitesRoutes } from './routes/sites';

/** Everything the query service needs, built by main.ts (or a test) and injected. */
export interface QueryDeps {
  log: Logger;
  registry: Registry;
  sql: Sql;
  ch: ClickHouse;
  stores: Stores;
  readiness: ReadinessCheck[];
  settings: Pick<Config, 'QUERY_RATE_LIMIT_MAX' | 'QUERY_RATE_LIMIT_WINDOW_S'>;
}

/** The query endpoints alone, for mounting next to the ingest service in standalone mode. */
export function queryRoutes(deps: QueryDeps): Hono<HttpEnv> {
  const { QUERY_RATE_LIMIT_MAX: max, QUERY_RATE_LIMIT_WINDOW_S: windowS } = deps.settings;
  const auth = new Authorizer(
    deps.sql,
    deps.stores.rateLimiter('query', max, windowS * 1000),
    rateLimitMessage(max, windowS),
  );
  const ctx = { auth, sql: deps.sql, ch: deps.ch, stores: deps.stores };
  const app = router();
  // Browser dashboards call with headers, never cookies: any origin, no credentials.
  app.use(
    '/api/*',
    cors({
      origin: '*',
      allowMethods: ['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS'],
      allowHeaders: ['Authorization', 'Content-Type', 'x-private-key'],
      exposeHeaders: [
        'Retry-After',
        'RateLimit-Limit',
        'RateLimit-Remaining',
        'RateLimit-Reset',
        'X-Request-Id',
      ],
      maxAge: 86_400,
    }),
  );
  for (const routes of [sitesRoutes, goalRoutes, eventRoutes, organizationRoutes, apiKeyRoutes])
    app.route('/', routes(ctx));
  mountDocs(app);
  return app;
}

export function createApp(deps: QueryDeps): Hono<HttpEnv> {
  const app = createHttpApp({ service: 'query', log: deps.log, registry: deps.registry });
  mountOperationalRoutes(app, { registry: deps.registry, checks: deps.readiness });
  app.route('/', queryRoutes(deps));
  return app;
}
