import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ClickHouse, createClickHouse, migrateClickHouse } from '@trackhouse/clickhouse';
import { connect, migratePostgres, type Pool } from '@trackhouse/postgres';
import { inject } from 'vitest';
import { startClickHouseBridge } from './clickhouse-http-bridge';
import { runEntry, startEntry } from './processes';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const CLICKHOUSE_MIGRATIONS = join(ROOT, 'infra/clickhouse');
export const POSTGRES_MIGRATIONS = join(ROOT, 'infra/postgres');

export async function tempDir(prefix: string): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `trackhouse-${prefix}-`));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
}

/** A fresh, migrated database of its own on the test server; dropped by `drop()`. */
export async function createTestDatabase(): Promise<{ sql: Pool; url: string; drop: () => Promise<void> }> {
  const serverUrl = inject('postgresUrl');
  const admin = connect(serverUrl, 1);
  const name = uniqueName('th_test');
  await admin.unsafe(`create database ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const sql = connect(url.toString(), 5);
  await migratePostgres(sql, POSTGRES_MIGRATIONS);
  return {
    sql,
    url: url.toString(),
    drop: async () => {
      await sql.end({ timeout: 5 });
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end({ timeout: 5 });
    },
  };
}

/**
 * How the test suites reach ClickHouse: `embedded` (default) opens the engine in-process;
 * `http` (TEST_CLICKHOUSE=http) starts the HTTP bridge in front of it and connects with the
 * server form, so the production server path (HTTP, URL settings, streamed inserts) runs;
 * `cluster` (TEST_CLICKHOUSE=cluster) does the same with the cluster form of the schema.
 */
export type TestClickHouseMode = 'embedded' | 'http' | 'cluster';
export const TEST_CLICKHOUSE: TestClickHouseMode =
  process.env.TEST_CLICKHOUSE === 'http' || process.env.TEST_CLICKHOUSE === 'cluster'
    ? process.env.TEST_CLICKHOUSE
    : 'embedded';

/** A fresh ClickHouse on a fresh data directory, migrated. One per test file. */
export async function createTestClickHouse(mode: TestClickHouseMode = TEST_CLICKHOUSE): Promise<{
  ch: ClickHouse;
  dir: string;
  /** The bridge's address in `http` mode. */
  url?: string;
  close: () => Promise<void>;
}> {
  const dir = await tempDir('ch');
  if (mode !== 'embedded') {
    // `cluster`: the cluster form of the schema (Distributed tables over local ones) on an
    // engine configured as a one-node cluster (see the bridge for what that leaves out).
    const cluster = mode === 'cluster' ? 'trackhouse' : undefined;
    const bridge = await startClickHouseBridge({
      dataDir: dir.path,
      username: 'tester',
      password: 'pw',
      ...(cluster ? { cluster } : {}),
    });
    // A database other than `default`, so that the configured name is honoured everywhere.
    const ch = createClickHouse({
      kind: 'server',
      url: bridge.url,
      username: 'tester',
      password: 'pw',
      database: 'trackhouse_test',
      ...(cluster ? { cluster } : {}),
    });
    try {
      await ch.ensureDatabase();
      await migrateClickHouse(ch, CLICKHOUSE_MIGRATIONS);
    } catch (err) {
      await ch.close();
      await bridge.close();
      throw err;
    }
    return {
      ch,
      dir: dir.path,
      url: bridge.url,
      close: async () => {
        await ch.close();
        await bridge.close();
        await dir.remove();
      },
    };
  }
  const ch = createClickHouse({ kind: 'embedded', dataDir: dir.path, queryPoolSize: 2 });
  await migrateClickHouse(ch, CLICKHOUSE_MIGRATIONS);
  return {
    ch,
    dir: dir.path,
    close: async () => {
      await ch.close();
      await dir.remove();
    },
  };
}

/**
 * The standalone server on a database and data directory of its own, initialized (`trackhouse
 * init`) with an organization, an API key and a site for `domain`; ingest flushes every 100 ms.
 */
export async function startStandaloneSite(prefix: string, domain: string) {
  const db = await createTestDatabase();
  const dir = await tempDir(prefix);
  const env = { DATA_DIR: dir.path, DATABASE_URL: db.url, INGEST_FLUSH_INTERVAL_MS: '100' };
  const init = await runEntry('apps/cli/src/main.ts', ['init', '--domain', domain, '--json'], env);
  const site = JSON.parse(init.stdout) as { siteId: number; apiKey: string };
  const server = await startEntry('apps/server/src/main.ts', env);
  return {
    server,
    site,
    stop: async () => {
      await server.stop();
      await db.drop();
      await dir.remove();
    },
  };
}

export {
  cleanEnv,
  type RunResult,
  runCommand,
  runEntry,
  type SpawnedEntry,
  type StartedServer,
  spawnEntry,
  startEntry,
} from './processes';
