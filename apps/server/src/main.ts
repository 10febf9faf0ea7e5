import { ensureDashboardBuilt } from '@trackhouse/dashboard/build';
import { openIngestFromRuntime } from '@trackhouse/ingest';
import { SummaryBuilder } from '@trackhouse/query';
import { runService } from '@trackhouse/runtime';
import { createStandaloneApp } from './app';

/**
 * `pnpm start`: ingest and query in one process on one port. The embedded ClickHouse engine can
 * be opened by one process only, which is why standalone mode is a single process.
 */
runService({
  service: 'standalone',
  build: async (rt, ch) => {
    // A fresh clone (or changed dashboard sources) gets its dashboard built before serving.
    if ((await ensureDashboardBuilt()).built) rt.log.info('dashboard built');
    const readiness = rt.readinessChecks(ch);
    const ingest = await openIngestFromRuntime(rt, ch, readiness);
    const query = {
      log: rt.log,
      registry: rt.registry,
      sql: rt.db.sql,
      ch,
      stores: rt.stores,
      readiness,
      settings: rt.config,
    };
    const summaries = new SummaryBuilder(query).start();
    return {
      app: createStandaloneApp(ingest, { ...query, summaries }),
      close: async () => {
        await summaries.close();
        return ingest.close();
      },
    };
  },
});
