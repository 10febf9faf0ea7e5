import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { uuidv7, uuidv7FromSeed } from '@trackhouse/core';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLICKHOUSE_MIGRATIONS, createTestClickHouse } from '../../../test/helpers';
import {
  type ClickHouse,
  compactSessionDays,
  LOCAL_SUFFIX,
  migrateClickHouse,
  Params,
  planClickHouseMigrations,
  readRollup,
  rollupSessionRows,
  type Settled,
  sessionPartitions,
  settledParts,
  splitStatements,
  VISITOR_ATTRIBUTES,
  withParams,
  withReadLimits,
} from '../src';

let handle: Awaited<ReturnType<typeof createTestClickHouse>>;
let ch: ClickHouse;

beforeAll(async () => {
  handle = await createTestClickHouse();
  ch = handle.ch;
});
afterAll(async () => {
  await handle.close();
});

/** The table holding a table's rows: itself, or on a cluster its local table. */
const storage = (table: string) => (ch.cluster ? `${table}${LOCAL_SUFFIX}` : table);

const row = (siteId: number, eventId: string, ts: string) => ({
  site_id: siteId,
  timestamp: ts,
  event_id: eventId,
  type: 'pageview',
  event_name: '',
  properties: '{"plan":"pro","n":2}',
  props: { plan: 'pro', n: '2' },
  pathname: '/',
});

