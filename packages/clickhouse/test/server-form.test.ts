import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestClickHouse } from '../../../test/helpers';
import { type ClickHouse, createClickHouse } from '../src';

// The server form of the client (HTTP) against the real engine, through the test bridge
// (test/clickhouse-http-bridge.ts), whatever TEST_CLICKHOUSE says.
let handle: Awaited<ReturnType<typeof createTestClickHouse>>;
let ch: ClickHouse;

beforeAll(async () => {
  handle = await createTestClickHouse('http');
  ch = handle.ch;
});
afterAll(async () => {
  await handle.close();
});

describe('ClickHouse server form over HTTP', () => {
  it('creates its tables in the configured database, not in default', async () => {
    expect(ch.kind).toBe('server');
    const tables = await ch.query<{ database: string }>(
      "SELECT DISTINCT database FROM system.tables WHERE database != 'system' AND name IN ('events', 'sessions', 'schema_migrations')",
    );
    expect(tables).toEqual([{ database: 'trackhouse_test' }]);
    const [current] = await ch.query<{ db: string }>('SELECT currentDatabase() AS db');
    expect(current?.db).toBe('trackhouse_test');
  });

  it('applies settings to their own call only', async () => {
    const setting = "SELECT toUInt64(getSetting('max_threads')) AS n";
    const [withSetting] = await ch.query<{ n: number }>(setting, {}, { max_threads: 3 });
    const [without] = await ch.query<{ n: number }>(setting);
    expect(withSetting?.n).toBe(3);
    expect(without?.n).not.toBe(3);
  });

  it('answers 64-bit integers as numbers and binds hostile parameters as values', async () => {
    const [r] = await ch.query<{ big: number; s: string; a: string[] }>(
      'SELECT toUInt64(9007199254740991) AS big, {s:String} AS s, {a:Array(String)} AS a',
      { s: "it's\t\\'; DROP TABLE events --\n", a: ["o'k", 'b\\c'] },
    );
    expect(r).toEqual({ big: 9007199254740991, s: "it's\t\\'; DROP TABLE events --\n", a: ["o'k", 'b\\c'] });
  });

  it('reports engine errors with their code and type', async () => {
    await expect(ch.query('SELECT * FROM no_such_table')).rejects.toMatchObject({
      code: '60',
      type: 'UNKNOWN_TABLE',
    });
  });

  it('stores a streamed insert body whole (blank lines and SQL in values included) and drops its replay', async () => {
    const lines = [
      JSON.stringify({
        site_id: 77,
        timestamp: '2026-11-21 05:00:00.000',
        event_id: '0190a6c0-0000-7000-8000-0000000000a1',
        type: 'pageview',
        pathname: '/a',
      }),
      '',
      JSON.stringify({
        site_id: 77,
        timestamp: '2026-11-21 05:00:00.001',
        event_id: '0190a6c0-0000-7000-8000-0000000000a2',
        type: 'custom_event',
        event_name: "x';\n\nSELECT 1;",
      }),
    ];
    for (let attempt = 0; attempt < 2; attempt++) {
      const result = await ch.writer.exec({
        query: 'INSERT INTO events FORMAT JSONEachRow',
        values: Readable.from([Buffer.from(`${lines.join('\n')}\n`)]),
        clickhouse_settings: { insert_deduplication_token: 'streamed-1' },
      });
      result.stream.resume();
    }
    const rows = await ch.query<{ event_name: string }>(
      'SELECT event_name FROM events WHERE site_id = {site:UInt32} ORDER BY timestamp',
      { site: 77 },
    );
    expect(rows.map((r) => r.event_name)).toEqual(['', "x';\n\nSELECT 1;"]);
  });

  it('refuses wrong credentials with the authentication error', async () => {
    const intruder = createClickHouse({
      kind: 'server',
      url: handle.url!,
      username: 'tester',
      password: 'wrong',
      database: 'trackhouse_test',
    });
    try {
      await expect(intruder.query('SELECT 1')).rejects.toMatchObject({ code: '516' });
    } finally {
      await intruder.close();
    }
  });
});
