import { type ChildProcess, spawn } from 'node:child_process';
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

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a TypeScript entry point of this repo in its own Node process (through tsx). */
export function runEntry(
  entry: string,
  args: string[],
  env: Record<string, string | undefined>,
): Promise<RunResult> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, entry), ...args], {
      cwd: ROOT,
      env: { ...cleanEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolveRun({ code, stdout, stderr }));
  });
}

/** The parent's environment without trackhouse's own variables, so tests choose every store. */
export function cleanEnv(): Record<string, string | undefined> {
  const env = { ...process.env };
  for (const key of ['DATABASE_URL', 'REDIS_URL', 'CLICKHOUSE_URL', 'DATA_DIR', 'SECRET', 'PORT', 'HOST'])
    delete env[key];
  return env;
}

export interface StartedServer {
  url: string;
  child: ChildProcess;
  output: () => string;
  stop: (signal?: NodeJS.Signals) => Promise<number | null>;
}

/** Starts a server entry point on a free port and resolves once it printed its URL. */
export function startEntry(entry: string, env: Record<string, string | undefined>): Promise<StartedServer> {
  return new Promise((resolveStart, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, entry)], {
      cwd: ROOT,
      env: { ...cleanEnv(), PORT: '0', LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const onData = (d: Buffer) => {
      output += d.toString();
      const match = output.match(/listening on (http:\/\/\S+)/);
      if (match) {
        resolveStart({
          url: match[1]!,
          child,
          output: () => output,
          stop: async (signal = 'SIGTERM') => {
            if (child.exitCode === null) child.kill(signal);
            return exited;
          },
        });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (d: Buffer) => {
      output += d.toString();
    });
    child.once('exit', (code) => reject(new Error(`exited with ${code} before listening:\n${output}`)));
  });
}
