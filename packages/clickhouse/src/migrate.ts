import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ClickHouse } from './client';
import { ClusterSchema } from './cluster';

export interface MigrationResult {
  applied: string[];
  skipped: string[];
}

/** Statements of one migration file, split on semicolons that end a line. */
export function splitStatements(sql: string): string[] {
  return sql
    .split(/;\s*(?:\n|$)/)
    .map((s) =>
      s
        .split('\n')
        .filter((line) => !line.trimStart().startsWith('--'))
        .join('\n')
        .trim(),
    )
    .filter((s) => s.length > 0);
}

/** The table recording applied migrations; on a cluster, one replicated copy on every node. */
export function migrationsTableStatement(cluster?: string): string {
  const columns = "(name String, applied_at DateTime64(3, 'UTC') DEFAULT now64(3))";
  if (!cluster)
    return `CREATE TABLE IF NOT EXISTS schema_migrations ${columns}\nENGINE = ReplacingMergeTree ORDER BY name`;
  new ClusterSchema(cluster); // validates the name
  return `CREATE TABLE IF NOT EXISTS schema_migrations ON CLUSTER ${cluster} ${columns}
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{database}/schema_migrations', '{replica}') ORDER BY name`;
}

export interface PlannedMigration {
  file: string;
  statements: string[];
}

/**
 * The statements of every migration file for the given mode: as written for a single node, or
 * their cluster form (cluster.ts) when `cluster` is set. Reads files only.
 */
export async function planClickHouseMigrations(dir: string, cluster?: string): Promise<PlannedMigration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d+_.+\.sql$/.test(f)).sort();
  const schema = cluster ? new ClusterSchema(cluster) : undefined;
  const plan: PlannedMigration[] = [];
  for (const file of files) {
    const statements = splitStatements(await readFile(join(dir, file), 'utf8'));
    plan.push({ file, statements: schema ? statements.flatMap((s) => schema.rewrite(s)) : statements });
  }
  return plan;
}

/**
 * Applies `NNNN_name.sql` files in name order, once each, recording them in
 * `schema_migrations`, in the form of the handle's mode (single node or `ch.cluster`).
 * Statements must be idempotent (IF NOT EXISTS) so that two processes migrating at once, or a
 * crash between a statement and its record, are harmless.
 */
export async function migrateClickHouse(ch: ClickHouse, dir: string): Promise<MigrationResult> {
  await ch.command(migrationsTableStatement(ch.cluster));
  const done = new Set(
    (await ch.query<{ name: string }>('SELECT name FROM schema_migrations FINAL')).map((r) => r.name),
  );
  const result: MigrationResult = { applied: [], skipped: [] };
  for (const { file, statements } of await planClickHouseMigrations(dir, ch.cluster)) {
    if (done.has(file)) {
      result.skipped.push(file);
      continue;
    }
    for (const statement of statements) await ch.command(statement);
    await ch.writer.insert({ table: 'schema_migrations', values: [{ name: file }], format: 'JSONEachRow' });
    result.applied.push(file);
  }
  return result;
}
