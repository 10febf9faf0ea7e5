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
import type { Pool } from '@trackhouse/postgres';
import type { Hono } from 'hono';
import { cors } from 'hono/cors';
import type { Registry } from 'prom-client';
import { Authorizer } from './auth';
import { limitBody, storableJsonBody } from './body';
import { router } from './context';
import { boundedReads, type ReadSettings } from './reads';
import { analyticsRoutes } from './routes/analytics';
import { apiKeyRoutes } from './routes/api-keys';
import { mountDashboard } from './routes/dashboard';
import { mountDocs } from './routes/docs';
import { eventRoutes } from './routes/events';
import { goalRoutes } from './routes/goals';
import { organizationRoutes } from './routes/organizations';
import { sitesRoutes } from './routes/sites';
import type { SummaryBuilder } from './summaries';

/** The configuration the query service reads (parsed once, by main.ts or a test). */
export type QuerySettings = ReadSettings &
  Pick<
    Config,
    | 'QUERY_RATE_LIMIT_MAX'
    | 'QUERY_RATE_LIMIT_WINDOW_S'
    | 'READ_ANON_RATE_LIMIT_MAX'
    | 'READ_ANON_RATE_LIMIT_WINDOW_S'
    | 'TRUST_PROXY'
    | 'API_KEYS_PER_USER_MAX'
    | 'API_KEY_CREATE_LIMIT_PER_DAY'
  >;

/** Everything the query service needs, built by main.ts (or a test) and injected. */
export interface QueryDeps {
  log: Logger;
  registry: Registry;
  sql: Pool;
  ch: ClickHouse;
  stores: Stores;
  readiness: ReadinessCheck[];
  settings: QuerySettings;
  /** The built dashboard's folder (default `apps/dashboard/dist`). */
  dashboardDir?: string;
  /** The background builder of summaries, told when a site's goals change. */
  summaries?: Pick<SummaryBuilder, 'schedule'>;
}

export { MAX_BODY_BYTES } from './body';

/** The query service's paths (in standalone mode the ingest service's share the app). */
const QUERY_PATHS = ['/api/sites/*', '/api/organizations/*', '/api/user/*'];

/** Access rules with the two read budgets: per API key, and per client address without one. */
function authorizer({ sql, stores, settings: s }: QueryDeps): Authorizer {
  const perKey = stores.rateLimiter('query', s.QUERY_RATE_LIMIT_MAX, s.QUERY_RATE_LIMIT_WINDOW_S * 1000);
  const perAddress = stores.rateLimiter(
    'read-anon',
    s.READ_ANON_RATE_LIMIT_MAX,
    s.READ_ANON_RATE_LIMIT_WINDOW_S * 1000,
  );
  return new Authorizer(
    sql,
    { limiter: perKey, message: rateLimitMessage(s.QUERY_RATE_LIMIT_MAX, s.QUERY_RATE_LIMIT_WINDOW_S) },
    {
      limiter: perAddress,
      message: rateLimitMessage(
        s.READ_ANON_RATE_LIMIT_MAX,
        s.READ_ANON_RATE_LIMIT_WINDOW_S,
        'client address',
      ),
      trustedProxyHops: s.TRUST_PROXY,
    },
  );
}

/** The query endpoints alone, for mounting next to the ingest service in standalone mode. */
export function queryRoutes(deps: QueryDeps): Hono<HttpEnv> {
  const ctx = {
    auth: authorizer(deps),
    sql: deps.sql,
    ch: boundedReads(deps.ch, deps.settings),
    stores: deps.stores,
    settings: deps.settings,
    summaries: deps.summaries,
  };
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
  // Before any validator or handler reads a body, and so before authentication.
  for (const path of QUERY_PATHS) app.use(path, limitBody, storableJsonBody);
  for (const routes of [sitesRoutes, goalRoutes, eventRoutes, organizationRoutes, apiKeyRoutes])
    app.route('/', routes(ctx));
  for (const routes of analyticsRoutes) app.route('/', routes(ctx));
  mountDocs(app);
  mountDashboard(app, deps.dashboardDir);
  return app;
}

export function createApp(deps: QueryDeps): Hono<HttpEnv> {
  const app = createHttpApp({ service: 'query', log: deps.log, registry: deps.registry });
  mountOperationalRoutes(app, { registry: deps.registry, checks: deps.readiness });
  app.route('/', queryRoutes(deps));
  return app;
}
