import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLICKHOUSE_MIGRATIONS, createTestClickHouse } from '../../../test/helpers';
import { type ClickHouse, migrateClickHouse, splitStatements } from '../src';

let handle: Awaited<ReturnType<typeof createTestClickHouse>>;
let ch: ClickHouse;

beforeAll(async () => {
  handle = await createTestClickHouse();
  ch = handle.ch;
});
afterAll(async () => {
  await handle.close();
});

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
      "SELECT sorting_key FROM system.tables WHERE database = currentDatabase() AND name = 'events'",
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
    expect(ch.reader()).not.toBe(ch.reader());
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
