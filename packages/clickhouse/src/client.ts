import { mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type ClickHouseClient, type ClickHouseSettings, createClient } from '@clickhouse/client';
import { formatQueryParams } from '@clickhouse/client-common';
import { processRuns } from '@trackhouse/core';
import { createChdbConnection } from 'chdb/connection';
import { embeddedStream, type ResultStream, serverStream } from './stream';

/**
 * Settings every call carries. Both forms answer 64-bit integers as JSON numbers: the server
 * quotes them by default, the embedded engine does not (counts stay far below 2^53). A
 * replayed insert (same `insert_deduplication_token`) is deduplicated in the tables that
 * materialized views fill as well, each on its own.
 */
export const NORMALIZED_SETTINGS: Readonly<ClickHouseSettings> = {
  output_format_json_quote_64bit_integers: 0,
  date_time_output_format: 'simple',
  deduplicate_blocks_in_dependent_materialized_views: 1,
  // The session rollup is partitioned by the day a session began: a batch holding events of
  // long-lived sessions (or a bulk copy) may touch many days, which must not fail the insert.
  throw_on_max_partitions_per_insert_block: 0,
  // The embedded engine keeps a call's settings on its connection: without this, an insert
  // that names no token would reuse the previous insert's and be dropped as its replay.
  insert_deduplication_token: '',
  // A FINAL read must merge every row of a key before testing its aggregated columns: the
  // engine's skip indexes (the rollups' minmax of session_start and session_end) would drop a
  // part's granule whose row alone fails the condition though the merged row passes (a session
  // whose late rows carry it past the range's end was missed as crossing it).
  use_skip_indexes_if_final: 0,
};

/**
 * Settings of every call on the embedded engine (ClickHouse 26.x), on top of the normalized ones.
 * The analyzer's pass that derives more comparisons from a chain of `AND`ed comparisons
 * (`a < b AND b < 5` gains `a < 5`) hashes the query tree again and again: in the analytics'
 * statements, with their range conditions inside lambdas and several nested subqueries, it took
 * 13-26 of a statement's 30-55 ms of analysis and never found a condition the statement
 * lacks (each states its range on the key columns itself). Off, the results are the same
 * (docs/benchmarks.md). Not sent to a server: it knows the setting only from 25.2 on, and an
 * unknown setting fails the call (docs/scaling.md).
 */
export const EMBEDDED_SETTINGS: Readonly<ClickHouseSettings> = {
  ...NORMALIZED_SETTINGS,
  optimize_and_compare_chain: 0,
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
 * time per connection; the HTTP client pools sockets itself). On the embedded engine, reads send
 * their parameters as `SET param_…` statements on their own connection (`withParams`), so that
 * reads on different connections run at once; its binding would run them one at a time.
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
  const open = (settings?: ClickHouseSettings) =>
    createClient({
      // chdb types its connection against @clickhouse/client-common, whose declarations the
      // client package now bundles itself; the runtime contract is the same.
      connection: createChdbConnection({ path }) as unknown as ChdbCompatibleConnection,
      ...(settings ? { clickhouse_settings: settings } : {}),
    });
  let writer: ClickHouseClient;
  try {
    writer = open(EMBEDDED_SETTINGS);
  } catch (err) {
    throw new ClickHouseLockedError(path, err, lockHolder(path));
  }
  // The readers' settings go with each read's parameters (withParams), not as the client's own.
  const readers = Array.from({ length: opts.queryPoolSize }, () => open());
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
  // Reads in flight per reader: a read goes to the least busy one (the first of those after the
  // last one picked), not behind a long read when another connection is free.
  const busy = readers.map(() => 0);
  const leastBusy = () => {
    let best = next % readers.length;
    for (let i = 1; i < readers.length; i++) {
      const at = (next + i) % readers.length;
      if (busy[at]! < busy[best]!) best = at;
    }
    next = best + 1;
    return best;
  };
  const all = [...new Set([writer, ...readers])];
  return {
    kind,
    ...(cluster ? { cluster } : {}),
    writer,
    reader,
    async query<T>(sql: string, params?: Record<string, unknown>, settings?: ClickHouseSettings) {
      // Embedded: the settings and parameters in one SET ahead of the query; else bound, with
      // the settings (the normalized ones are the server client's own).
      const all = kind === 'embedded' ? { ...EMBEDDED_SETTINGS, ...settings } : settings;
      const set = kind === 'embedded' ? withParams(sql, params ?? {}, all) : undefined;
      const at = leastBusy();
      busy[at]!++;
      try {
        const rs = await readers[at]!.query({
          query: set ?? sql,
          ...(set === undefined ? { query_params: params } : {}),
          format: 'JSONEachRow',
          ...(set === undefined && all ? { clickhouse_settings: all } : {}),
        });
        return await rs.json<T>();
      } finally {
        busy[at]!--;
      }
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
 * Most characters of parameter text sent as `SET param_…` statements: a statement is parsed
 * whole, within the engine's `max_query_size` (256 KiB by default), and past some tens of
 * kilobytes the binding takes a long list faster (100,000 ids: 130 against 200 ms).
 */
const SET_PARAMS_LIMIT = 100_000;

/**
 * `sql` preceded by one `SET` of `settings` and of every parameter as `param_<name> = '<text>'`,
 * for one call on an embedded connection; undefined when the parameters are too long for it
 * (the caller binds them then).
 *
 * The embedded engine's binding keeps bound parameters in state shared by every connection, so
 * it runs bound calls one at a time across the process, however many connections read. A
 * parameter set by `SET` belongs to its connection's session, and a call's statements run
 * together on it, so reads on different connections run at once (at 10 M events, alternated
 * in-process: overview compare 96 against 122 ms, docs/decisions.md). The values stay
 * parameters: `text` is the parameter's text as the HTTP interface takes it (the client's own
 * formatting), typed by the query's `{name:Type}`, written as a string literal with its
 * backslashes, quotes and NUL bytes escaped. The settings share the statement: the client would
 * send each as a statement of its own, and the engine runs one `SET` of eleven assignments in
 * under half the time of eleven (1.9-2.0 against 4.4-4.8 ms a call, `pnpm bench statement`).
 */
export function withParams(
  sql: string,
  params: Record<string, unknown>,
  settings: ClickHouseSettings = {},
): string | undefined {
  const sets: string[] = [];
  for (const [name, value] of Object.entries(settings)) {
    if (value === undefined) continue;
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
      throw new Error(`invalid setting name ${JSON.stringify(name)}`);
    sets.push(
      `${name} = ${typeof value === 'number' ? value : typeof value === 'boolean' ? Number(value) : sqlString(String(value))}`,
    );
  }
  let length = 0;
  for (const [name, value] of Object.entries(params)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
      throw new Error(`invalid parameter name ${JSON.stringify(name)}`);
    const text = formatQueryParams({ value, wrapStringInQuotes: false, printNullAsKeyword: false });
    length += text.length;
    if (length > SET_PARAMS_LIMIT) return undefined;
    sets.push(`param_${name} = ${sqlString(text)}`);
  }
  return sets.length === 0 ? sql : `SET ${sets.join(', ')};\n${sql}`;
}

/** A SQL string literal holding `text` exactly. */
const sqlString = (text: string) => `'${text.replace(/[\\'\0]/g, (c) => (c === '\0' ? '\\0' : `\\${c}`))}'`;

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
