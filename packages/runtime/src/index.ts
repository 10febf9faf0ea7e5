import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type ClickHouse,
  createClickHouse,
  embeddedClickHousePath,
  migrateClickHouse,
} from '@trackhouse/clickhouse';
import { type Config, createLogger, type Logger, type ReadinessCheck } from '@trackhouse/core';
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

/** Opens Postgres (URL or embedded under DATA_DIR), the stores and the secret; migrates Postgres. */
export async function openRuntime(config: Config, service: string): Promise<Runtime> {
  const log = createLogger(config.LOG_LEVEL, { service });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  await mkdir(resolve(config.DATA_DIR), { recursive: true });
  const db = await openDatabase(
    config.DATABASE_URL ? { url: config.DATABASE_URL } : { dataDir: config.DATA_DIR },
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

/** ClickHouse at CLICKHOUSE_URL, else the embedded engine under DATA_DIR/clickhouse; migrated. */
export async function openClickHouse(config: Config): Promise<ClickHouse> {
  const ch = config.CLICKHOUSE_URL
    ? createClickHouse({
        kind: 'server',
        url: config.CLICKHOUSE_URL,
        username: config.CLICKHOUSE_USER,
        password: config.CLICKHOUSE_PASSWORD,
        database: config.CLICKHOUSE_DATABASE,
      })
    : createClickHouse({
        kind: 'embedded',
        dataDir: embeddedClickHousePath(config.DATA_DIR),
        queryPoolSize: config.CLICKHOUSE_QUERY_POOL,
      });
  try {
    await ch.ensureDatabase();
    await migrateClickHouse(ch, MIGRATIONS.clickhouse);
    return ch;
  } catch (err) {
    await ch.close();
    throw err;
  }
}
export * from './serve';
export * from './service';
