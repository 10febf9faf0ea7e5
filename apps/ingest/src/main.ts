import { runService } from '@trackhouse/runtime';
import { createApp, openIngest } from './app';

/** The ingest service as its own process against server stores (production, split mode). */
runService({
  service: 'ingest',
  requireSecret: true,
  build: async (rt, ch) => {
    const deps = await openIngest({
      log: rt.log,
      registry: rt.registry,
      sql: rt.db.sql,
      ch,
      stores: rt.stores,
      secret: rt.secret,
      settings: rt.config,
      readiness: rt.readinessChecks(ch),
    });
    // close() drains the write-ahead buffer into ClickHouse before the connections close.
    return { app: createApp(deps), close: deps.close };
  },
});