describe('embedded ClickHouse', () => {
  it('has applied the migrations once and skips them on a second run', async () => {
    const applied = await ch.query<{ name: string }>(
      'SELECT name FROM schema_migrations FINAL ORDER BY name',
    );
    const files = (await readdir(CLICKHOUSE_MIGRATIONS)).filter((f) => f.endsWith('.sql')).sort();
    expect(files.length).toBeGreaterThanOrEqual(2);
    expect(applied.map((r) => r.name)).toEqual(files);
    expect(await migrateClickHouse(ch, CLICKHOUSE_MIGRATIONS)).toEqual({ applied: [], skipped: files });
  });

  it('orders the events table by site, then time', async () => {
    const [table] = await ch.query<{ sorting_key: string }>(
      'SELECT sorting_key FROM system.tables WHERE database = currentDatabase() AND name = {t:String}',
      { t: storage('events') },
    );
    expect(table?.sorting_key).toBe('site_id, timestamp, event_id');
  });

  it('answers 64-bit integers as numbers and binds parameters', async () => {
    const [r] = await ch.query<{ n: number; big: number; s: string }>(
      'SELECT toUInt64({n:UInt64}) AS n, count() AS big, {s:String} AS s FROM numbers(3)',
      { n: 7, s: "it's; DROP TABLE events" },
    );
    expect(r).toEqual({ n: 7, big: 3, s: "it's; DROP TABLE events" });
  });

  it('gives back every parameter value exactly, sent as SET statements or bound when long', async () => {
    const query = `SELECT {s:String} AS s, {a:Array(String)} AS a, {n:Int64} AS n, {u:UUID} AS u,
      toString({k:Array(UInt64)}) AS k, length({a:Array(String)}) AS len`;
    // Texts whose escaping matters twice over (the parameter's text, then the SQL literal),
    // any code point, and lists long enough to take the bound form.
    const hostile = fc.oneof(
      fc.string({ unit: fc.constantFrom("'", '\\', '\0', '\t', '\n', '\r', ';', '"', '{', '}', 'x', '\\N') }),
      fc.string({ unit: 'grapheme' }),
      fc.string({ unit: 'binary', maxLength: 40 }).filter((s) => s === Buffer.from(s).toString()),
    );
    await fc.assert(
      fc.asyncProperty(
        hostile,
        fc.array(hostile, { maxLength: 5 }),
        fc.bigInt({ min: -(2n ** 53n) + 1n, max: 2n ** 53n - 1n }),
        fc.uuid(),
        fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        fc.boolean(),
        async (s, list, n, u, key, long) => {
          const a = long
            ? [...list, ...Array.from({ length: 2_000 }, (_, i) => `${i}`.padEnd(60, 'y'))]
            : list;
          const params = { s, a, n: Number(n), u, k: [key, 0n] };
          expect(withParams(query, params) === undefined).toBe(long);
          const [r] = await ch.query<Record<string, unknown>>(query, params);
          expect(r).toEqual({ s, a, n: Number(n), u, k: `[${key},0]`, len: a.length });
        },
      ),
      { numRuns: 150 },
    );
  });

  it("applies a read's settings, with the parameters long or short", async () => {
    const query = `SELECT getSetting('max_execution_time') AS t, getSetting('timeout_overflow_mode') AS mode,
      toUInt64(1) AS n, length({a:Array(String)}) AS len`;
    for (const [seconds, length] of [
      [7.5, 1],
      [11, 3_000],
    ] as const) {
      const a = Array.from({ length }, (_, i) => `${i}`.padEnd(60, 'y'));
      const [r] = await ch.query<Record<string, unknown>>(
        query,
        { a },
        { max_execution_time: seconds, timeout_overflow_mode: 'throw' },
      );
      // The normalized settings too: 64-bit integers as numbers.
      expect(r).toEqual({ t: seconds, mode: 'throw', n: 1, len: length });
    }
  });

  it("plans the embedded engine's reads and writes without the comparison-chain pass; a server is not sent it", async () => {
    const setting = "SELECT getSetting('optimize_and_compare_chain') AS v, sleep(0.05) AS z";
    // Reads at once go to every connection of the pool (each to the least busy one).
    const reads = await Promise.all(Array.from({ length: 6 }, () => ch.query<{ v: unknown }>(setting)));
    const writer = await (await ch.writer.query({ query: setting, format: 'JSONEachRow' })).json<{
      v: unknown;
    }>();
    // The server form (the test bridge in front of the same engine) keeps the engine's default.
    const expected = ch.kind === 'embedded' ? 0 : 1;
    expect([...reads.map(([r]) => Number(r?.v)), Number(writer[0]?.v)]).toEqual(Array(7).fill(expected));
  });

  it('runs reads side by side on the pool, each with its own parameters', async () => {
    // Reads sent while a first one sleeps find it running (one after the other, they would find
    // nothing: the first would have ended). They look until it ends, since on a loaded machine
    // the first may start after the second has looked. The embedded form's own pool; the test
    // HTTP bridge in front of the engine binds, and so takes its reads in turn.
    if (ch.kind === 'embedded') {
      const marker = `side_by_side_${Date.now()}`;
      let ended = false;
      const first = ch.query(`SELECT sleep(1) AS ${marker}, {v:UInt8} AS v`, { v: 1 }).finally(() => {
        ended = true;
      });
      let running = 0;
      while (!ended && running === 0) {
        const [row] = await ch.query<{ n: number }>(
          'SELECT count() AS n FROM system.processes WHERE position(query, {m:String}) > 0 AND query_id != queryID()',
          { m: marker },
        );
        running = Number(row?.n ?? 0);
      }
      await first;
      expect(running).toBe(1);
    }
    const values = Array.from({ length: 120 }, (_, i) => `v${i}'\\${'x'.repeat(i)}`);
    const answers = await Promise.all(
      values.map((v, i) =>
        ch.query<{ v: string; i: number }>('SELECT {v:String} AS v, {i:UInt32} AS i, sleep(0.001) AS z', {
          v,
          i,
        }),
      ),
    );
    expect(answers.map(([r]) => [r?.v, r?.i])).toEqual(values.map((v, i) => [v, i]));
  });

  it('drops a replayed batch that carries the same deduplication token', async () => {
    const values = [
      row(1, '0190a6c0-0000-7000-8000-000000000001', '2026-11-21 05:00:00.001'),
      row(1, '0190a6c0-0000-7000-8000-000000000002', '2026-11-21 05:00:00.001'),
    ];
    for (let attempt = 0; attempt < 3; attempt++) {
      await ch.writer.insert({
        table: 'events',
        values,
        format: 'JSONEachRow',
        clickhouse_settings: { insert_deduplication_token: 'batch-1' },
      });
    }
    await ch.writer.insert({
      table: 'events',
      values: [row(1, '0190a6c0-0000-7000-8000-000000000003', '2026-11-21 05:00:01.000')],
      format: 'JSONEachRow',
      clickhouse_settings: { insert_deduplication_token: 'batch-2' },
    });
    const [c] = await ch.query<{ c: number }>(
      'SELECT count() AS c FROM events WHERE site_id = {site:UInt32}',
      { site: 1 },
    );
    expect(c?.c).toBe(3);
  });

  it('does not carry the deduplication token of one insert over to the next insert on the connection', async () => {
    // The embedded engine applies a call's settings to its connection, where they stay.
    await ch.writer.insert({
      table: 'events',
      values: [row(7, '0190a6c0-0000-7000-8000-000000000071', '2026-11-21 06:00:00.000')],
      format: 'JSONEachRow',
      clickhouse_settings: { insert_deduplication_token: 'sticky-1' },
    });
    for (const id of ['72', '73']) {
      await ch.writer.insert({
        table: 'events',
        values: [row(7, `0190a6c0-0000-7000-8000-0000000000${id}`, '2026-11-21 06:00:01.000')],
        format: 'JSONEachRow',
      });
    }
    const [c] = await ch.query<{ c: number }>('SELECT count() AS c FROM events WHERE site_id = 7');
    expect(c?.c).toBe(3);
  });

  it('copies custom events and outbound clicks into events_by_name once, replays included', async () => {
    const values = [
      {
        ...row(2, '0190a6c0-0000-7000-8000-000000000011', '2026-11-21 05:00:00.001'),
        type: 'custom_event',
        event_name: 'signup',
      },
      { ...row(2, '0190a6c0-0000-7000-8000-000000000012', '2026-11-21 05:00:00.002'), type: 'outbound' },
      row(2, '0190a6c0-0000-7000-8000-000000000013', '2026-11-21 05:00:00.003'),
    ];
    for (let attempt = 0; attempt < 2; attempt++) {
      await ch.writer.insert({
        table: 'events',
        values,
        format: 'JSONEachRow',
        clickhouse_settings: { insert_deduplication_token: 'by-name-1' },
      });
    }
    // The migration's copy of earlier rows can run again without copying anything twice.
    const migration = splitStatements(
      await readFile(join(CLICKHOUSE_MIGRATIONS, '0002_events_by_name.sql'), 'utf8'),
    );
    await ch.command(migration.find((s) => s.startsWith('INSERT INTO events_by_name'))!);
    const rows = await ch.query<{ type: string; event_name: string }>(
      'SELECT type, event_name FROM events_by_name WHERE site_id = 2 ORDER BY type',
    );
    expect(rows).toEqual([
      { type: 'custom_event', event_name: 'signup' },
      { type: 'outbound', event_name: '' },
    ]);
  });

  it('rolls a session split over batches, replays and a rerun copy into one row', async () => {
    const session = '0190a6c0-0000-7000-8000-0000000000aa';
    const inSession = (eventId: string, ts: string, pathname: string, type = 'pageview') => ({
      ...row(3, eventId, ts),
      session_id: session,
      pathname,
      type,
    });
    const batches = [
      [
        inSession('0190a6c0-0000-7000-8000-000000000021', '2026-11-21 06:00:05.000', '/b'),
        inSession('0190a6c0-0000-7000-8000-000000000022', '2026-11-21 06:00:01.000', '/a'),
      ],
      [
        inSession('0190a6c0-0000-7000-8000-000000000023', '2026-11-21 06:09:00.000', '/a'),
        inSession('0190a6c0-0000-7000-8000-000000000024', '2026-11-21 06:10:00.000', '/c', 'custom_event'),
      ],
    ];
    for (const [n, values] of [...batches.entries(), [0, batches[0]!] as const]) {
      await ch.writer.insert({
        table: 'events',
        values,
        format: 'JSONEachRow',
        clickhouse_settings: { insert_deduplication_token: `sessions-${n}` },
      });
    }
    const migration = splitStatements(
      await readFile(join(CLICKHOUSE_MIGRATIONS, '0003_sessions.sql'), 'utf8'),
    );
    for (const statement of migration.filter((s) => s.startsWith('INSERT'))) await ch.command(statement);

    const rows = await ch.query<{ s: string; e: string; pages: string[]; paths: string[] }>(
      `SELECT toString(session_start) AS s, toString(session_end) AS e,
         arraySort(arrayMap(h -> toString(h), page_hashes)) AS pages,
         (SELECT arraySort(groupArray(toString(cityHash64(pathname)))) FROM site_pages FINAL
          WHERE site_id = 3) AS paths
       FROM sessions FINAL WHERE site_id = 3`,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.s).toBe('2026-11-21 06:00:01.000');
    expect(rows[0]!.e).toBe('2026-11-21 06:10:00.000');
    // Pageview paths only (not the custom event's), once each; the site's pages likewise.
    expect(rows[0]!.pages).toHaveLength(2);
    expect(rows[0]!.pages).toEqual(rows[0]!.paths);
  });

  it('partitions the rollups by the day a session began and merges past days on request', async () => {
    // Session ids carry their start (UUID v7): 2026-11-19 and 2026-11-21, UTC.
    const past = uuidv7(Date.parse('2026-11-19T10:00:00Z'));
    const today = uuidv7(Date.parse('2026-11-21T10:00:00Z'));
    for (const [n, ts] of ['2026-11-21 10:00:00.000', '2026-11-21 10:05:00.000'].entries()) {
      await ch.writer.insert({
        table: 'events',
        values: [past, today].map((session, i) => ({
          ...row(4, uuidv7(Date.parse(`${ts.replace(' ', 'T')}Z`) + i), ts),
          session_id: session,
        })),
        format: 'JSONEachRow',
        clickhouse_settings: { insert_deduplication_token: `compact-${n}` },
      });
    }
    const parts = async (rollup: string) =>
      Object.fromEntries(
        (
          await ch.query<{ id: string; n: number }>(
            `SELECT partition_id AS id, count() AS n FROM system.parts
             WHERE database = currentDatabase() AND table = {t:String} AND active
               AND partition_id IN ('20261119', '20261121')
             GROUP BY id`,
            { t: storage(rollup) },
          )
        ).map((r) => [r.id, r.n]),
      );
    for (const rollup of ['sessions', 'session_facts', 'session_paths']) {
      expect({ rollup, parts: await parts(rollup) }).toEqual({
        rollup,
        parts: { '20261119': 2, '20261121': 2 },
      });
    }
    const merged = await compactSessionDays(ch, new Date('2026-11-21T12:00:00Z'));
    expect(merged).toContain('sessions:20261119');
    expect(merged).toContain('session_facts:20261119');
    expect(merged).toContain('session_paths:20261119');
    expect(merged.filter((m) => m.endsWith(':20261121'))).toEqual([]);
    for (const rollup of ['sessions', 'session_facts', 'session_paths']) {
      expect({ rollup, parts: await parts(rollup) }).toEqual({
        rollup,
        parts: { '20261119': 1, '20261121': 2 },
      });
      const [merged] = await ch.query<{ n: number }>(
        `SELECT count() AS n FROM ${rollup} WHERE site_id = 4 AND session_id = {s:UUID}`,
        { s: past },
      );
      expect({ rollup, n: merged?.n }).toEqual({ rollup, n: 1 });
    }
  });

  it('reads the session rollup again, merged, when a part it read unmerged was merged away meanwhile', async () => {
    // A day of its own: one session, stored in one insert (one part), then a late event and a
    // merge land while the first read runs. Later than any id made so far (ids only grow).
    const session = uuidv7(Date.parse('2027-01-15T10:00:00Z'));
    const at = (ts: string, n: number) => ({
      ...row(78, uuidv7(Date.parse(`${ts.replace(' ', 'T')}Z`) + n), ts),
      session_id: session,
    });
    const insert = (values: object[], token: string) =>
      ch.writer.insert({
        table: 'events',
        values,
        format: 'JSONEachRow',
        clickhouse_settings: { insert_deduplication_token: token },
      });
    await insert([at('2027-01-15 10:00:00.000', 0), at('2027-01-15 10:05:00.000', 1)], 'settled-1');
    const onCluster = ch.cluster ? ` ON CLUSTER ${ch.cluster}` : '';
    const merge = () =>
      ch.command(`OPTIMIZE TABLE ${storage('session_facts')}${onCluster} PARTITION ID '20270115' FINAL`);
    await merge(); // one part, whatever the engine did with the insert's blocks
    const calls: (Settled | undefined)[] = [];
    const total = await readRollup(ch, async (settled) => {
      calls.push(settled);
      if (calls.length === 1) {
        await insert([at('2027-01-15 10:09:00.000', 2)], 'settled-2');
        await merge();
      }
      const p = new Params();
      const rows = await rollupSessionRows(ch, p, 78, { timeZone: 'UTC', filters: [] }, ['events'], settled);
      return ch.query<{ n: number }>(`SELECT sum(s_events) AS n FROM (${rows})`, p.values);
    });
    expect(total).toEqual([{ n: 3 }]);
    // On a cluster every read merges (parts are per shard): once is enough there.
    expect(calls.map((c) => c?.partitions.includes('20270115'))).toEqual(
      ch.cluster ? [undefined] : [true, undefined],
    );
  });

  it('aggregates properties per key from the map column', async () => {
    const rows = await ch.query<{ k: string; v: string; c: number }>(
      `SELECT k, v, count() AS c FROM events ARRAY JOIN mapKeys(props) AS k, mapValues(props) AS v
       WHERE site_id = 1 GROUP BY k, v ORDER BY k`,
    );
    expect(rows).toEqual([
      { k: 'n', v: '2', c: 3 },
      { k: 'plan', v: 'pro', c: 3 },
    ]);
  });

  it('answers ping and spreads reads over the pool', async () => {
    await expect(ch.ping()).resolves.toBeUndefined();
    // The server form pools sockets inside one client; the embedded form holds a pool of clients.
    if (ch.kind === 'embedded') expect(ch.reader()).not.toBe(ch.reader());
  });

  it('streams a result whole and in order, and a reader that leaves midway leaves no fetch behind', async () => {
    const sql = 'SELECT number FROM numbers({n:UInt64}) SETTINGS max_block_size = 1000';
    const chunks: Buffer[] = [];
    for await (const chunk of ch.stream(sql, { n: 50_000 }, 'TabSeparatedRaw'))
      chunks.push(Buffer.from(chunk));
    const lines = Buffer.concat(chunks).toString().trimEnd().split('\n');
    expect(lines).toEqual(Array.from({ length: 50_000 }, (_, i) => String(i)));

    // The embedded form fetches the next block as it hands one on: leaving after the first
    // leaves a fetch in flight. Here that fetch fails (the second block throws, after a second,
    // so that the first is surely handed over before); the failure must settle unobserved,
    // where an unhandled rejection would stop the process. (A server answers that query with
    // its error before the first block.)
    const failing = `SELECT throwIf(number = 1500 AND sleepEachRow(1) = 0, 'second block') AS x
      FROM numbers(100000) SETTINGS max_block_size = 1000`;
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const leaving: [string, number][] = [[sql, 2_000_000]];
      if (ch.kind === 'embedded') leaving.unshift([failing, 0]);
      for (const [query, n] of leaving) {
        let seen = 0;
        for await (const _ of ch.stream(query, { n }, 'TabSeparatedRaw')) if (++seen === 1) break;
        expect(seen).toBe(1);
      }
      if (ch.kind === 'embedded') {
        // A reader still holding the first block when the fetch ahead fails: the failure waits
        // for it, and reaches it as the stream's error.
        const read = async () => {
          for await (const _ of ch.stream(failing, {}, 'TabSeparatedRaw'))
            await new Promise((resolve) => setTimeout(resolve, 1_500));
        };
        await expect(read()).rejects.toThrow(/second block/);
      }
      // The abandoned fetch fails a second after it began.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(unhandled).toEqual([]);
    expect(await ch.query<{ n: number }>('SELECT count() AS n FROM numbers(10)')).toEqual([{ n: 10 }]);
  });
});

