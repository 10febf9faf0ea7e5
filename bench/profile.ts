import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  type ClickHouse,
  type CommonParams,
  comparedOverviews,
  createClickHouse,
  getUser,
  goalStats,
  listSessions,
  listUsers,
  type MetricParameter,
  metric,
  overview,
  overviewBucketed,
  previousRange,
} from '@trackhouse/clickhouse';
import { BENCH_GOALS, option } from './query';

/**
 * One statement of an answer: how long the engine took to plan it, and to run it, alone, and the
 * process's CPU time while it ran (the engine runs in-process): on a shared host, whose other
 * guests take cores at will, CPU time varies far less between runs than time does.
 */
interface Timed {
  planMs: number;
  runMs: number;
  cpuMs: number;
  sql: string;
  params: Record<string, unknown> | undefined;
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function timeOf(run: () => Promise<unknown>): Promise<number> {
  return (await timesOf(run)).ms;
}

/** Time and the process's CPU time (user and system, every thread) of `run`, in milliseconds. */
export async function timesOf(run: () => Promise<unknown>): Promise<{ ms: number; cpuMs: number }> {
  const cpu = process.cpuUsage();
  const t = performance.now();
  await run();
  const used = process.cpuUsage(cpu);
  return { ms: performance.now() - t, cpuMs: (used.user + used.system) / 1000 };
}

/** The statements an answer sends, each planned (`EXPLAIN PLAN`) and run again alone. */
async function statementsOf(ch: ClickHouse, answer: (ch: ClickHouse) => Promise<unknown>): Promise<Timed[]> {
  const sent: [string, Record<string, unknown> | undefined][] = [];
  const capturing: ClickHouse = {
    ...ch,
    query: (sql, params, settings) => {
      sent.push([sql, params]);
      return ch.query(sql, params, settings);
    },
  };
  await answer(capturing);
  const timed: Timed[] = [];
  for (const [sql, params] of sent) {
    if (!/^\s*(SELECT|WITH)\b/i.test(sql)) continue;
    const planMs = await timeOf(() => ch.query(`EXPLAIN PLAN ${sql}`, params));
    const run = await timesOf(() => ch.query(sql, params));
    timed.push({
      planMs,
      runMs: run.ms,
      cpuMs: run.cpuMs,
      sql: sql.replace(/\s+/g, ' ').trim(),
      params,
    });
  }
  return timed;
}

/**
 * Waits until the engine has run no merge for 10 s in a row (half an hour at most), and says how
 * long that took: opening a new seed's data can start merges of its parts, and answers timed
 * beside them are not the answers' own.
 */
async function mergesDone(ch: ClickHouse): Promise<void> {
  const started = performance.now();
  let quietSince: number | undefined;
  for (;;) {
    const [row] = await ch.query<{ n: number }>('SELECT count() AS n FROM system.merges');
    const now = performance.now();
    if (Number(row?.n ?? 0) > 0) quietSince = undefined;
    else quietSince ??= now;
    if ((quietSince !== undefined && now - quietSince >= 10_000) || now - started > 30 * 60_000) {
      console.log(
        `${quietSince === undefined ? 'MERGES STILL RUNNING' : 'no merge running'} after ${((now - started) / 1000).toFixed(0)} s of waiting`,
      );
      return;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/**
 * `pnpm bench profile --data-dir DIR [--runs R] [--only REGEX] [--filtered | --filters JSON] [--pool N] [--sql]`: where the answers of
 * a seeded data directory (`pnpm bench query --data-dir DIR`, server stopped) spend their time,
 * in-process on the embedded engine, once no merge is running: each answer's median time and CPU time over R runs, then every statement it
 * sends, planned alone (`EXPLAIN PLAN`) and run alone. The bench's 30-day range in
 * Europe/Berlin; `--filtered` adds its two filters, `--filters JSON` others (the API's `filters`
 * array); `--pool` the read connections (3, the server's default); `--sql` prints each statement whole, with its parameters.
 */
export async function benchProfile(args: string[]): Promise<void> {
  const given = option(args, 'data-dir');
  if (!given) throw new Error('--data-dir DIR: a directory seeded by pnpm bench query');
  const dataDir = resolve(given);
  const marker = readdirSync(dataDir).find((f) => f.startsWith('seeded-'));
  if (!marker) throw new Error(`${dataDir} was not seeded by pnpm bench query`);
  const { siteId } = JSON.parse(readFileSync(join(dataDir, marker), 'utf8')) as { siteId: number };
  const runs = Number(option(args, 'runs') ?? 8);
  const only = new RegExp(option(args, 'only') ?? '.');
  const full = args.includes('--sql');
  const end = new Date();
  const start = new Date(end.getTime() - 29 * 86_400_000);
  const common: CommonParams = {
    startDate: start.toISOString().slice(0, 10),
    endDate: end.toISOString().slice(0, 10),
    timeZone: 'Europe/Berlin',
    filters: option(args, 'filters')
      ? (JSON.parse(option(args, 'filters')!) as CommonParams['filters'])
      : args.includes('--filtered')
        ? [
            { parameter: 'country', type: 'equals', value: ['US', 'DE'] },
            { parameter: 'pathname', type: 'contains', value: ['docs', 'checkout', 'pricing'] },
          ]
        : [],
  };
  const before = { ...common, ...previousRange(common.startDate!, common.endDate!) };
  const ch = createClickHouse({
    kind: 'embedded',
    dataDir: join(dataDir, 'clickhouse'),
    queryPoolSize: Number(option(args, 'pool') ?? 3),
  });
  try {
    await mergesDone(ch);
    const page = { limit: 25, offset: 0 };
    const [latest] = (await listUsers(ch, siteId, common, { ...page, sort: 'last_seen', order: 'desc' }))
      .data;
    const metrics: MetricParameter[] = ['country', 'entry_page', 'pathname', 'page_title', 'event_name'];
    const answers: [string, (c: ClickHouse) => Promise<unknown>][] = [
      ['goals', (c) => goalStats(c, siteId, common, BENCH_GOALS)],
      ['overview', (c) => overview(c, siteId, common)],
      ['overview compare', (c) => comparedOverviews(c, siteId, common, before)],
      ['overview-bucketed day', (c) => overviewBucketed(c, siteId, common, 'day')],
      ['overview-bucketed hour', (c) => overviewBucketed(c, siteId, common, 'hour')],
      ...metrics.map((m): [string, (c: ClickHouse) => Promise<unknown>] => [
        `metric ${m}`,
        (c) => metric(c, siteId, common, m, { limit: 10, offset: 0 }),
      ]),
      ['sessions', (c) => listSessions(c, siteId, common, page)],
      ['users', (c) => listUsers(c, siteId, common, { ...page, sort: 'last_seen', order: 'desc' })],
      ['user', (c) => getUser(c, siteId, latest?.user_id ?? '')],
    ];
    for (const [name, answer] of answers) {
      if (!only.test(name)) continue;
      const times: number[] = [];
      const cpu: number[] = [];
      for (let i = 0; i < runs + 2; i++) {
        const t = await timesOf(() => answer(ch));
        if (i >= 2) {
          times.push(t.ms);
          cpu.push(t.cpuMs);
        }
      }
      const statements = await statementsOf(ch, answer);
      const sum = (k: 'planMs' | 'runMs' | 'cpuMs') => statements.reduce((a, s) => a + s[k], 0);
      console.log(
        `\n${name}: ${median(times).toFixed(1)} ms in-process, ${median(cpu).toFixed(1)} ms of CPU (medians of ${runs}); its ${statements.length} statements alone: planned ${sum('planMs').toFixed(1)} ms, run ${sum('runMs').toFixed(1)} ms, ${sum('cpuMs').toFixed(1)} ms of CPU`,
      );
      for (const s of statements) {
        console.log(
          `  plan ${s.planMs.toFixed(1).padStart(6)}  run ${s.runMs.toFixed(1).padStart(6)}  cpu ${s.cpuMs.toFixed(1).padStart(6)}  ${full ? s.sql : s.sql.slice(0, 90)}`,
        );
        if (full)
          console.log(`    ${JSON.stringify(s.params, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`);
      }
    }
  } finally {
    await ch.close();
  }
}
