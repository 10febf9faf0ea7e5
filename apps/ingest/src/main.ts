import { runService } from '@trackhouse/runtime';
import { createApp } from './app';

/** The ingest service as its own process against server stores (production, split mode). */
runService({
  service: 'ingest',
  requireSecret: true,
  build: (rt, ch) =>
    createApp({
      log: rt.log,
      registry: rt.registry,
      sql: rt.db.sql,
      ch,
      stores: rt.stores,
      secret: rt.secret,
      readiness: rt.readinessChecks(ch),
    }),
});