describe('sessionPartitions', () => {
  it("names the session rollup's partition of an id as the engine computes it, and none where it cannot", async () => {
    const years = [Date.UTC(1995, 0, 1), Date.UTC(2105, 0, 1)] as const;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: years[0], max: years[1] }), fc.string(), async (ms, seed) => {
        const id = uuidv7FromSeed(ms, seed);
        const [row] = await ch.query<{ day: string }>(
          `SELECT toString(toYYYYMMDD(UUIDv7ToDateTime(toUUID({id:String}), 'UTC'))) AS day`,
          { id },
        );
        const year = new Date(ms).getUTCFullYear();
        const days = sessionPartitions([id], 'UTC');
        if (year >= 2000 && year < 2100) expect([...days!]).toEqual([row!.day]);
        else expect(days).toBeUndefined();
      }),
      { numRuns: 200 },
    );
    // Seeded: a plain id never takes a time before the last one made.
    const at = (iso: string) => uuidv7FromSeed(Date.parse(iso), iso);
    const ids = [at('2026-03-29T00:00:00Z'), at('2026-03-29T23:59:59.999Z')];
    expect(sessionPartitions(ids, 'Etc/UTC')).toEqual(new Set(['20260329']));
    expect(sessionPartitions([...ids, at('2026-03-30T00:00:00Z')], 'UTC')).toEqual(
      new Set(['20260329', '20260330']),
    );
    // Another zone's days, an id of another version or variant, or in capitals: not computed.
    expect(sessionPartitions(ids, 'Europe/Berlin')).toBeUndefined();
    expect(sessionPartitions(ids, undefined)).toBeUndefined();
    for (const other of [
      ids[0]!.replace(/^(.{14})7/, '$14'),
      ids[0]!.replace(/^(.{19})./, '$1c'),
      ids[0]!.toUpperCase(),
    ])
      expect({ other, days: sessionPartitions([ids[1]!, other], 'UTC') }).toEqual({ other, days: undefined });
  });

  it("reads the engine's time zone with the settled parts", async () => {
    if (ch.cluster) return;
    const [engine] = await ch.query<{ zone: string }>('SELECT timezone() AS zone');
    await ch.writer.insert({
      table: 'events',
      values: [row(11, uuidv7(), '2026-11-20 10:00:00.000')],
      format: 'JSONEachRow',
    });
    expect((await settledParts(ch, 'session_facts')).zone).toBe(engine!.zone);
  });
});

