import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type ClickHouseClient, type ClickHouseSettings, createClient } from '@clickhouse/client';
import { createChdbConnection } from 'chdb/connection';

/**
 * Settings every call carries. Both forms answer 64-bit integers as JSON numbers: the server
 * quotes them by default, the embedded engine does not (counts stay far below 2^53). A
 * replayed insert (same `insert_deduplication_token`) is deduplicated in the tables that
 * materialized views fill as well, each on its own.
 */
const NORMALIZED_SETTINGS: ClickHouseSettings = {
  output_format_json_quote_64bit_integers: 0,
  date_time_output_format: 'simple',
  deduplicate_blocks_in_dependent_materialized_views: 1,
  // The session rollup is partitioned by the day a session began: a batch holding events of
  // long-lived sessions (or a bulk copy) may touch many days, which must not fail the insert.
  throw_on_max_partitions_per_insert_block: 0,
};

type ChdbCompatibleConnection = NonNullable<Parameters<typeof createClient>[0]>['connection'];

export type ClickHouseOptions =
  | { kind: 'server'; url: string; username: string; password: string; database: string }
  | { kind: 'embedded'; dataDir: string; queryPoolSize: number };

/**
 * The ClickHouse handle every package uses. `writer` takes inserts and DDL; reads go through
 * `reader()`, which spreads them over a small pool (the embedded engine runs one call at a
 * time per connection; the HTTP client pools sockets itself).
 */
export interface ClickHouse {
  readonly kind: 'server' | 'embedded';
  readonly writer: ClickHouseClient;
  reader(): ClickHouseClient;
  /** Rows of a SELECT with bound `{name:Type}` parameters. */
  query<T>(sql: string, params?: Record<string, unknown>): Promise<T[]>;
  /** A statement without a result (DDL, mutations), on the writer connection. */
  command(sql: string, params?: Record<string, unknown>): Promise<void>;
  ping(): Promise<void>;
  /** Creates the configured database on a server (the embedded engine uses its own `default`). */
  ensureDatabase(): Promise<void>;
  close(): Promise<void>;
}

export function createClickHouse(opts: ClickHouseOptions): ClickHouse {
  if (opts.kind === 'server') {
    const client = createClient({
      url: opts.url,
      username: opts.username,
      password: opts.password,
      database: opts.database,
      clickhouse_settings: NORMALIZED_SETTINGS,
    });
    const ensureDatabase = async () => {
      const bootstrap = createClient({ url: opts.url, username: opts.username, password: opts.password });
      try {
        await bootstrap.command({ query: `CREATE DATABASE IF NOT EXISTS ${opts.database}` });
      } finally {
        await bootstrap.close();
      }
    };
    return wrap('server', client, [client], ensureDatabase);
  }
  const path = resolve(opts.dataDir);
  mkdirSync(path, { recursive: true });
  const open = () =>
    createClient({
      // chdb types its connection against @clickhouse/client-common, whose declarations the
      // client package now bundles itself; the runtime contract is the same.
      connection: createChdbConnection({ path }) as unknown as ChdbCompatibleConnection,
      clickhouse_settings: NORMALIZED_SETTINGS,
    });
  let writer: ClickHouseClient;
  try {
    writer = open();
  } catch (err) {
    throw new ClickHouseLockedError(path, err);
  }
  const readers = Array.from({ length: opts.queryPoolSize }, open);
  return wrap('embedded', writer, readers, async () => {});
}

function wrap(
  kind: ClickHouse['kind'],
  writer: ClickHouseClient,
  readers: ClickHouseClient[],
  ensureDatabase: () => Promise<void>,
): ClickHouse {
  let next = 0;
  const reader = () => {
    const client = readers[next % readers.length]!;
    next++;
    return client;
  };
  const all = [...new Set([writer, ...readers])];
  return {
    kind,
    writer,
    reader,
    async query<T>(sql: string, params?: Record<string, unknown>) {
      const rs = await reader().query({ query: sql, query_params: params, format: 'JSONEachRow' });
      return rs.json<T>();
    },
    async command(sql: string, params?: Record<string, unknown>) {
      await writer.command({ query: sql, query_params: params });
    },
    async ping() {
      const result = await reader().ping();
      if (!result.success) throw result.error;
    },
    ensureDatabase,
    async close() {
      await Promise.all(all.map((c) => c.close()));
    },
  };
}

/** The embedded data directory is held by another process (only one may open it). */
export class ClickHouseLockedError extends Error {
  constructor(
    readonly path: string,
    cause: unknown,
  ) {
    super(
      `the embedded ClickHouse data at ${path} is open in another process (only one process may use it)`,
      {
        cause,
      },
    );
    this.name = 'ClickHouseLockedError';
  }
}

/** Embedded engine data lives under DATA_DIR/clickhouse. */
export function embeddedClickHousePath(dataDir: string): string {
  return join(dataDir, 'clickhouse');
}
