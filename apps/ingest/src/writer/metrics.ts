import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

function createMetrics(registry: Registry) {
  return {
    bufferedRows: new Gauge({
      name: 'trackhouse_ingest_buffered_rows',
      help: 'Acknowledged rows in the write-ahead buffers, not yet in ClickHouse',
      registers: [registry],
    }),
    bufferedBytes: new Gauge({
      name: 'trackhouse_ingest_buffered_bytes',
      help: 'Size of the write-ahead buffers on disk',
      registers: [registry],
    }),
    fsyncSeconds: new Histogram({
      name: 'trackhouse_ingest_fsync_seconds',
      help: 'Group commit latency: write and fdatasync of the write-ahead buffer',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
      registers: [registry],
    }),
    flushSeconds: new Histogram({
      name: 'trackhouse_ingest_flush_seconds',
      help: 'Latency of one ClickHouse insert of a buffer segment',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    batchRows: new Histogram({
      name: 'trackhouse_ingest_batch_rows',
      help: 'Rows per ClickHouse insert',
      buckets: [10, 100, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000],
      registers: [registry],
    }),
    flushFailures: new Counter({
      name: 'trackhouse_ingest_flush_failures_total',
      help: 'ClickHouse inserts that failed and will be retried',
      registers: [registry],
    }),
    rowsStored: new Counter({
      name: 'trackhouse_ingest_rows_stored_total',
      help: 'Rows inserted into ClickHouse from the buffer',
      registers: [registry],
    }),
    overloaded: new Counter({
      name: 'trackhouse_ingest_overloaded_total',
      help: 'Events refused with 503 because the buffer was full or could not be written',
      registers: [registry],
    }),
    deadLetterRows: new Counter({
      name: 'trackhouse_ingest_dead_letter_rows_total',
      help: 'Buffered rows ClickHouse refused for their content, moved to the dead-letter folder',
      registers: [registry],
    }),
    rowsRestored: new Counter({
      name: 'trackhouse_ingest_rows_restored_total',
      help: 'Rows of a resent segment that ClickHouse dropped as a duplicate of an insert it never completed, stored again',
      registers: [registry],
    }),
    bufferUnwritable: new Gauge({
      name: 'trackhouse_ingest_buffer_unwritable',
      help: '1 while the write-ahead buffer cannot be written (full or failing disk) and tracking answers 503',
      registers: [registry],
    }),
  };
}

type Metrics = ReturnType<typeof createMetrics>;
const shared = new WeakMap<Registry, Metrics>();

/**
 * The writer metrics of a registry. Every writer of a process (one per table) shares them:
 * counters and histograms add up, and each buffer gauge shows the sum of every writer's last
 * value, so the figures keep meaning what they did with a single writer.
 */
export function writerMetrics(registry: Registry) {
  let metrics = shared.get(registry);
  if (!metrics) {
    metrics = createMetrics(registry);
    shared.set(registry, metrics);
  }
  return {
    ...metrics,
    bufferedRows: summedGauge(metrics.bufferedRows),
    bufferedBytes: summedGauge(metrics.bufferedBytes),
  };
}

const parts = new WeakMap<Gauge, Map<object, number>>();

/** One writer's share of a gauge: setting it sets the gauge to the sum of all shares. */
function summedGauge(gauge: Gauge): { set(value: number): void } {
  let shares = parts.get(gauge);
  if (!shares) {
    shares = new Map();
    parts.set(gauge, shares);
  }
  const all = shares;
  const share = {
    set(value: number) {
      all.set(share, value);
      let sum = 0;
      for (const v of all.values()) sum += v;
      gauge.set(sum);
    },
  };
  return share;
}