describe('read limits', () => {
  // 3 M distinct keys: the GROUP BY's hash table alone is far past 64 MB.
  const sql = `SELECT count() AS groups, sum(c) AS rows
    FROM (SELECT number % 3000000 AS key, count() AS c FROM numbers(6000000) GROUP BY key)`;
  const bounded = (spill: boolean) =>
    withReadLimits(ch, { timeoutSeconds: 120, maxMemoryMb: 64, spill }, (failure) => new Error(failure));

  it('let an aggregation past a quarter of the memory limit go on in temporary files and answer exactly', async () => {
    expect(await bounded(true).query(sql)).toEqual([{ groups: 3_000_000, rows: 6_000_000 }]);
  });

  it('refuse the same aggregation at the memory limit when spilling is off', async () => {
    await expect(bounded(false).query(sql)).rejects.toThrow(/^memory$/);
  });
});

describe('migration 0004: what the browser client sends', () => {
  const rerun = async () => {
    const sql = await readFile(join(CLICKHOUSE_MIGRATIONS, '0004_product.sql'), 'utf8');
    for (const statement of splitStatements(sql)) await ch.command(statement);
  };

  it('runs again over stored rows, keeping them, and copies vitals of later rows to events_by_name', async () => {
    const id = (n: number) => `0190a6c0-0000-7000-8000-0000000004${String(n).padStart(2, '0')}`;
    const perf = (n: number) => ({
      ...row(40, id(n), '2026-11-21 07:00:00.000'),
      type: 'performance',
      event_name: 'web-vitals',
      lcp: 1200.5 + n,
      cls: 0,
    });
    const insert = (n: number) =>
      ch.writer.insert({
        table: 'events',
        values: [perf(n)],
        format: 'JSONEachRow',
        clickhouse_settings: { insert_deduplication_token: `vitals-${n}` },
      });
    await insert(1);
    await rerun();
    await insert(2);
    for (const table of ['events', 'events_by_name']) {
      const rows = await ch.query<{ lcp: number; cls: number; inp: number | null }>(
        `SELECT lcp, cls, inp FROM ${table} WHERE site_id = 40 ORDER BY event_id`,
      );
      expect(rows, table).toEqual([
        { lcp: 1201.5, cls: 0, inp: null },
        { lcp: 1202.5, cls: 0, inp: null },
      ]);
    }
  });

  it('stores a replayed identify once, in the call log, the profile and the alias', async () => {
    const call = (ts: string, traits: Record<string, string>, isNew: boolean) => ({
      site_id: 41,
      timestamp: ts,
      event_id: uuidv7(Date.parse(`${ts.replace(' ', 'T')}Z`)),
      user_id: 'anon-1',
      identified_user_id: 'user-1',
      traits,
      is_new_identify: isNew,
    });
    const first = [call('2026-11-21 08:00:00.000', { plan: '"free"', name: '"Ada"' }, true)];
    const second = [call('2026-11-21 08:05:00.000', { plan: '"pro"', name: 'null' }, false)];
    for (const [token, values] of [
      ['identify-1', first],
      ['identify-2', second],
      ['identify-1', first],
    ] as const) {
      await ch.writer.insert({
        table: 'identifies',
        values,
        format: 'JSONEachRow',
        clickhouse_settings: { insert_deduplication_token: token },
      });
    }
    const count = async (table: string) =>
      (await ch.query<{ n: number }>(`SELECT count() AS n FROM ${table} WHERE site_id = 41`))[0]!.n;
    expect(await count('identifies')).toBe(2);
    expect(await count('user_aliases')).toBe(1);
    const traits = await ch.query<{ trait: string; value: string }>(
      "SELECT trait, value FROM user_profiles FINAL WHERE site_id = 41 AND value != 'null' ORDER BY trait",
    );
    expect(traits).toEqual([{ trait: 'plan', value: '"pro"' }]);
  });
});

