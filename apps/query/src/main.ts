import { runService } from '@trackhouse/runtime';
import { createApp } from './app';

/** The query service as its own process against server stores (production, split mode). */
runService({
  service: 'query',
  build: (rt, ch) => ({
    app: createApp({
      log: rt.log,
      registry: rt.registry,
      sql: rt.db.sql,
      ch,
      stores: rt.stores,
      readiness: rt.readinessChecks(ch),
      settings: rt.config,
    }),
  }),
});
