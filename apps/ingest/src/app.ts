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
import { createUserAgentParser, createVisitorIds, type Geo, openGeo } from '@trackhouse/enrich';
import { createMemoryStores, type Stores, withLocalFallback } from '@trackhouse/limits';
import type { Sql } from '@trackhouse/postgres';
import type { Runtime, ShutdownReport } from '@trackhouse/runtime';
import { Hono } from 'hono';
import { Counter, type Registry } from 'prom-client';
import { trackingCors } from './cors';
import type { PipelineDeps } from './pipeline';
import { mountBatch } from './routes/batch';
import type { IngestContext } from './routes/context';
import { mountIdentify } from './routes/identify';
import { mountReplay } from './routes/replay';
import { mountTrack } from './routes/track';
import { mountTrackingConfig } from './routes/tracking-config';
import { createIngestDirectory, type IngestDirectory } from './sites';
import { bufferDirectory, deadLetterDirectory } from './writer/buffer';
import { claimBufferSlot } from './writer/slots';
import { openTableWriters, type TableWriters } from './writer/tables';
import type { DurableWriter } from './writer/writer';

/** Settings of the ingest service, taken from the parsed configuration. */
export type IngestSettings = Pick<
  Config,
  | 'TRUST_PROXY'
  | 'TRACK_RATE_LIMIT_MAX'
  | 'TRACK_RATE_LIMIT_WINDOW_S'
  | 'TRACK_ANON_RATE_LIMIT_MAX'
  | 'TRACK_ANON_RATE_LIMIT_WINDOW_S'
  | 'MONTHLY_PAGEVIEW_LIMIT'
  | 'INGEST_BUFFER_MAX_MB'
  | 'INGEST_FLUSH_INTERVAL_MS'
  | 'INGEST_MAX_BATCH_ROWS'
  | 'SESSION_REPLAY_MAX_MB_PER_DAY'
  | 'SESSION_REPLAY_RETENTION_DAYS'
>;

/** Everything the ingest service needs, built by `openIngest` (or a test) and injected. */
export interface IngestDeps {
  log: Logger;
  registry: Registry;
  stores: Stores;
  secret: string;
  geo: Geo;
  directory: IngestDirectory;
  /** The events table's writer (`writers.events`). */
  writer: DurableWriter;
  writers: TableWriters;
  settings: IngestSettings;
  readiness: ReadinessCheck[];
}

function ingestContext(deps: IngestDeps): IngestContext {
  const s = deps.settings;
  const pipeline: PipelineDeps = {
    directory: deps.directory,
    stores: deps.stores,
    trackLimiter: deps.stores.rateLimiter(
      'track',
      s.TRACK_RATE_LIMIT_MAX,
      s.TRACK_RATE_LIMIT_WINDOW_S * 1000,
    ),
    anonymousLimiter: deps.stores.rateLimiter(
      'track-anon',
      s.TRACK_ANON_RATE_LIMIT_MAX,
      s.TRACK_ANON_RATE_LIMIT_WINDOW_S * 1000,
    ),
    anonymousLimitMessage: rateLimitMessage(
      s.TRACK_ANON_RATE_LIMIT_MAX,
      s.TRACK_ANON_RATE_LIMIT_WINDOW_S,
      'client address and site',
    ),
    geo: deps.geo,
    parseUserAgent: createUserAgentParser(),
    visitorId: createVisitorIds(deps.secret),
    monthlyPageviewLimit: s.MONTHLY_PAGEVIEW_LIMIT,
    rateLimitMessage: rateLimitMessage(s.TRACK_RATE_LIMIT_MAX, s.TRACK_RATE_LIMIT_WINDOW_S),
    writerFull: () => deps.writer.isFull(),
  };
  return {
    pipeline,
    writer: deps.writer,
    writers: deps.writers,
    trustedProxyHops: s.TRUST_PROXY,
    log: deps.log,
    replay: {
      maxBytesPerDay: s.SESSION_REPLAY_MAX_MB_PER_DAY * 1024 * 1024,
      retentionDays: s.SESSION_REPLAY_RETENTION_DAYS,
    },
  };
}