/**
 * A migration's own `ALTER TABLE` statements run twice, waiting for their mutations, on a scratch
 * `MergeTree` table of `columns` (ordered by `n`) filled by `fill`: `check(run)` after each run.
 * The table is dropped afterwards.
 */
async function migrateScratch(
  file: string,
  columns: string,
  fill: (table: string) => Promise<void>,
  check: (table: string, run: number) => Promise<void>,
): Promise<void> {
  const table = `scratch_${file.slice(0, 4)}`;
  await ch.command(`DROP TABLE IF EXISTS ${table}`);
  await ch.command(`CREATE TABLE ${table} (${columns}) ENGINE = MergeTree ORDER BY n`);
  try {
    await fill(table);
    const sql = await readFile(join(CLICKHOUSE_MIGRATIONS, file), 'utf8');
    const statements = splitStatements(sql).map((st) =>
      st.replace(/^ALTER TABLE \w+ /, `ALTER TABLE ${table} `),
    );
    expect(statements.length).toBeGreaterThan(0);
    expect(statements.every((st) => st.startsWith(`ALTER TABLE ${table} `))).toBe(true);
    for (const run of [1, 2]) {
      for (const st of statements) await ch.command(`${st} SETTINGS mutations_sync = 2`);
      await check(table, run);
    }
  } finally {
    await ch.command(`DROP TABLE IF EXISTS ${table}`);
  }
}

/** One property of a column as `system.columns` has it: its type or its codec. */
async function columnOf(table: string, column: string, field: 'type' | 'compression_codec') {
  const [row] = await ch.query<{ v: string }>(
    `SELECT ${field} AS v FROM system.columns
     WHERE database = currentDatabase() AND table = {t:String} AND name = {c:String}`,
    { t: table, c: column },
  );
  return row?.v;
}

/** Asserts one property of a column of `events` and `events_by_name` alike. */
async function onEventTables(column: string, field: 'type' | 'compression_codec', expected: string) {
  for (const table of ['events', 'events_by_name']) {
    expect(await columnOf(storage(table), column, field), table).toBe(expected);
  }
}

describe('migration 0012: page titles as a dictionary', () => {
  const titleType = (table: string) => columnOf(table, 'page_title', 'type');

  it('stores the page titles of events and events_by_name as a dictionary', () =>
    onEventTables('page_title', 'type', 'LowCardinality(String)'));

  it('keeps every stored title byte for byte through the change, and running it again changes nothing', async () => {
    // Titles as bytes: NUL, control bytes, bytes that are not UTF-8, a lone surrogate's
    // encoding, long and empty texts, repeated and unique ones.
    const titles = fc.sample(
      fc.oneof(
        fc.uint8Array({ maxLength: 40 }),
        fc.constantFrom(
          new Uint8Array([0]),
          new Uint8Array([0xed, 0xa0, 0x80]),
          new Uint8Array([0xff, 0xfe, 0x0a, 0x09]),
          new TextEncoder().encode('Pricing | Acme \u{1F600}'.repeat(200)),
          new Uint8Array(),
        ),
      ),
      { numRuns: 300, seed: 12 },
    );
    const hex = titles.map((t) => Buffer.from(t).toString('hex').toUpperCase());
    const stored = async (table: string) =>
      (await ch.query<{ h: string }>(`SELECT hex(page_title) AS h FROM ${table} ORDER BY n`)).map((r) => r.h);
    await migrateScratch(
      '0012_page_title_dictionary.sql',
      'site_id UInt32, n UInt32, page_title String',
      async (table) => {
        await ch.command(
          `INSERT INTO ${table} SELECT 1, i, unhex(h) FROM (
             SELECT arrayJoin(arrayEnumerate({h:Array(String)})) AS i, {h:Array(String)}[i] AS h)`,
          { h: hex },
        );
        expect(await stored(table)).toEqual(hex);
      },
      async (table, run) => {
        expect(await titleType(table), `run ${run}`).toBe('LowCardinality(String)');
        expect(await stored(table), `run ${run}`).toEqual(hex);
      },
    );
  });
});

