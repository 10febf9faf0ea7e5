import { runService } from '@trackhouse/runtime';
import { createApp, openIngestFromRuntime } from './app';

/** The ingest service as its own process against server stores (production, split mode). */
runService({
  service: 'ingest',
  requireSecret: true,
  build: async (rt, ch) => {
    const deps = await openIngestFromRuntime(rt, ch);
    // close() drains the write-ahead buffer into ClickHouse before the connections close.
    return { app: createApp(deps), close: deps.close };
  },
});
