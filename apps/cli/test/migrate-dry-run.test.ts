import { readdir } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runEntry, tempDir } from '../../../test/helpers';

// `migrate --dry-run` prints the ClickHouse SQL of the configured mode from the files alone:
// the stores below are unreachable and the data directory must stay empty.
let dataDir: Awaited<ReturnType<typeof tempDir>>;
const UNREACHABLE = {
  DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
  CLICKHOUSE_URL: 'http://127.0.0.1:1',
};

beforeAll(async () => {
  dataDir = await tempDir('dry-run');
});
afterAll(async () => {
  await dataDir.remove();
});

const dryRun = (env: Record<string, string>) =>
  runEntry('apps/cli/src/main.ts', ['migrate', '--dry-run'], {
    ...UNREACHABLE,
    DATA_DIR: dataDir.path,
    ...env,
  });

/** The statements of the output: blank-line-separated blocks, comment lines aside. */
const statements = (stdout: string) =>
  stdout
    .trim()
    .split(/\n\s*\n/)
    .map((block) =>
      block
        .split('\n')
        .filter((line) => !line.startsWith('--'))
        .join('\n'),
    )
    .filter((s) => s.length > 0);

describe('trackhouse migrate --dry-run', () => {
  it('prints the single-node statements, one per block, touching nothing', async () => {
    const r = await dryRun({});
    expect(r.code).toBe(0);
    const sql = statements(r.stdout);
    expect(sql[0]).toMatch(
      /^CREATE TABLE IF NOT EXISTS schema_migrations .*\nENGINE = ReplacingMergeTree ORDER BY name;$/s,
    );
    expect(sql.some((s) => /^CREATE TABLE IF NOT EXISTS events\n\(/.test(s))).toBe(true);
    for (const s of sql) {
      expect(s.endsWith(';')).toBe(true);
      expect(s.slice(0, -1)).not.toContain(';\n');
      expect(s).not.toMatch(/ON CLUSTER|_local\b|Distributed|Replicated/);
    }
    expect(await readdir(dataDir.path)).toEqual([]);
  });

  it('prints the cluster form when CLICKHOUSE_CLUSTER is set', async () => {
    const r = await dryRun({ CLICKHOUSE_CLUSTER: 'analytics' });
    expect(r.code).toBe(0);
    const sql = statements(r.stdout);
    expect(sql[0]).toContain('ON CLUSTER analytics');
    expect(sql[0]).toContain('ReplicatedReplacingMergeTree');
    expect(sql).toContain(
      'CREATE TABLE IF NOT EXISTS events ON CLUSTER analytics AS events_local\nENGINE = Distributed(analytics, currentDatabase(), events_local, cityHash64(site_id, session_id));',
    );
    for (const s of sql) if (!s.startsWith('INSERT')) expect(s).toContain('ON CLUSTER analytics');
    expect(await readdir(dataDir.path)).toEqual([]);
  });

  it('refuses a cluster name that is not an identifier', async () => {
    const r = await dryRun({ CLICKHOUSE_CLUSTER: "x'; DROP" });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('CLICKHOUSE_CLUSTER');
  });
});