describe("migration 0013: the visitor's key on every event", () => {
  const key = (id: string) => BigInt(`0x${id}`).toString();

  it('computes the key of each stored event from its visitor id, as the rollups have it', async () => {
    const ids = [
      '0000000000000000',
      '00000000000000ff',
      'ffffffffffffffff',
      '8000000000000001',
      '3f2a9c04be71d5e6',
    ];
    await ch.writer.insert({
      table: 'events',
      values: ids.map((id, i) => ({
        ...row(
          43,
          `0190a6c0-0000-7000-8000-0000000013${String(i).padStart(2, '0')}`,
          '2026-11-21 08:00:00.000',
        ),
        user_id: id,
      })),
      format: 'JSONEachRow',
    });
    const rows = await ch.query<{ id: string; k: string; rolled: string }>(
      `SELECT user_id AS id, toString(user_key) AS k, toString(reinterpretAsUInt64(reverse(unhex(user_id)))) AS rolled
       FROM events WHERE site_id = 43 ORDER BY user_key`,
    );
    expect(rows.map((r) => r.id)).toEqual([...ids].sort());
    for (const r of rows) {
      expect(r.k, r.id).toBe(key(r.id));
      expect(r.k, r.id).toBe(r.rolled);
    }
  });

  it('gives the events stored before it their keys, and running it again changes nothing', async () => {
    const ids = fc.sample(fc.stringMatching(/^[0-9a-f]{16}$/), { numRuns: 200, seed: 13 });
    await migrateScratch(
      '0013_events_user_key.sql',
      'site_id UInt32, n UInt32, user_id String',
      (table) =>
        ch.command(
          `INSERT INTO ${table} SELECT 1, i, {ids:Array(String)}[i]
           FROM (SELECT arrayJoin(arrayEnumerate({ids:Array(String)})) AS i)`,
          { ids },
        ),
      async (table, run) => {
        // The mutation wrote the column into the part (not computed on read).
        const [written] = await ch.query<{ n: number }>(
          `SELECT count() AS n FROM system.parts_columns
           WHERE database = currentDatabase() AND table = {t:String} AND active AND column = 'user_key'`,
          { t: table },
        );
        expect(written?.n, `run ${run}`).toBeGreaterThan(0);
        const rows = await ch.query<{ k: string }>(`SELECT toString(user_key) AS k FROM ${table} ORDER BY n`);
        expect(
          rows.map((r) => r.k),
          `run ${run}`,
        ).toEqual(ids.map(key));
      },
    );
  });
});

describe('migration 0014: event times stored with T64', () => {
  const codec = (table: string) => columnOf(table, 'timestamp', 'compression_codec');

  it('gives the times of events and events_by_name the T64 codec', () =>
    onEventTables('timestamp', 'compression_codec', 'CODEC(T64)'));

  it('keeps every time to the millisecond through parts rewritten with it', async () => {
    // The ends of what ingest and reads accept, neighbours a millisecond apart, and times far
    // apart in one block (the codec keeps the bits that differ within a block).
    const times = [
      '1970-01-01 00:00:00.000',
      '1970-01-01 00:00:00.001',
      '2026-03-29 00:59:59.999',
      '2026-03-29 01:00:00.000',
      '2026-11-27 12:00:00.123',
      '2106-02-07 06:28:15.999',
      '2299-12-31 23:59:59.999',
    ];
    const activeParts = async (table: string) =>
      Number(
        (
          await ch.query<{ n: number }>(
            `SELECT count() AS n FROM system.parts
             WHERE database = currentDatabase() AND table = {t:String} AND active`,
            { t: table },
          )
        )[0]?.n,
      );
    const stored = async (table: string) =>
      (await ch.query<{ t: string }>(`SELECT toString(timestamp) AS t FROM ${table} ORDER BY n`)).map(
        (r) => r.t,
      );
    await migrateScratch(
      '0014_timestamp_t64.sql',
      "site_id UInt32, n UInt32, timestamp DateTime64(3, 'UTC') CODEC(Delta, LZ4)",
      async (table) => {
        // Two inserts, two parts: the rewrite below has to merge them into a new part.
        for (const [from, to] of [
          [0, 3],
          [3, times.length],
        ]) {
          await ch.command(
            `INSERT INTO ${table} SELECT 1, i + {o:UInt32}, toDateTime64({t:Array(String)}[i], 3, 'UTC')
             FROM (SELECT arrayJoin(arrayEnumerate({t:Array(String)})) AS i)`,
            { t: times.slice(from, to), o: from },
          );
        }
        expect(await activeParts(table)).toBe(2);
        expect(await stored(table)).toEqual(times);
      },
      async (table, run) => {
        // Merged into one part written with the new codec, then read back.
        await ch.command(`OPTIMIZE TABLE ${table} FINAL`);
        if (run === 1) expect(await activeParts(table)).toBe(1);
        expect(await codec(table), `run ${run}`).toBe('CODEC(T64)');
        expect(await stored(table), `run ${run}`).toEqual(times);
      },
    );
  });
});

