import { openIngest } from '@trackhouse/ingest';
import { runService } from '@trackhouse/runtime';
import { createStandaloneApp } from './app';

/**
 * `pnpm start`: ingest and query in one process on one port. The embedded ClickHouse engine can
 * be opened by one process only, which is why standalone mode is a single process.
 */
runService({
  service: 'standalone',
  build: async (rt, ch) => {
    const readiness = rt.readinessChecks(ch);
    const ingest = await openIngest({
      log: rt.log,
      registry: rt.registry,
      sql: rt.db.sql,
      ch,
      stores: rt.stores,
      secret: rt.secret,
      settings: rt.config,
      readiness,
    });
    const query = {
      log: rt.log,
      registry: rt.registry,
      sql: rt.db.sql,
      ch,
      stores: rt.stores,
      readiness,
      settings: rt.config,
    };
    return { app: createStandaloneApp(ingest, query), close: ingest.close };
  },
});
