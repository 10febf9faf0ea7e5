import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import {
  type ClickHouse,
  ClickHouseLockedError,
  createClickHouse,
  embeddedClickHousePath,
  migrateClickHouse,
} from '@trackhouse/clickhouse';
import {
  type Config,
  ConfigError,
  createLogger,
  type Logger,
  type ReadinessCheck,
  waitForExit,
} from '@trackhouse/core';
import { createStores, type Stores } from '@trackhouse/limits';
import { type Database, migratePostgres, openDatabase } from '@trackhouse/postgres';
import { collectDefaultMetrics, Registry } from 'prom-client';

export const MIGRATIONS = {
  clickhouse: fileURLToPath(new URL('../../../infra/clickhouse', import.meta.url)),
  postgres: fileURLToPath(new URL('../../../infra/postgres', import.meta.url)),
};

/** The real clients of one process, built from the parsed configuration. */
export interface Runtime {
  config: Config;
  log: Logger;
  registry: Registry;
  db: Database;
  stores: Stores;
  /** Secret for visitor ids: SECRET, or one generated once under DATA_DIR. */
  secret: string;
  readinessChecks(ch?: ClickHouse): ReadinessCheck[];
  close(): Promise<void>;
}

export async function readOrCreateSecret(dataDir: string): Promise<string> {
  const file = join(resolve(dataDir), 'secret');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  await mkdir(resolve(dataDir), { recursive: true });
  const secret = randomBytes(32).toString('hex');
  await writeFile(file, `${secret}\n`, { mode: 0o600, flag: 'wx' }).catch(
    async (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    },
  );
  return (await readFile(file, 'utf8')).trim();
}

/** How a service process waits at start for what a previous process still holds. */
export interface StartWaits {
  /** Bound of each wait; default 30 s. */
  waitMs?: number;
  /** Says what it waits for (stderr and log). */
  onWait?: (message: string) => void;
  /** A stop asked for during start-up ends the waits at once. */
  signal?: AbortSignal;
}

/** Opens Postgres (URL or embedded under DATA_DIR), the stores and the secret; migrates Postgres. */
export async function openRuntime(
  config: Config,
  service: string,
  opts: StartWaits & { log?: Logger } = {},
): Promise<Runtime> {
  const log = opts.log ?? createLogger(config.LOG_LEVEL, { service });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  await mkdir(resolve(config.DATA_DIR), { recursive: true });
  const db = await openDatabase(
    config.DATABASE_URL
      ? { url: config.DATABASE_URL }
      : {
          dataDir: config.DATA_DIR,
          // A service owns the embedded server it uses, even one a CLI command started.
          embedded: { takeOver: true, waitMs: opts.waitMs, onWait: opts.onWait, signal: opts.signal },
        },
  );
  const stores = createStores(config.REDIS_URL, config.REDIS_PREFIX);
  try {
    await migratePostgres(db.sql, MIGRATIONS.postgres);
    const secret = config.SECRET ?? (await readOrCreateSecret(config.DATA_DIR));
    return {
      config,
      log,
      registry,
      db,
      stores,
      secret,
      readinessChecks: (ch) => [
        { name: 'postgres', check: () => db.ping() },
        { name: stores.kind === 'redis' ? 'redis' : 'memory-stores', check: () => stores.ping() },
        ...(ch ? [{ name: 'clickhouse', check: () => ch.ping() }] : []),
      ],
      async close() {
        await stores.close();
        await db.close();
      },
    };
  } catch (err) {
    await stores.close();
    await db.close();
    throw err;
  }
}

/**
 * ClickHouse at CLICKHOUSE_URL, else the embedded engine under DATA_DIR/clickhouse; migrated.
 * With `waitMs`, an embedded directory still held by another process (the previous server,
 * shutting down) is waited for; without, that fails at once with ClickHouseLockedError.
 */
export async function openClickHouse(config: Config, opts: StartWaits = {}): Promise<ClickHouse> {
  if (config.CLICKHOUSE_CLUSTER && !config.CLICKHOUSE_URL) {
    throw new ConfigError(['CLICKHOUSE_CLUSTER: needs CLICKHOUSE_URL (a node of the cluster)']);
  }
  const ch = config.CLICKHOUSE_URL
    ? createClickHouse({
        kind: 'server',
        url: config.CLICKHOUSE_URL,
        username: config.CLICKHOUSE_USER,
        password: config.CLICKHOUSE_PASSWORD,
        database: config.CLICKHOUSE_DATABASE,
        ...(config.CLICKHOUSE_CLUSTER ? { cluster: config.CLICKHOUSE_CLUSTER } : {}),
      })
    : await openEmbeddedClickHouse(config, opts);
  try {
    await ch.ensureDatabase();
    await migrateClickHouse(ch, MIGRATIONS.clickhouse);
    return config.QUERY_ROLLUPS ? ch : { ...ch, rollups: false };
  } catch (err) {
    await ch.close();
    throw err;
  }
}

/** How long a lock with no running holder to be seen is retried before failing. */
const UNSEEN_HOLDER_WAIT_MS = 5_000;

async function openEmbeddedClickHouse(config: Config, opts: StartWaits): Promise<ClickHouse> {
  const waitMs = opts.waitMs ?? 0;
  const deadline = Date.now() + waitMs;
  let told: number | undefined;
  let unheldSince: number | undefined;
  for (;;) {
    try {
      return createClickHouse({
        kind: 'embedded',
        dataDir: embeddedClickHousePath(config.DATA_DIR),
        queryPoolSize: config.CLICKHOUSE_QUERY_POOL,
      });
    } catch (err) {
      if (!(err instanceof ClickHouseLockedError) || waitMs === 0) throw err;
      if (err.holder === undefined) {
        // The lock was held when the engine tried it, yet no running holder is found now: it
        // exited in between, and the kernel frees the lock as its files close. Retry briefly;
        // a lock held with no holder to be seen (another machine, another pid namespace) is not
        // worth the whole wait.
        unheldSince ??= Date.now();
        if (Date.now() - unheldSince >= Math.min(UNSEEN_HOLDER_WAIT_MS, waitMs)) throw err;
        await sleep(100, undefined, { signal: opts.signal });
        continue;
      }
      unheldSince = undefined;
      if (told !== err.holder) {
        told = err.holder;
        opts.onWait?.(
          `waiting for the previous trackhouse process (pid ${err.holder}) to release ${err.path}…`,
        );
      }
      if (Date.now() >= deadline) {
        throw new Error(
          `gave up after ${waitMs / 1000} s: ${err.path} is still held by process ${err.holder} (only one process may open it); stop that process, then start again`,
          { cause: err },
        );
      }
      // It lets go when it closes the engine, at the latest when it exits: retry at both.
      await waitForExit(err.holder, Math.min(1_000, Math.max(0, deadline - Date.now())), opts.signal);
    }
  }
}

export * from './serve';
export * from './service';
