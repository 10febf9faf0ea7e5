import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ClickHouse } from './client';

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

/**
 * Applies `NNNN_name.sql` files in name order, once each, recording them in
 * `schema_migrations`. Statements must be idempotent (IF NOT EXISTS) so that two processes
 * migrating at once, or a crash between a statement and its record, are harmless.
 */
export async function migrateClickHouse(ch: ClickHouse, dir: string): Promise<MigrationResult> {
  await ch.command(
    `CREATE TABLE IF NOT EXISTS schema_migrations (name String, applied_at DateTime64(3, 'UTC') DEFAULT now64(3))
     ENGINE = ReplacingMergeTree ORDER BY name`,
  );
  const done = new Set(
    (await ch.query<{ name: string }>('SELECT name FROM schema_migrations FINAL')).map((r) => r.name),
  );
  const files = (await readdir(dir)).filter((f) => /^\d+_.+\.sql$/.test(f)).sort();
  const result: MigrationResult = { applied: [], skipped: [] };
  for (const file of files) {
    if (done.has(file)) {
      result.skipped.push(file);
      continue;
    }
    for (const statement of splitStatements(await readFile(join(dir, file), 'utf8'))) {
      await ch.command(statement);
    }
    await ch.writer.insert({ table: 'schema_migrations', values: [{ name: file }], format: 'JSONEachRow' });
    result.applied.push(file);
  }
  return result;
}
