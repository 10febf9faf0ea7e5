import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createClickHouse,
  EMBEDDED_SETTINGS,
  readLimitSettings,
  withParams,
  withReadLimits,
} from '@trackhouse/clickhouse';
import { Session } from 'chdb';
import { median } from './profile';
import { option } from './query';

/** The query service's read limits by default (CLICKHOUSE_READ_*). */
const LIMITS = { timeoutSeconds: 30, maxMemoryMb: 8192, spill: true };

/** The client's settings on the embedded engine and the read limits: what a read of the query service carries. */
const READ_SETTINGS = { ...EMBEDDED_SETTINGS, ...readLimitSettings(LIMITS) };

async function timed(runs: number, read: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 10; i++) await read();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await read();
    times.push(performance.now() - t);
  }
  return median(times);
}

/**
 * `pnpm bench statement [--runs N]`: the fixed cost of one read on the embedded engine, a bound
 * `SELECT` of one value, median ms of N (200) runs each on a new temporary data directory: the
 * engine alone (chdb's session) with no settings, with a read's settings and parameter as one
 * `SET` statement each (as the client library sends settings) and as one `SET` of them all (as
 * the project's client sends them), then through the project's client with the query service's
 * read limits.
 */
export async function benchStatement(args: string[]): Promise<void> {
  const runs = Number(option(args, 'runs') ?? 200);
  const dir = mkdtempSync(join(tmpdir(), 'trackhouse-bench-statement-'));
  const query = 'SELECT {p0:UInt32} AS x';
  try {
    const rows: Record<string, string | number>[] = [];
    const session = new Session(dir);
    try {
      const raw = (sql: string) => () => session.queryAsync(sql, { format: 'JSONEachRow' });
      // Each form written by the client's own withParams: one SET per setting, then all in one.
      const params = { p0: 1 };
      const each = Object.entries(READ_SETTINGS)
        .map(([k, v]) => withParams('', {}, { [k]: v }))
        .join('');
      const count = Object.keys(READ_SETTINGS).length + 1;
      const forms: [string, string | undefined][] = [
        ['engine: the parameter alone', withParams(query, params)],
        [`engine: ${count} SET statements`, `${each}${withParams(query, params)}`],
        [`engine: one SET of ${count}`, withParams(query, params, READ_SETTINGS)],
      ];
      for (const [form, sql] of forms)
        rows.push({ form, ms: Number((await timed(runs, raw(sql!))).toFixed(2)) });
    } finally {
      session.close();
    }
    const ch = createClickHouse({ kind: 'embedded', dataDir: dir, queryPoolSize: 1 });
    try {
      const limited = withReadLimits(ch, LIMITS, (_, err) => err);
      const ms = await timed(runs, () => limited.query(query, { p0: 1 }));
      rows.push({ form: "the project's client, read limits", ms: Number(ms.toFixed(2)) });
    } finally {
      await ch.close();
    }
    console.table(rows);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
