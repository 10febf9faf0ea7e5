import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export function writerMetrics(registry: Registry) {
  return {
    bufferedRows: new Gauge({
      name: 'trackhouse_ingest_buffered_rows',
      help: 'Acknowledged events in the write-ahead buffer, not yet in ClickHouse',
      registers: [registry],
    }),
    bufferedBytes: new Gauge({
      name: 'trackhouse_ingest_buffered_bytes',
      help: 'Size of the write-ahead buffer on disk',
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
      help: 'Events refused with 503 because the buffer was full',
      registers: [registry],
    }),
  };
}
