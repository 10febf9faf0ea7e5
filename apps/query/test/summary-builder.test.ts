import {
  compactSessionDays,
  type FunnelStep,
  forgetKeptReads,
  funnelSummaryParameter,
  type GoalDefinition,
  generateEvents,
  insertEvents,
  pathPatternRegex,
  SESSION_ATTRIBUTES,
  type StoredEvent,
} from '@trackhouse/clickhouse';
import { createLogger } from '@trackhouse/core';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_CLICKHOUSE } from '../../../test/helpers';
import { SummaryBuilder } from '../src';
import { createQueryHarness, type QueryHarness } from './harness';
import { full, query } from './params';
import { funnel as expectedFunnel, journeys as expectedJourneys } from './product-reference-funnels';
import { goalStats } from './reference';
import * as ref from './traffic-reference';

let h: QueryHarness;
let tenant: Awaited<ReturnType<QueryHarness['tenant']>>;
let events: StoredEvent[];
let builder: SummaryBuilder;
let registry: Registry;

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);
/**
 * Fourteen days ending a week before today; the builder's window reaches back to them from today
 * (from fixed dates it would widen, and the runs slow down, with every day that passes).
 */
const FIRST_MS = Date.parse(`${dayOf(Date.now() - 21 * DAY_MS)}T00:00:00Z`);
const FIRST_DAY = dayOf(FIRST_MS);
const RANGE = {
  startDate: dayOf(FIRST_MS + DAY_MS),
  endDate: dayOf(FIRST_MS + 13 * DAY_MS),
  timeZone: 'Europe/Berlin',
};
const WINDOW_DAYS = Math.ceil((Date.now() - FIRST_MS) / DAY_MS) + 1;
/** The partitions of the data's days (UTC, `YYYYMMDD`). */
const PARTITIONS = [FIRST_DAY, dayOf(FIRST_MS + 14 * DAY_MS)].map((d) => d.replaceAll('-', ''));

/** Every answer with summaries, by the name they are stored under, and the rollup they summarize. */
const SUMMARIZED: [string, string][] = [
  ...['pathname', 'entry_page', 'exit_page', 'event_name', 'page_title', 'hostname'].map(
    (p): [string, string] => [p, 'session_paths'],
  ),
  ...SESSION_ATTRIBUTES.map((p): [string, string] => [p, 'session_facts']),
  ['sessions', 'session_facts'],
  ['goals', 'sessions'],
];

const docsGoal: GoalDefinition = { goalType: 'path', config: { pathPattern: '/docs/**' } };
const pricingGoal: GoalDefinition = { goalType: 'path', config: { pathPattern: '/pricing' } };

beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '1000000' });
  tenant = await h.tenant();
  events = [
    ...generateEvents({
      siteId: tenant.siteId,
      events: 2500,
      days: 14,
      end: new Date(FIRST_MS + 14 * DAY_MS + 12 * 3_600_000),
      seed: 33,
    }),
  ];
  await insertEvents(h.ch, events);
  await compactSessionDays(h.ch, new Date(Date.now() + DAY_MS));
  await addGoal('docs', docsGoal, h.json);
  registry = new Registry();
  builder = new SummaryBuilder({
    ch: h.ch,
    sql: h.db.sql,
    log: createLogger('silent'),
    registry,
    settings: { ...h.config, SUMMARIES_INTERVAL_S: 3600, SUMMARIES_DAYS: WINDOW_DAYS },
  });
}, 120_000);

afterAll(async () => {
  await builder.close();
  await h.close();
});

async function addGoal(name: string, goal: GoalDefinition, json: QueryHarness['json']) {
  const res = await json<{ goalId: number }>(`/api/sites/${tenant.siteId}/goals`, {
    key: tenant.key,
    method: 'POST',
    body: { name, ...goal },
  });
  expect(res.status).toBe(201);
  return res.body.goalId;
}

/** The active parts of the rollups' days of data (each alone in its partition once compacted). */
const dataParts = async () =>
  h.ch.query<{ table: string; part: string }>(
    `SELECT table, name AS part FROM system.parts
     WHERE database = currentDatabase() AND active AND table IN ('sessions', 'session_facts', 'session_paths')
       AND partition_id BETWEEN {first:String} AND {last:String}`,
    { first: PARTITIONS[0], last: PARTITIONS[1] },
  );

/** The partitions of `visitor_days` of the last ten windows in more than one part. */
const splitWindows = async () =>
  (
    await h.ch.query<{ partition: string }>(
      `SELECT partition_id AS partition FROM system.parts
       WHERE database = currentDatabase() AND table = 'visitor_days' AND active
         AND toUInt32(partition_id) >= {first:UInt32}
       GROUP BY partition_id HAVING count() > 1`,
      { first: Math.floor(Date.now() / DAY_MS / 32) - 10 },
    )
  ).map((r) => r.partition);