describe('migration 0015: what a filter needs on the session rows', () => {
  const site = 44;
  const session = (n: number) => `0190a6c0-0000-7000-8000-00000000150${n}`;
  const event = (
    n: number,
    s: number,
    pathname: string,
    type: string,
    extra: Record<string, string> = {},
  ) => ({
    ...row(
      site,
      `0190a6c0-0000-7000-8000-0000000015${String(n).padStart(2, '0')}`,
      `2026-11-21 09:00:0${n}.000`,
    ),
    session_id: session(s),
    user_id: `00000000000015${String(s).padStart(2, '0')}`,
    type,
    pathname,
    country: 'DE',
    device_type: 'desktop',
    ...extra,
  });
  /** Each session's row as a read merges it: its path hashes (sorted as text) and hashes. */
  const facts = () =>
    ch.query<{ id: string; paths: string[]; low: string; high: string; pageviews: number }>(
      `SELECT toString(session_id) AS id, arrayMap(h -> toString(h), paths) AS paths,
         toString(constants_low) AS low, toString(constants_high) AS high, length(pageview_ids) AS pageviews
       FROM session_facts FINAL WHERE site_id = ${site} ORDER BY id`,
    );
  const hashes = async (paths: string[]) =>
    (
      await ch.query<{ h: string[] }>(
        'SELECT arrayMap(p -> toString(cityHash64(p)), {p:Array(String)}) AS h',
        {
          p: paths,
        },
      )
    )[0]!.h.sort();
  const sorted = (rows: Awaited<ReturnType<typeof facts>>) =>
    rows.map((r) => ({ ...r, paths: [...r.paths].sort() }));

  it('keeps the paths of every event type, and tells a session whose address or browser attributes differ', async () => {
    await ch.writer.insert({
      table: 'events',
      values: [
        event(1, 1, '/a', 'pageview'),
        event(2, 1, '/b', 'custom_event'),
        event(3, 1, '/a', 'error'),
        event(4, 2, '/a', 'pageview'),
        event(5, 2, '/c', 'pageview', { country: 'AT' }),
      ],
      format: 'JSONEachRow',
    });
    const rows = sorted(await facts());
    expect(rows.map((r) => r.id)).toEqual([session(1), session(2)]);
    expect(rows[0]!.paths).toEqual(await hashes(['/a', '/b']));
    expect(rows[0]!.low).toBe(rows[0]!.high);
    expect(rows[1]!.paths).toEqual(await hashes(['/a', '/c']));
    expect(rows[1]!.low).not.toBe(rows[1]!.high);
    const names = await ch.query<{ p: string }>(
      `SELECT DISTINCT pathname AS p FROM site_paths WHERE site_id = ${site} ORDER BY p`,
    );
    expect(names.map((r) => r.p)).toEqual(['/a', '/b', '/c']);
  });

  it('fills rows stored before it from their events, and running it again changes nothing', async () => {
    const before = sorted(await facts());
    expect(before).toHaveLength(2);
    // The rows as stored before the migration: its columns at their defaults.
    const old = `site_id, session_id, session_start, session_end, user_id, user_key, first_event, entry, exit,
      identified, pageview_ids, event_ids`;
    await ch.command('DROP TABLE IF EXISTS scratch_0015');
    await ch.command(
      `CREATE TABLE scratch_0015 ENGINE = Memory AS SELECT ${old} FROM session_facts FINAL WHERE site_id = ${site}`,
    );
    try {
      await ch.command(
        `ALTER TABLE ${storage('session_facts')} DELETE WHERE site_id = ${site} SETTINGS mutations_sync = 2`,
      );
      await ch.command(`INSERT INTO session_facts (${old}) SELECT ${old} FROM scratch_0015`);
      const stale = await facts();
      expect(stale.map((r) => [r.paths, r.low, r.high])).toEqual([
        [[], '18446744073709551615', '0'],
        [[], '18446744073709551615', '0'],
      ]);
      // Such rows are never tested on their own.
      const [unsure] = await ch.query<{ n: number }>(
        `SELECT count() AS n FROM session_facts FINAL WHERE site_id = ${site} AND constants_high - constants_low != 0`,
      );
      expect(unsure?.n).toBe(2);
      const plan = await planClickHouseMigrations(CLICKHOUSE_MIGRATIONS, ch.cluster);
      const migration = plan.find((m) => m.file === '0015_session_filters.sql')!;
      for (const run of [1, 2]) {
        for (const statement of migration.statements) await ch.command(statement);
        expect(sorted(await facts()), `run ${run}`).toEqual(before);
      }
    } finally {
      await ch.command('DROP TABLE IF EXISTS scratch_0015');
    }
  });
});

