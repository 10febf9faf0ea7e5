import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Session } from 'chdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLICKHOUSE_MIGRATIONS, tempDir } from '../../../test/helpers';
import { ClusterSchema, migrationsTableStatement, planClickHouseMigrations, splitStatements } from '../src';

// The cluster form of the migrations (src/cluster.ts). Whether the engine runs it against
// Distributed tables is shown by the suites under TEST_CLICKHOUSE=cluster; here: its shape,
// and that the engine parses every statement as generated (ON CLUSTER, Replicated engines).
let engine: Session;
let dir: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  dir = await tempDir('cluster-parse');
  engine = new Session(dir.path);
});
afterAll(async () => {
  engine.close();
  await dir.remove();
});

const all = async (cluster: string) =>
  (await planClickHouseMigrations(CLICKHOUSE_MIGRATIONS, cluster)).flatMap((m) => m.statements);

describe('cluster form of the migrations', () => {
  it('is parsed by the engine, every statement as generated', async () => {
    const statements = [migrationsTableStatement('trackhouse'), ...(await all('trackhouse'))];
    for (const statement of statements) {
      const result = await engine.queryBindAsync(
        'SELECT formatQuery({q:String}) AS f',
        { q: statement },
        {
          format: 'JSONEachRow',
        },
      );
      const formatted = result.json<{ f: string }>().f;
      // The engine's own rendering keeps the cluster parts: nothing was dropped on the way.
      expect(formatted.length).toBeGreaterThan(0);
      if (!/^INSERT/i.test(statement)) expect(formatted).toContain('ON CLUSTER trackhouse');
    }
    expect(statements.length).toBeGreaterThan(10);
  });

  it('puts every MergeTree table on a replicated local table behind a Distributed table sharded by session', async () => {
    const statements = await all('analytics');
    for (const table of ['events', 'events_by_name', 'sessions']) {
      const local = statements.find((s) =>
        s.startsWith(`CREATE TABLE IF NOT EXISTS ${table}_local ON CLUSTER analytics`),
      );
      expect(local).toMatch(
        /ENGINE = Replicated\w*MergeTree\('\/clickhouse\/tables\/\{shard\}\/\{database\}\/\{table\}', '\{replica\}'/,
      );
      expect(statements).toContain(
        `CREATE TABLE IF NOT EXISTS ${table} ON CLUSTER analytics AS ${table}_local\nENGINE = Distributed(analytics, currentDatabase(), ${table}_local, cityHash64(site_id, session_id))`,
      );
    }
    // Tables without sessions: by their sorting key, so rows a merge folds meet on one shard.
    expect(
      statements.some((s) =>
        s.includes(
          'Distributed(analytics, currentDatabase(), site_pages_local, cityHash64(site_id, pathname))',
        ),
      ),
    ).toBe(true);
    expect(statements.join('\n')).not.toMatch(
      /non_replicated_deduplication_window|ENGINE = (Aggregating|Replacing)?MergeTree\b/,
    );
    expect(statements.join('\n')).toContain('replicated_deduplication_window = 10000');
  });

  it('rolls up on the local tables and backfills through the Distributed ones', async () => {
    const statements = await all('c1');
    const views = statements.filter((s) => s.startsWith('CREATE MATERIALIZED VIEW'));
    // One per view of the single-node files, each reading and filling local tables.
    const files = await Promise.all(
      (await readdir(CLICKHOUSE_MIGRATIONS)).map((f) => readFile(join(CLICKHOUSE_MIGRATIONS, f), 'utf8')),
    );
    const declared = files.join('\n').match(/^CREATE MATERIALIZED VIEW/gm) ?? [];
    expect(views.length).toBe(declared.length);
    expect(views.length).toBeGreaterThanOrEqual(3);
    for (const view of views) {
      expect(view).toMatch(/ON CLUSTER c1 TO \w+_local\nAS /);
      expect(view).toMatch(/FROM \w+_local\b/);
      expect(view).not.toMatch(/FROM (events|identifies)\b(?!_local)/);
    }
    const inserts = statements.filter((s) => s.startsWith('INSERT'));
    expect(inserts.length).toBeGreaterThan(0);
    for (const insert of inserts) expect(insert).not.toContain('_local');
    expect(inserts.join('\n')).toContain('GLOBAL NOT IN (SELECT event_id FROM events_by_name)');
  });

  it('sends column changes to both tables and codecs to the local one only', () => {
    const schema = new ClusterSchema('c');
    schema.rewrite(
      'CREATE TABLE IF NOT EXISTS t (site_id UInt32, x String) ENGINE = MergeTree ORDER BY site_id',
    );
    expect(schema.rewrite('ALTER TABLE t MODIFY COLUMN x String CODEC(ZSTD(3))')).toEqual([
      'ALTER TABLE t_local ON CLUSTER c MODIFY COLUMN x String CODEC(ZSTD(3))',
      'ALTER TABLE t ON CLUSTER c MODIFY COLUMN x String',
    ]);
    expect(schema.rewrite('ALTER TABLE t ADD INDEX x_idx x TYPE bloom_filter GRANULARITY 1')).toEqual([
      'ALTER TABLE t_local ON CLUSTER c ADD INDEX x_idx x TYPE bloom_filter GRANULARITY 1',
    ]);
  });

  it('covers a new migration in the existing style without edits (engine arguments, keys, drops)', async () => {
    const file = `-- A profile per person; the newest version wins.
CREATE TABLE IF NOT EXISTS profiles
(
    site_id    UInt32,
    person_id  String,
    traits     String CODEC(ZSTD(3)),
    version    UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (site_id, person_id);

CREATE TABLE IF NOT EXISTS session_replays
(
    site_id    UInt32,
    session_id UUID,
    chunk      UInt32,
    data       String
)
ENGINE = MergeTree
ORDER BY (site_id, session_id, chunk)
SETTINGS non_replicated_deduplication_window = 1000;

DROP TABLE IF EXISTS old_thing;
`;
    const schema = new ClusterSchema('c');
    const out = splitStatements(file).flatMap((s) => schema.rewrite(s));
    expect(out[0]).toContain(
      "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', version)",
    );
    expect(out[1]).toContain(
      'Distributed(c, currentDatabase(), profiles_local, cityHash64(site_id, person_id))',
    );
    expect(out[3]).toContain(
      'Distributed(c, currentDatabase(), session_replays_local, cityHash64(site_id, session_id))',
    );
    expect(out[4]).toBe('DROP TABLE IF EXISTS old_thing ON CLUSTER c');
    for (const statement of out) {
      await engine.queryBindAsync('SELECT formatQuery({q:String})', { q: statement });
    }
  });

  it('refuses a statement it cannot translate instead of applying it on one node', () => {
    const schema = new ClusterSchema('c');
    expect(() => schema.rewrite('RENAME TABLE a TO b')).toThrow(/cannot translate/);
    expect(() => new ClusterSchema('bad-name')).toThrow(/plain identifier/);
  });
});
