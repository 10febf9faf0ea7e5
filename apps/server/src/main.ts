import { runService } from '@trackhouse/runtime';
import { createStandaloneApp } from './app';

/**
 * `pnpm start`: ingest and query in one process on one port. The embedded ClickHouse engine can
 * be opened by one process only, which is why standalone mode is a single process.
 */
runService({
  service: 'standalone',
  build: (rt, ch) =>
    createStandaloneApp({
      log: rt.log,
      registry: rt.registry,
      sql: rt.db.sql,
      ch,
      stores: rt.stores,
      secret: rt.secret,
      readiness: rt.readinessChecks(ch),
    }),
});