describe('migration 0024: the visitor attributes as columns of the session rows', () => {
  const site = 45;
  const session = (n: number) => `0190a6c0-0000-7000-8000-00000000240${n}`;
  const event = (n: number, s: number, at: string, attributes: Record<string, string>) => ({
    ...row(site, `0190a6c0-0000-7000-8000-0000000024${String(n).padStart(2, '0')}`, at),
    session_id: session(s),
    user_id: `00000000000024${String(s).padStart(2, '0')}`,
    ...attributes,
  });
  const attributes = ['country', 'browser', 'operating_system', 'device_type', 'language'] as const;
  /** Each stored row (unmerged: one per insert) with its columns and its first event's values. */
  const stored = (final: boolean) =>
    ch.query<Record<string, string>>(
      `SELECT toString(session_id) AS id,
         ${attributes.map((a) => `visitor_${a} AS ${a}, tupleElement(first_event, '${a}') AS first_${a}`).join(', ')}
       FROM session_facts${final ? ' FINAL' : ''} WHERE site_id = ${site} ORDER BY id, country`,
    );
  const firstOf = (r: Record<string, string>) =>
    Object.fromEntries(attributes.map((a) => [a, r[`first_${a}`]]));
  const columnsOf = (r: Record<string, string>) => Object.fromEntries(attributes.map((a) => [a, r[a]]));
  const visitorColumns = async () =>
    (
      await ch.query<{ n: number }>(
        `SELECT count() AS n FROM system.columns
         WHERE database = currentDatabase() AND table = {t:String} AND startsWith(name, 'visitor_')`,
        { t: storage('session_facts') },
      )
    )[0]!.n;

  it("fills each row's columns from its first event as the events arrive, kept by a merge", async () => {
    const de = {
      country: 'DE',
      browser: 'Firefox',
      operating_system: 'Linux',
      device_type: 'desktop',
      language: 'de',
    };
    const us = {
      country: 'US',
      browser: 'Safari',
      operating_system: 'iOS',
      device_type: 'mobile',
      language: 'en',
    };
    // Session 1 in two inserts (two rows until merged), its later insert first; session 2 whole.
    // The table's merges held meanwhile: a background merge would fold the two rows before they
    // are read apart.
    const table = ch.cluster ? `ON CLUSTER ${ch.cluster} ${storage('session_facts')}` : 'session_facts';
    await ch.command(`SYSTEM STOP MERGES ${table}`);
    try {
      await ch.writer.insert({
        table: 'events',
        values: [event(2, 1, '2026-11-21 09:00:02.000', de)],
        format: 'JSONEachRow',
      });
      await ch.writer.insert({
        table: 'events',
        values: [event(1, 1, '2026-11-21 09:00:01.000', de), event(3, 2, '2026-11-21 09:00:03.000', us)],
        format: 'JSONEachRow',
      });
      const rows = await stored(false);
      expect(rows.map((r) => r.id)).toEqual([session(1), session(1), session(2)]);
      for (const r of rows) expect(columnsOf(r)).toEqual(firstOf(r));
      expect(rows.map(columnsOf)).toEqual([de, de, us]);
      expect((await stored(true)).map(columnsOf)).toEqual([de, us]);
    } finally {
      await ch.command(`SYSTEM START MERGES ${table}`);
    }
    // Merged into one row per session, each column keeps one of the rows' values.
    await ch.command(`OPTIMIZE TABLE ${storage('session_facts')} FINAL`);
    expect((await stored(false)).map(columnsOf)).toEqual([de, us]);
  });

  it('fills rows stored before it, and running it again changes nothing', async () => {
    const before = await stored(true);
    expect(before).toHaveLength(2);
    // On a cluster, the local tables and the Distributed one, as the migration's cluster form.
    const dropped = (a: string) =>
      ch.cluster
        ? [storage('session_facts'), 'session_facts'].map(
            (t) => `ALTER TABLE ${t} ON CLUSTER ${ch.cluster} DROP COLUMN visitor_${a}`,
          )
        : [`ALTER TABLE session_facts DROP COLUMN visitor_${a}`];
    const plan = await planClickHouseMigrations(CLICKHOUSE_MIGRATIONS, ch.cluster);
    const migration = plan.find((m) => m.file === '0024_session_facts_visitor_columns.sql')!;
    expect(migration.statements.length).toBeGreaterThan(1);
    try {
      // The table as it was before the migration: its parts without the columns.
      for (const a of VISITOR_ATTRIBUTES) for (const statement of dropped(a)) await ch.command(statement);
      expect(await visitorColumns()).toBe(0);
    } finally {
      for (const time of [1, 2]) {
        for (const statement of migration.statements) await ch.command(statement);
        expect(await visitorColumns(), `run ${time}`).toBe(VISITOR_ATTRIBUTES.length);
        expect(await stored(true), `run ${time}`).toEqual(before);
      }
    }
    // Its mutation writes the columns into the parts stored before (their values no longer read
    // from the tuple), in the background: awaited here.
    const pending = async () =>
      (
        await ch.query<{ n: number }>(
          `SELECT count() AS n FROM system.mutations
           WHERE database = currentDatabase() AND table = {t:String} AND NOT is_done`,
          { t: storage('session_facts') },
        )
      )[0]!.n;
    for (let waited = 0; (await pending()) > 0 && waited < 30_000; waited += 100)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await pending()).toBe(0);
    const [written] = await ch.query<{ parts: number; filled: number }>(
      `SELECT uniqExact(name) AS parts, uniqExactIf(name, column = 'visitor_country') AS filled
       FROM system.parts_columns WHERE database = currentDatabase() AND table = {t:String} AND active`,
      { t: storage('session_facts') },
    );
    expect(written!.parts).toBeGreaterThan(0);
    expect(written!.filled).toBe(written!.parts);
    expect(await stored(true)).toEqual(before);
  });

  it('leaves a table that can be created again from its columns (every one a key or an aggregate)', async () => {
    // The engine refuses a table whose columns include one that is neither (a node added to a
    // cluster, a copy for a backfill, would fail to create it).
    await ch.command('DROP TABLE IF EXISTS scratch_0024');
    try {
      await ch.command(
        `CREATE TABLE scratch_0024 AS ${storage('session_facts')}
         ENGINE = AggregatingMergeTree ORDER BY (site_id, UUIDv7ToDateTime(session_id), session_id)`,
      );
      const [types] = await ch.query<{ n: number }>(
        `SELECT countIf(type = 'SimpleAggregateFunction(any, LowCardinality(String))') AS n
         FROM system.columns
         WHERE database = currentDatabase() AND table = 'scratch_0024' AND startsWith(name, 'visitor_')`,
      );
      expect(types?.n).toBe(VISITOR_ATTRIBUTES.length);
    } finally {
      await ch.command('DROP TABLE IF EXISTS scratch_0024');
    }
  });
});

describe('splitStatements', () => {
  it('splits on line-ending semicolons and drops comment lines', () => {
    expect(splitStatements("-- a comment\nCREATE TABLE a (x String DEFAULT ';');\n\nSELECT 1;\n")).toEqual([
      "CREATE TABLE a (x String DEFAULT ';')",
      'SELECT 1',
    ]);
  });
});