const splitDays = async () =>
  (
    await h.ch.query<{ partition: string }>(
      `SELECT partition_id AS partition FROM system.parts
       WHERE database = currentDatabase() AND table = 'visitor_hours' AND active
         AND toUInt32(partition_id) >= {first:UInt32}
       GROUP BY partition_id HAVING count() > 1 ORDER BY partition_id`,
      { first: Math.floor(Date.now() / DAY_MS) - 10 },
    )
  ).map((r) => r.partition);

/** Per summarized answer, the parts its stored summaries are of, and for the goals their patterns per part. */
async function stored() {
  const rows = await h.ch.query<{ parameter: string; part: string; values: string[] }>(
    `SELECT parameter, source_part AS part, groupUniqArrayIf(value, totals = 0) AS values
     FROM metric_summaries FINAL WHERE site_id = {s:UInt32}
     GROUP BY parameter, part HAVING countIf(totals = 1) > 0`,
    { s: tenant.siteId },
  );
  return new Map(rows.map((r) => [`${r.parameter}/${r.part}`, r.values]));
}

const summaryRows = async () => {
  const [row] = await h.ch.query<{ n: number }>(
    'SELECT count() AS n FROM metric_summaries WHERE site_id = {s:UInt32}',
    { s: tenant.siteId },
  );
  return Number(row?.n);
};

const metricValue = async (name: string) =>
  (await registry.getSingleMetric(name)!.get()).values[0]?.value ?? 0;
const builderReads = () => metricValue('trackhouse_summary_reads_total');

