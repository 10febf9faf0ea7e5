import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pool } from './database';

/** Any constant works; it only has to be the same for every trackhouse process. */
const MIGRATION_LOCK = 74_726_163;

/**
 * Applies `NNNN_name.sql` files in name order, each in its own transaction, recorded in
 * `schema_migrations`. An advisory lock serializes processes that start at the same time.
 */
export async function migratePostgres(sql: Pool, dir: string): Promise<{ applied: string[] }> {
  const files = (await readdir(dir)).filter((f) => /^\d+_.+\.sql$/.test(f)).sort();
  const applied: string[] = [];
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx`create table if not exists schema_migrations (name text primary key, applied_at timestamptz not null default now())`;
    const done = new Set(
      (await tx<{ name: string }[]>`select name from schema_migrations`).map((r) => r.name),
    );
    for (const file of files) {
      if (done.has(file)) continue;
      await tx.unsafe(await readFile(join(dir, file), 'utf8'));
      await tx`insert into schema_migrations (name) values (${file})`;
      applied.push(file);
    }
  });
  return { applied };
}
