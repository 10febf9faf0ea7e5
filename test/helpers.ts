import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ClickHouse, createClickHouse, migrateClickHouse } from '@trackhouse/clickhouse';
import { connect, migratePostgres, type Pool } from '@trackhouse/postgres';
import { inject } from 'vitest';

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

/** The embedded ClickHouse engine on a fresh data directory, migrated. One per test file. */
export async function createTestClickHouse(): Promise<{
  ch: ClickHouse;
  dir: string;
  close: () => Promise<void>;
}> {
  const dir = await tempDir('ch');
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

export { cleanEnv, type RunResult, runEntry, type StartedServer, startEntry } from './processes';