describe.skipIf(TEST_CLICKHOUSE === 'cluster')('the background builder of summaries', () => {
  // Every summary of fifteen days for every answer: 12-17 s alone on the reference machine, so
  // a timeout of its own.
  it('summarizes every settled day of its window for every summarized answer, the goals with their patterns', async () => {
    expect(await summaryRows()).toBe(0);
    // A window of `visitor_days` in two parts (another site's rows, two inserts): merged by the run.
    const block = Math.floor(Date.now() / DAY_MS / 32);
    for (const key of ['1', '2'])
      await h.ch.writer.insert({
        table: 'visitor_days',
        values: [{ site_id: 4_000_000_000, block, user_key: key, days: '1' }],
        format: 'JSONEachRow',
      });
    expect(await splitWindows()).toContain(String(block));
    // And a day of `visitor_hours` before today in two parts, merged too; today's is left alone.
    const today = Math.floor(Date.now() / DAY_MS);
    for (const day of [today - 2, today])
      for (const key of ['1', '2'])
        await h.ch.writer.insert({
          table: 'visitor_hours',
          values: [{ site_id: 4_000_000_000, day, user_key: key, hours: 1 }],
          format: 'JSONEachRow',
        });
    expect(await splitDays()).toEqual([String(today - 2), String(today)]);
    builder.start();
    await builder.idle();
    expect(await splitWindows()).toEqual([]);
    expect(await splitDays()).toEqual([String(today)]);
    const parts = await dataParts();
    expect(new Set(parts.map((p) => p.table)).size).toBe(3);
    const held = await stored();
    const missing = SUMMARIZED.flatMap(([parameter, table]) =>
      parts
        .filter((p) => p.table === table && !held.has(`${parameter}/${p.part}`))
        .map((p) => `${parameter}/${p.part}`),
    );
    expect(missing).toEqual([]);
    for (const p of parts.filter((x) => x.table === 'sessions'))
      expect(held.get(`goals/${p.part}`)).toContain(pathPatternRegex('/docs/**'));
    for (const p of parts.filter((x) => x.table === 'session_facts'))
      expect(held.get(`sessions/${p.part}`)).toEqual(['']);
    expect(await builderReads()).toBeGreaterThan(SUMMARIZED.length);
  }, 120_000);

  it('leaves the reads nothing to build, and their answers equal the reference', async () => {
    const before = await summaryRows();
    const selection = ref.selection(events, tenant.siteId, full(RANGE));
    for (const parameter of ['pathname', 'page_title', 'country', 'entry_page']) {
      const res = await h.json<{ data: { data: unknown[]; totalCount: number } }>(
        `/api/sites/${tenant.siteId}/metric?${query(RANGE, { parameter, limit: '1000' })}`,
        { key: tenant.key },
      );
      expect(res.status).toBe(200);
      const expected = ref.metric(selection, parameter as 'pathname');
      expect(res.body.data.totalCount).toBe(expected.totalCount);
      expect(res.body.data.data).toEqual(expected.data);
    }
    const goals = await h.json<{ data: { total_sessions: number; total_conversions: number }[] }>(
      `/api/sites/${tenant.siteId}/goals?${query(RANGE)}`,
      { key: tenant.key },
    );
    const expected = goalStats(selection.selected, docsGoal);
    expect(goals.body.data.map((g) => [g.total_sessions, g.total_conversions])).toEqual([
      [expected.total_sessions, expected.total_conversions],
    ]);
    const overview = await h.json<{ data: unknown }>(`/api/sites/${tenant.siteId}/overview?${query(RANGE)}`, {
      key: tenant.key,
    });
    expect(overview.body.data).toEqual(ref.overview(selection));
    const journeys = await h.json<{ journeys: unknown[] }>(
      `/api/sites/${tenant.siteId}/journeys?${query(RANGE, { limit: '500' })}`,
      { key: tenant.key },
    );
    expect(journeys.body.journeys).toEqual(expectedJourneys(selection, { steps: 3, limit: 500 }));
    expect(await summaryRows()).toBe(before);
  });

  it('reads no answer when a run finds every day summarized', async () => {
    const reads = await builderReads();
    builder.schedule();
    // The run is under way: it looks, and finds nothing to build.
    expect(await metricValue('trackhouse_summary_builds_pending')).toBe(1);
    await builder.idle();
    expect(await metricValue('trackhouse_summary_builds_pending')).toBe(0);
    expect(await builderReads()).toBe(reads);
  });

  it('builds a path goal created through the API for the days summarized before it', async () => {
    const withBuilder = h.jsonWith({ summaries: builder });
    await addGoal('pricing', pricingGoal, withBuilder);
    await builder.idle();
    const held = await stored();
    for (const p of (await dataParts()).filter((x) => x.table === 'sessions'))
      expect(held.get(`goals/${p.part}`)).toEqual(
        expect.arrayContaining([pathPatternRegex('/docs/**'), pathPatternRegex('/pricing')]),
      );
    const before = await summaryRows();
    const goals = await h.json<{ data: { total_conversions: number }[] }>(
      `/api/sites/${tenant.siteId}/goals?${query(RANGE, { sort: 'goalId', order: 'asc' })}`,
      { key: tenant.key },
    );
    const selected = ref.selection(events, tenant.siteId, full(RANGE)).selected;
    expect(goals.body.data.map((g) => g.total_conversions)).toEqual(
      [docsGoal, pricingGoal].map((g) => goalStats(selected, g).total_conversions),
    );
    expect(await summaryRows()).toBe(before);
  });

  it('builds a funnel saved through the API; its answer then builds nothing and equals the reference', async () => {
    const steps: FunnelStep[] = [
      { type: 'page', value: '/pricing', name: 'Pricing' },
      { type: 'page', value: '/signup' },
      { type: 'event', value: 'signup' },
    ];
    const withBuilder = h.jsonWith({ summaries: builder });
    const saved = await withBuilder(`/api/sites/${tenant.siteId}/funnels`, {
      key: tenant.key,
      method: 'POST',
      body: { name: 'signup', steps },
    });
    expect(saved.status).toBe(201);
    await builder.idle();
    const held = await stored();
    const parameter = funnelSummaryParameter(steps);
    const paths = (await dataParts()).filter((x) => x.table === 'session_paths');
    expect(paths.filter((p) => !held.has(`${parameter}/${p.part}`))).toEqual([]);
    const before = await summaryRows();
    const res = await h.json<{ data: unknown[] }>(
      `/api/sites/${tenant.siteId}/funnels/analyze?${query(RANGE)}`,
      {
        key: tenant.key,
        method: 'POST',
        body: { steps },
      },
    );
    expect(res.body.data).toEqual(expectedFunnel(ref.selection(events, tenant.siteId, full(RANGE)), steps));
    expect((res.body.data[0] as { sessions: number }).sessions).toBeGreaterThan(0);
    expect(await summaryRows()).toBe(before);
  });

  it('builds again the session totals of the days that hold their count alone, as they were first stored', async () => {
    await h.ch.command(
      `DELETE FROM metric_summaries WHERE site_id = {s:UInt32} AND parameter = 'sessions' AND totals = 0`,
      { s: tenant.siteId },
    );
    forgetKeptReads(h.ch);
    const reads = await builderReads();
    builder.schedule();
    await builder.idle();
    expect(await builderReads()).toBeGreaterThan(reads);
    const held = await stored();
    for (const p of (await dataParts()).filter((x) => x.table === 'session_facts'))
      expect(held.get(`sessions/${p.part}`)).toEqual(['']);
  });

  it('builds nothing once closed', async () => {
    await builder.close();
    await h.ch.command('DELETE FROM metric_summaries WHERE site_id = {s:UInt32}', { s: tenant.siteId });
    forgetKeptReads(h.ch);
    builder.schedule();
    await builder.idle();
    expect(await summaryRows()).toBe(0);
  });
});

describe.runIf(TEST_CLICKHOUSE === 'cluster')('the background builder of summaries on a cluster', () => {
  it('is off: a cluster reads no summaries', () => {
    expect(builder.enabled).toBe(false);
  });
});