/** The ingest endpoints alone, for mounting next to the query service in standalone mode. */
export function ingestRoutes(deps: IngestDeps): Hono<HttpEnv> {
  const ctx = ingestContext(deps);
  const app = new Hono<HttpEnv>();
  app.use('/api/track', trackingCors);
  app.use('/api/track/*', trackingCors);
  app.use('/api/site/tracking-config/*', trackingCors);
  app.use('/api/identify', trackingCors);
  app.use('/api/session-replay/*', trackingCors);
  mountTrack(app, ctx);
  mountBatch(app, ctx);
  mountTrackingConfig(app, ctx);
  mountIdentify(app, ctx);
  mountReplay(app, ctx);
  return app;
}

export function createApp(deps: IngestDeps): Hono<HttpEnv> {
  const app = createHttpApp({ service: 'ingest', log: deps.log, registry: deps.registry });
  mountOperationalRoutes(app, { registry: deps.registry, checks: deps.readiness });
  app.route('/', ingestRoutes(deps));
  return app;
}

export interface OpenIngestOptions {
  log: Logger;
  registry: Registry;
  sql: Sql;
  ch: ClickHouse;
  stores: Stores;
  secret: string;
  settings: IngestSettings & Pick<Config, 'DATA_DIR' | 'INGEST_BUFFER_DIR' | 'GEOIP_DB_PATH'>;
  readiness: ReadinessCheck[];
}

/**
 * Builds the ingest dependencies: GeoIP database, the durable writer (replaying what an earlier
 * process left), the cached directory of sites and keys, and Redis stores that fall back to
 * in-process ones while Redis is unreachable.
 */
export async function openIngest(
  opts: OpenIngestOptions,
): Promise<IngestDeps & { close(): Promise<ShutdownReport> }> {
  const geo = await openGeo(opts.settings.GEOIP_DB_PATH);
  const fallbacks = new Counter({
    name: 'trackhouse_redis_fallback_total',
    help: 'Store calls answered in-process because Redis failed',
    registers: [opts.registry],
  });
  let lastWarned = 0;
  const stores =
    opts.stores.kind === 'redis'
      ? withLocalFallback(opts.stores, createMemoryStores(), (err) => {
          fallbacks.inc();
          if (Date.now() - lastWarned > 10_000) {
            lastWarned = Date.now();
            opts.log.warn({ err }, 'Redis unavailable; limits and sessions are per replica until it returns');
          }
        })
      : opts.stores;
  const directory = await createIngestDirectory(opts.sql, stores.channel);
  const bufferBase = bufferDirectory(opts.settings);
  const slot = await claimBufferSlot(bufferBase);
  const writers = await openTableWriters({
    dir: slot.dir,
    deadLetterDir: deadLetterDirectory(bufferBase),
    ch: opts.ch,
    log: opts.log,
    registry: opts.registry,
    maxBytes: opts.settings.INGEST_BUFFER_MAX_MB * 1024 * 1024,
    flushIntervalMs: opts.settings.INGEST_FLUSH_INTERVAL_MS,
    maxBatchRows: opts.settings.INGEST_MAX_BATCH_ROWS,
  });
  return {
    log: opts.log,
    registry: opts.registry,
    stores,
    secret: opts.secret,
    geo,
    directory,
    writer: writers.events,
    writers,
    settings: opts.settings,
    readiness: opts.readiness,
    async close() {
      const leftInBuffer = await writers.close();
      await slot.release();
      await directory.close();
      return { leftInBuffer };
    },
  };
}

/** `openIngest` with everything taken from a service runtime (the ingest and standalone mains). */
export function openIngestFromRuntime(
  rt: Runtime,
  ch: ClickHouse,
  readiness: ReadinessCheck[] = rt.readinessChecks(ch),
) {
  return openIngest({
    log: rt.log,
    registry: rt.registry,
    sql: rt.db.sql,
    ch,
    stores: rt.stores,
    secret: rt.secret,
    settings: rt.config,
    readiness,
  });
}
