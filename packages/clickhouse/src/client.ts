import { mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type ClickHouseClient, type ClickHouseSettings, createClient } from '@clickhouse/client';
import { processRuns } from '@trackhouse/core';
import { createChdbConnection } from 'chdb/connection';
import { embeddedStream, type ResultStream, serverStream } from './stream';

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
  // The embedded engine keeps a call's settings on its connection: without this, an insert
  // that names no token would reuse the previous insert's and be dropped as its replay.
  insert_deduplication_token: '',
};

/**
 * Settings of every call on a cluster. An insert into a Distributed table returns once each
 * shard has stored its part (not when it is queued on the receiving node), so an acknowledged
 * batch is durable on its shard and a replay carries the same token to the same shard. GROUP BYs
 * on the sharding key (site, session) aggregate on each shard without a merge on the initiator.
 * Every `IN (subquery)` of the queries selects sessions (`session_id IN …`): a session lives on
 * one shard, so each shard answers the subquery over its own local table (`local`), where the
 * default would refuse a subquery over a Distributed table inside a distributed query.
 */
const CLUSTER_SETTINGS: ClickHouseSettings = {
  distributed_foreground_insert: 1,
  optimize_distributed_group_by_sharding_key: 1,
  distributed_product_mode: 'local',
};

type ChdbCompatibleConnection = NonNullable<Parameters<typeof createClient>[0]>['connection'];

export type ClickHouseOptions =
  | {
      kind: 'server';
      url: string;
      username: string;
      password: string;
      database: string;
      /** A ClickHouse cluster's name (CLICKHOUSE_CLUSTER): migrations take the cluster form. */
      cluster?: string;
    }
  | { kind: 'embedded'; dataDir: string; queryPoolSize: number };

/**
 * The ClickHouse handle every package uses. `writer` takes inserts and DDL; reads go through
 * `reader()`, which spreads them over a small pool (the embedded engine runs one call at a
 * time per connection; the HTTP client pools sockets itself). On the embedded engine, calls that
 * bind parameters also run one at a time across the pool (its binding chains them, README).
 */
export interface ClickHouse {
  readonly kind: 'server' | 'embedded';
  /** Set on a cluster: tables are Distributed over `<name>_local` tables (cluster.ts). */
  readonly cluster?: string;
  /**
   * `false`: analytics answers are computed from the events alone, never from the rollups
   * (QUERY_ROLLUPS=off; the same answers, slower). Undefined or true: rollups where they apply.
   */
  readonly rollups?: boolean;
  /**
   * Most sessions a query lists by id as a bound parameter (listedSessionsLimit in
   * queries/analytics/paths.ts gives the default); past it, answers find them otherwise.
   */
  readonly maxListedSessions?: number;
  readonly writer: ClickHouseClient;
  reader(): ClickHouseClient;
  /** Rows of a SELECT with bound `{name:Type}` parameters (and settings for this call). */
  query<T>(sql: string, params?: Record<string, unknown>, settings?: ClickHouseSettings): Promise<T[]>;
  /**
   * The raw output of a SELECT in `format`, chunk by chunk as the engine produces it: never the
   * whole result in memory. Ending the iteration early cancels the query.
   */
  stream: ResultStream;
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
      clickhouse_settings: opts.cluster
        ? { ...NORMALIZED_SETTINGS, ...CLUSTER_SETTINGS }
        : NORMALIZED_SETTINGS,
    });
    const ensureDatabase = async () => {
      const bootstrap = createClient({ url: opts.url, username: opts.username, password: opts.password });
      try {
        const onCluster = opts.cluster ? ` ON CLUSTER ${opts.cluster}` : '';
        await bootstrap.command({ query: `CREATE DATABASE IF NOT EXISTS ${opts.database}${onCluster}` });
      } finally {
        await bootstrap.close();
      }
    };
    return wrap('server', client, [client], ensureDatabase, serverStream(client), opts.cluster);
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
    throw new ClickHouseLockedError(path, err, lockHolder(path));
  }
  const readers = Array.from({ length: opts.queryPoolSize }, open);
  return wrap('embedded', writer, readers, async () => {}, embeddedStream(path));
}

function wrap(
  kind: ClickHouse['kind'],
  writer: ClickHouseClient,
  readers: ClickHouseClient[],
  ensureDatabase: () => Promise<void>,
  stream: ResultStream,
  cluster?: string,
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
    ...(cluster ? { cluster } : {}),
    writer,
    reader,
    async query<T>(sql: string, params?: Record<string, unknown>, settings?: ClickHouseSettings) {
      const rs = await reader().query({
        query: sql,
        query_params: params,
        format: 'JSONEachRow',
        ...(settings ? { clickhouse_settings: settings } : {}),
      });
      return rs.json<T>();
    },
    async command(sql: string, params?: Record<string, unknown>) {
      await writer.command({ query: sql, query_params: params });
    },
    async ping() {
      const result = await reader().ping();
      if (!result.success) throw result.error;
    },
    stream,
    ensureDatabase,
    async close() {
      await Promise.all(all.map((c) => c.close()));
    },
  };
}

/**
 * The process holding the embedded data directory: the engine writes its pid into the `status`
 * file it locks. Undefined when that process no longer runs (the lock went with it).
 */
function lockHolder(path: string): number | undefined {
  try {
    const pid = Number(/^PID: (\d+)/m.exec(readFileSync(join(path, 'status'), 'utf8'))?.[1]);
    return pid !== process.pid && processRuns(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** The embedded data directory is held by another process (only one may open it). */
export class ClickHouseLockedError extends Error {
  constructor(
    readonly path: string,
    cause: unknown,
    /** The pid of the process holding it, when known and still running. */
    readonly holder?: number,
  ) {
    super(
      `the embedded ClickHouse data at ${path} is open in another process${holder ? ` (pid ${holder})` : ''} (only one process may use it)`,
      { cause },
    );
    this.name = 'ClickHouseLockedError';
  }
}

/** Embedded engine data lives under DATA_DIR/clickhouse. */
export function embeddedClickHousePath(dataDir: string): string {
  return join(dataDir, 'clickhouse');
}
