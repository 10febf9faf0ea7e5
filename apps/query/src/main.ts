import { ensureDashboardBuilt } from '@trackhouse/dashboard/build';
import { runService } from '@trackhouse/runtime';
import { createApp } from './app';
import { SummaryBuilder } from './summaries';

/** The query service as its own process against server stores (production, split mode). */
runService({
  service: 'query',
  build: async (rt, ch) => {
    // A fresh clone (or changed dashboard sources) gets its dashboard built before serving.
    if ((await ensureDashboardBuilt()).built) rt.log.info('dashboard built');
    const summaries = new SummaryBuilder({
      ch,
      sql: rt.db.sql,
      log: rt.log,
      registry: rt.registry,
      settings: rt.config,
    }).start();
    return {
      app: createApp({
        log: rt.log,
        registry: rt.registry,
        sql: rt.db.sql,
        ch,
        stores: rt.stores,
        readiness: rt.readinessChecks(ch),
        settings: rt.config,
        summaries,
      }),
      close: () => summaries.close(),
    };
  },
});
