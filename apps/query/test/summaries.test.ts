import {
  analyzeFunnel,
  buildFunnelSummaries,
  compactSessionDays,
  type FunnelStep,
  forgetKeptReads,
  funnelStepSessions,
  funnelSummaryParameter,
  type GoalDefinition,
  generateEvents,
  insertEvents,
  journeys,
  keyOfUserId,
  pathPatternRegex,
  type StoredEvent,
} from '@trackhouse/clickhouse';
import { uuidv7, uuidv7FromSeed } from '@trackhouse/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_CLICKHOUSE } from '../../../test/helpers';
import { createQueryHarness, type QueryHarness } from './harness';
import { full, query } from './params';
import {
  reachedSteps,
  funnel as referenceFunnel,
  funnelSessions as referenceFunnelSessions,
  journeys as referenceJourneys,
} from './product-reference-funnels';
import { goalStats } from './reference';
import { lateEvents } from './traffic-data';
import * as ref from './traffic-reference';

let h: QueryHarness;
let tenant: Awaited<ReturnType<QueryHarness['tenant']>>;
let events: StoredEvent[];

/** Ten days of June 2026, in a zone whose days are cut across UTC days (the first and last). */
const RANGE = { startDate: '2026-06-03', endDate: '2026-06-12', timeZone: 'Asia/Kolkata' };
const DAY = 20260607;
const TAMPERED = '/only-in-the-summary';
const SUMMARIZED = [
  'pathname',
  'entry_page',
  'exit_page',
  'event_name',
  'page_title',
  'hostname',
  'country',
  'referrer',
  'utm_source',
  'device_type',
] as const;

beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '1000000' });
  tenant = await h.tenant();
  events = [
    ...generateEvents({
      siteId: tenant.siteId,
      events: 3000,
      days: 14,
      end: new Date('2026-06-15T12:00:00Z'),
      seed: 21,
      tieRate: 0.1,
    }),
  ];
  events.push(...acrossMidnight(events[0]!), ...pastShortRange(events[0]!));
  await insertEvents(h.ch, events);
  await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
}, 120_000);
/**
 * Sessions crossing UTC midnight inside the summarized days and at their edges: left out of
 * every summary, read from their events (a pageview on each side, each of its own page).
 */
function acrossMidnight(like: StoredEvent): StoredEvent[] {
  return ['2026-06-04', '2026-06-07', '2026-06-12'].flatMap((day, d) => {
    const midnight = Date.parse(`${day}T00:00:00Z`);
    const sessionId = uuidv7(midnight - 120_000);
    return [-120_000, -30_000, 45_000].map((offset, i) => {
      const ms = midnight + offset;
      const iso = new Date(ms).toISOString();
      return {
        ...like,
        timestamp: `${iso.slice(0, 10)} ${iso.slice(11, 23)}`,
        event_id: uuidv7(ms),
        session_id: sessionId,
        user_id: `00000000000000a${d}`,
        type: 'pageview',
        event_name: '',
        properties: '{}',
        props: {},
        pathname: `/midnight/${d}/${i}`,
        page_title: `Midnight ${d} ${i}`,
      };
    });
  });
}

/** A range whose last whole UTC day is 8 June: it ends at 9 June 18:30 UTC. */
const SHORT_RANGE = { startDate: '2026-06-03', endDate: '2026-06-09', timeZone: 'Asia/Kolkata' };
const LONG_DAY = 20260608;
const LONG_PATH = '/long-session';

/**
 * A session of 8 June whose last event comes after SHORT_RANGE ends (9 June 20:00 UTC): the
 * span of that day's sessions reaches out of SHORT_RANGE, not out of RANGE.
 */
function pastShortRange(like: StoredEvent): StoredEvent[] {
  const start = Date.parse('2026-06-08T22:00:00Z');
  // Ids of their own times (uuidv7() never goes back in time: it would date them after the last).
  const sessionId = uuidv7FromSeed(start, 'long session');
  return [0, 15 * 3_600_000, 22 * 3_600_000].map((offset, i) => {
    const iso = new Date(start + offset).toISOString();
    return {
      ...like,
      timestamp: `${iso.slice(0, 10)} ${iso.slice(11, 23)}`,
      event_id: uuidv7FromSeed(start + offset, `long session ${i}`),
      session_id: sessionId,
      user_id: '00000000000000b0',
      type: 'pageview',
      event_name: '',
      properties: '{}',
      props: {},
      pathname: `${LONG_PATH}/${i}`,
      page_title: `Long ${i}`,
    };
  });
}

afterAll(async () => {
  await h.close();
});

/** `metric` through `json` (another handle's app, QueryHarness.jsonOn). */
const metricOn = (json: QueryHarness['json'], parameter: string, range = RANGE) =>
  json<{ data: { data: { value: string; count: number }[]; totalCount: number } }>(
    `/api/sites/${tenant.siteId}/metric?${query(range, { parameter, limit: '1000' })}`,
    { key: tenant.key },
  );
const metric = (parameter: string, range = RANGE) => metricOn(h.json, parameter, range);

const expected = (parameter: (typeof SUMMARIZED)[number], range = RANGE) =>
  ref.metric(ref.selection(events, tenant.siteId, full(range)), parameter);

const summaryDays = async (parameter: string) =>
  (
    await h.ch.query<{ partition: number }>(
      `SELECT partition FROM metric_summaries FINAL
       WHERE site_id = {s:UInt32} AND parameter = {p:String} AND totals = 1 ORDER BY partition`,
      { s: tenant.siteId, p: parameter },
    )
  ).map((r) => Number(r.partition));

const partOf = async (day: number, table = 'session_paths') => {
  const [row] = await h.ch.query<{ name: string }>(
    `SELECT name FROM system.parts WHERE database = currentDatabase() AND table = {t:String}
       AND active AND partition_id = {d:String}`,
    { d: String(day), t: table },
  );
  return row!.name;
};

/** A summary row of DAY, with the span of `like` (a day's totals) if given, zeros but for `fields`. */
const summaryRow = (
  like: { span_start: string; span_end: string } | undefined,
  fields: Record<string, unknown>,
) => ({
  site_id: tenant.siteId,
  partition: DAY,
  source_part: '',
  totals: 0,
  value: '',
  n_sessions: 0,
  n_events: 0,
  bounces: 0,
  top_ms: 0,
  top_n: 0,
  s_part: 0,
  e_part: 0,
  ...(like ? { span_start: like.span_start, span_end: like.span_end } : {}),
  ...fields,
});

/**
 * A summary row only the summary holds, for `parameters` on `day`'s current part: seen in an
 * answer, it shows that the day's summary was read.
 */
const tamper = async (
  parameters: string[],
  day: number,
  table = 'session_paths',
  { value = TAMPERED, events = 1, forget = true } = {},
) => {
  const part = await partOf(day, table);
  await h.ch.writer.insert({
    table: 'metric_summaries',
    values: parameters.map((parameter) =>
      summaryRow(undefined, {
        parameter,
        partition: day,
        source_part: part,
        value,
        n_sessions: 1_000_000,
        n_events: events,
      }),
    ),
    format: 'JSONEachRow',
  });
  if (forget) forgetKeptReads(h.ch);
};

/** `n` late events in sessions of 7 June (DAY): its partitions gain a part. */
const addLateEvents = async (n: number, token: string) => {
  const late = lateEvents(
    events.filter((e) => e.timestamp.startsWith('2026-06-07')),
    n,
  );
  await h.ch.writer.insert({
    table: 'events',
    values: late,
    format: 'JSONEachRow',
    clickhouse_settings: { insert_deduplication_token: `${token}-late-${tenant.siteId}` },
  });
  events = [...events, ...late];
};

// Summaries read the parts of a single engine; a cluster reads every day from its sessions.
describe.skipIf(TEST_CLICKHOUSE === 'cluster')('per-day summaries of the page breakdowns', () => {
  it('summarizes the whole UTC days of a range, a week of them per read, and answers as the events do', async () => {
    // 3 June 00:00 in Kolkata is 2 June 18:30 UTC, 13 June 00:00 is 12 June 18:30: the UTC
    // days 3 to 11 lie wholly inside.
    const inside = [3, 4, 5, 6, 7, 8, 9, 10, 11].map((d) => 20260600 + d);
    for (const parameter of SUMMARIZED) {
      const first = await metric(parameter);
      expect(first.status).toBe(200);
      expect({ parameter, ...first.body.data }).toEqual({ parameter, ...expected(parameter) });
      const built = await summaryDays(parameter);
      expect({ parameter, built: built.length }).toEqual({ parameter, built: 7 });
      expect(inside).toEqual(expect.arrayContaining(built));
      const second = await metric(parameter);
      expect(second.body).toEqual(first.body);
      expect({ parameter, days: await summaryDays(parameter) }).toEqual({ parameter, days: inside });
      expect((await metric(parameter)).body).toEqual(first.body);
    }
    // The builds' settings held for their own queries: no connection of the pool kept one
    // (reads take the pool's connections in turn; 16 reads cover the largest pool).
    for (let i = 0; i < 16; i++) {
      const [s] = await h.ch.query<{ v: unknown }>(
        "SELECT toUInt8(getSetting('use_index_for_in_with_subqueries')) AS v",
      );
      expect(Number(s?.v)).toBe(1);
    }
  });

  it('keeps the summarized days a range read: a stored summary changed behind the service shows once they are forgotten', async () => {
    for (let i = 0; i < 2; i++) await metric('pathname');
    const kept = (await metric('pathname')).body;
    await tamper(['pathname'], DAY, 'session_paths', { forget: false });
    // The same range over the same parts: the days kept from the last read, not the stored rows.
    expect((await metric('pathname')).body).toEqual(kept);
    forgetKeptReads(h.ch);
    expect((await metric('pathname')).body.data.data[0]).toMatchObject({ value: TAMPERED, count: 1_000_000 });
  });

  it('reads a day from its summary while the day has one part, and from its sessions once it has another', async () => {
    // Every day summarized (two reads build up to 14 days).
    for (const parameter of ['pathname', 'page_title', 'pathname', 'page_title']) await metric(parameter);
    expect(await summaryDays('page_title')).toContain(DAY);
    // A summary row only the summary holds: seen in the answer, it shows the summary was read
    // (the keyed breakdowns and the ones read from the events alike).
    await tamper(['pathname', 'page_title'], DAY);
    // The session attributes' summaries are of `session_facts` parts.
    await tamper(['country'], DAY, 'session_facts');
    for (const parameter of ['pathname', 'page_title', 'country']) {
      expect({ parameter, top: (await metric(parameter)).body.data.data[0] }).toMatchObject({
        parameter,
        top: { value: TAMPERED, count: 1_000_000 },
      });
    }

    // Late events in sessions of that day: its partition gains a part, its summary is left.
    await addLateEvents(5, 'summaries');
    const res = await metric('pathname');
    expect(res.body.data.data.map((r) => r.value)).not.toContain(TAMPERED);
    expect(res.body.data).toEqual(expected('pathname'));
    expect(res.body.data.data.map((r) => r.value)).toContain('/late');
    const countries = await metric('country');
    expect(countries.body.data.data.map((r) => r.value)).not.toContain(TAMPERED);
    expect(countries.body.data).toEqual(expected('country'));
    const titles = await metric('page_title');
    expect(titles.body.data).toEqual(expected('page_title'));
    expect(titles.body.data.data.map((r) => r.value)).toContain('Late');

    // Merged into one part again: a new summary of the new part, the same answers.
    await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
    for (const parameter of SUMMARIZED) {
      expect({ parameter, ...(await metric(parameter)).body.data }).toEqual({
        parameter,
        ...expected(parameter),
      });
    }
    const [built] = await h.ch.query<{ n: number }>(
      `SELECT count() AS n FROM metric_summaries FINAL
       WHERE site_id = {s:UInt32} AND parameter = 'pathname' AND totals = 1 AND partition = {d:UInt32}
         AND source_part = {part:String}`,
      { s: tenant.siteId, d: DAY, part: await partOf(DAY) },
    );
    expect(built?.n).toBe(1);
  });

  it('reads a day of the keyed breakdowns from its sessions in a range its sessions reach out of', async () => {
    for (let i = 0; i < 3; i++) await metric('pathname');
    expect(await summaryDays('pathname')).toContain(LONG_DAY);
    await tamper(['pathname'], LONG_DAY);
    // RANGE holds every session of 8 June: the summary serves it.
    expect((await metric('pathname')).body.data.data[0]).toMatchObject({ value: TAMPERED });
    // SHORT_RANGE ends before the long session's last event: 8 June is read from its sessions,
    // the long session counted over its events in range only.
    for (const parameter of ['pathname', 'entry_page', 'exit_page', 'event_name', 'country'] as const) {
      const res = await metric(parameter, SHORT_RANGE);
      expect({ parameter, ...res.body.data }).toEqual({ parameter, ...expected(parameter, SHORT_RANGE) });
    }
    const paths = (await metric('pathname', SHORT_RANGE)).body.data.data.map((r) => r.value);
    expect(paths).toEqual(expect.arrayContaining([`${LONG_PATH}/0`, `${LONG_PATH}/1`]));
    expect(paths).not.toContain(`${LONG_PATH}/2`);
    expect(paths).not.toContain(TAMPERED);
  });

  it('never builds a summary of a day from a range its sessions reach out of', async () => {
    // 8 June rewritten as a new part: its summaries (and the tampered row) no longer apply.
    const before = await partOf(LONG_DAY);
    await h.ch.command(`OPTIMIZE TABLE session_paths PARTITION ${LONG_DAY} FINAL`);
    const part = await partOf(LONG_DAY);
    expect(part).not.toBe(before);
    const keyed = ['pathname', 'entry_page', 'exit_page', 'event_name'] as const;
    const builtFor = async () => {
      const [row] = await h.ch.query<{ n: number }>(
        `SELECT count() AS n FROM metric_summaries FINAL
         WHERE site_id = {s:UInt32} AND partition = {d:UInt32} AND source_part = {part:String}`,
        { s: tenant.siteId, d: LONG_DAY, part },
      );
      return Number(row?.n ?? 0);
    };
    // Read first over SHORT_RANGE: a summary built there would lack the long session's last page.
    for (const parameter of keyed) {
      const res = await metric(parameter, SHORT_RANGE);
      expect({ parameter, ...res.body.data }).toEqual({ parameter, ...expected(parameter, SHORT_RANGE) });
    }
    expect(await builtFor()).toBe(0);
    // RANGE holds the day's sessions: it builds the day's summaries, whole.
    for (const parameter of [...keyed, ...keyed]) {
      const res = await metric(parameter);
      expect({ parameter, ...res.body.data }).toEqual({ parameter, ...expected(parameter) });
    }
    expect(await builtFor()).toBeGreaterThan(0);
    expect((await metric('pathname')).body.data.data.map((r) => r.value)).toContain(`${LONG_PATH}/2`);
  });

  it('finds the sessions crossing midnight into summarized days by a subquery when too many to list', async () => {
    // Every day summarized (two reads build up to 14 days), and a row only the summaries hold.
    for (const parameter of ['page_title', 'hostname', 'page_title', 'hostname']) await metric(parameter);
    await tamper(['page_title', 'hostname'], DAY);
    // No session may be listed by id: those of acrossMidnight reaching into 4 and 7 June are
    // found by the subquery (seen in the reads), and must count as the reference counts them.
    const reads: string[] = [];
    const unlisted = h.jsonOn({
      ...h.ch,
      maxListedSessions: 0,
      query: (sql, params, settings) => {
        reads.push(sql);
        return h.ch.query(sql, params, settings);
      },
    });
    for (const parameter of ['page_title', 'hostname'] as const) {
      const res = await metricOn(unlisted, parameter);
      const want = expected(parameter);
      expect(res.body.data.data[0]).toMatchObject({ value: TAMPERED, count: 1_000_000 });
      expect({ parameter, data: res.body.data.data.filter((r) => r.value !== TAMPERED) }).toEqual({
        parameter,
        data: want.data,
      });
      expect(res.body.data.totalCount).toBe(want.totalCount + 1);
    }
    // The uncovered sessions' subquery reads the rollup's settled parts or merges it; the
    // summaries' builder reads `session_paths` by a plain WHERE, so it cannot stand in for it.
    expect(
      reads.some((sql) =>
        /session_id IN \(SELECT session_id FROM session_paths\s+(PREWHERE|FINAL)/.test(sql),
      ),
    ).toBe(true);
    const titles = (await metricOn(unlisted, 'page_title')).body.data.data.map((r) => r.value);
    expect(titles).toEqual(expect.arrayContaining(['Midnight 0 0', 'Midnight 0 2', 'Midnight 1 1']));
  });

  it("counts a day's sessions ending the next day from their summary where that day is summarized too", async () => {
    for (const parameter of ['page_title', 'hostname', 'page_title', 'hostname']) await metric(parameter);
    // acrossMidnight's sessions begin on 3, 6 and 11 June and end the next day.
    const [third, eleventh] = [20260603, 20260611];
    for (const parameter of ['page_title:next_day', 'hostname:next_day'])
      expect(await summaryDays(parameter)).toEqual(expect.arrayContaining([third, DAY - 1, eleventh]));
    // Rows only the summaries hold: 4 June is summarized, so 3 June's next-day sessions are
    // counted from their summary; 12 June is cut by the range, so 11 June's are read from their
    // events and its summary left.
    const parameters = ['page_title:next_day', 'hostname:next_day'];
    await tamper(parameters, third, 'session_paths', { value: 'Next day of 3 June' });
    await tamper(parameters, eleventh, 'session_paths', { value: 'Next day of 11 June' });
    try {
      for (const parameter of ['page_title', 'hostname'] as const) {
        // The last test's row of 7 June aside.
        const data = (await metric(parameter)).body.data.data.filter((r) => r.value !== TAMPERED);
        expect(data[0]).toMatchObject({ value: 'Next day of 3 June', count: 1_000_000 });
        const rest = data.slice(1);
        expect(rest.map((r) => r.value)).not.toContain('Next day of 11 June');
        // The others as the reference counts them: the summaries' sessions are not read again.
        expect({ parameter, data: rest }).toEqual({ parameter, data: expected(parameter).data });
      }
      // Their summary deleted, the next read builds it again from their events: the same answer.
      await h.ch.command(
        `DELETE FROM metric_summaries WHERE site_id = {s:UInt32} AND parameter IN {p:Array(String)}
           AND partition = {d:UInt32}`,
        { s: tenant.siteId, p: parameters, d: third },
      );
      forgetKeptReads(h.ch);
      const titles = (await metric('page_title')).body.data.data.filter((r) => r.value !== TAMPERED);
      expect(titles).toEqual(expected('page_title').data);
      expect(titles.map((r) => r.value)).toContain('Midnight 0 2');
      expect(await summaryDays('page_title:next_day')).toContain(third);
    } finally {
      await h.ch.command(
        `DELETE FROM metric_summaries WHERE site_id = {s:UInt32} AND value LIKE 'Next day of %'`,
        { s: tenant.siteId },
      );
      forgetKeptReads(h.ch);
    }
  });
});

// The overview's session totals and the sessions list's count (unfiltered) have summaries of the
// days of `session_facts`: one row of the empty value per day.
describe.skipIf(TEST_CLICKHOUSE === 'cluster')('per-day summaries of the session totals', () => {
  const overview = async (range = RANGE) => {
    const res = await h.json<{ data: ReturnType<typeof ref.overview> }>(
      `/api/sites/${tenant.siteId}/overview?${query(range)}`,
      { key: tenant.key },
    );
    expect(res.status).toBe(200);
    return res.body.data;
  };
  const sessionCount = async (range = RANGE) => {
    const res = await h.json<{ totalCount: number }>(
      `/api/sites/${tenant.siteId}/sessions?${query(range, { limit: '1' })}`,
      { key: tenant.key },
    );
    expect(res.status).toBe(200);
    return res.body.totalCount;
  };
  const expectedOverview = (range = RANGE) => ref.overview(ref.selection(events, tenant.siteId, full(range)));
  const totalsOf = async (day: number) =>
    h.ch.query<{ n_sessions: number; n_events: number }>(
      `SELECT n_sessions, n_events FROM metric_summaries FINAL
       WHERE site_id = {s:UInt32} AND parameter = 'sessions' AND totals = 0 AND value = ''
         AND partition = {d:UInt32} AND source_part = {part:String}`,
      { s: tenant.siteId, d: day, part: await partOf(day, 'session_facts') },
    );

  beforeAll(async () => {
    await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
  });

  it('answers from the summaries as from the sessions, a week of days built per read', async () => {
    const want = expectedOverview();
    const inside = [3, 4, 5, 6, 7, 8, 9, 10, 11].map((d) => 20260600 + d);
    // A week of days a read at most: the first read builds seven of the range's nine days.
    expect(await summaryDays('sessions')).toEqual([]);
    expect(await overview()).toEqual(want);
    const built = await summaryDays('sessions');
    expect(built).toHaveLength(7);
    expect(inside).toEqual(expect.arrayContaining(built));
    // The second builds the rest; the count of the sessions list reads the same summaries.
    for (let i = 0; i < 2; i++) {
      expect(await overview()).toEqual(want);
      expect(await sessionCount()).toBe(want.sessions);
    }
    expect(await summaryDays('sessions')).toEqual(inside);
    // The day's summary: the sessions whose ids date from that UTC day (its partition) and
    // their pageviews (each event once), as the generated events hold them.
    const ofDay = events.filter(
      (e) =>
        new Date(Number.parseInt(e.session_id.replaceAll('-', '').slice(0, 12), 16))
          .toISOString()
          .slice(0, 10) === '2026-06-07',
    );
    const [held] = await totalsOf(DAY);
    expect(held).toEqual({
      n_sessions: new Set(ofDay.map((e) => e.session_id)).size,
      n_events: new Set(ofDay.filter((e) => e.type === 'pageview').map((e) => e.event_id)).size,
    });
    // SHORT_RANGE: 8 June's sessions reach past it, so that day is read from its sessions.
    expect(await overview(SHORT_RANGE)).toEqual(expectedOverview(SHORT_RANGE));
    expect(await sessionCount(SHORT_RANGE)).toBe(expectedOverview(SHORT_RANGE).sessions);
  });

  it('reads a day from its summary while it has one part, and from its sessions after a late event', async () => {
    const [held] = await totalsOf(DAY);
    // The day's session totals replaced: a million sessions without pageviews.
    await tamper(['sessions'], DAY, 'session_facts', { value: '', events: 0 });
    const want = expectedOverview();
    const tampered = await overview();
    // The summary's sessions, not the day's: the visitors are still read from the sessions.
    expect(tampered.sessions).toBe(want.sessions - held!.n_sessions + 1_000_000);
    expect(tampered.pageviews).toBe(want.pageviews - held!.n_events);
    expect(tampered.users).toBe(want.users);

    await addLateEvents(4, 'session-totals');
    expect(await overview()).toEqual(expectedOverview());
    await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
    for (let i = 0; i < 2; i++) {
      expect(await overview()).toEqual(expectedOverview());
      expect(await sessionCount()).toBe(expectedOverview().sessions);
    }
    expect(await totalsOf(DAY)).toHaveLength(1);
  });
});

type Goal = GoalDefinition & { name: string };
const pathGoal = (name: string, pathPattern: string): Goal => ({
  name,
  goalType: 'path',
  config: { pathPattern },
});

// The goal list's sessions and path-goal conversions (unfiltered) have summaries of the days of
// the `sessions` rollup, per pattern.
describe.skipIf(TEST_CLICKHOUSE === 'cluster')('per-day summaries of the goal list', () => {
  const goals: (Goal & { id: number })[] = [];
  const addGoal = async (goal: Goal) => {
    const res = await h.json<{ goalId: number }>(`/api/sites/${tenant.siteId}/goals`, {
      key: tenant.key,
      method: 'POST',
      body: { name: goal.name, goalType: goal.goalType, config: goal.config },
    });
    expect(res.status).toBe(201);
    goals.push({ ...goal, id: res.body.goalId });
  };
  const list = async (range = RANGE) => {
    const res = await h.json<{
      data: { goalId: number; total_sessions: number; total_conversions: number }[];
    }>(
      `/api/sites/${tenant.siteId}/goals?${query(range, { page_size: '100', sort: 'goalId', order: 'asc' })}`,
      {
        key: tenant.key,
      },
    );
    expect(res.status).toBe(200);
    return res.body.data.map((g) => ({
      goalId: g.goalId,
      sessions: g.total_sessions,
      conversions: g.total_conversions,
    }));
  };
  const expectedList = (range = RANGE) => {
    const selected = ref.selection(events, tenant.siteId, full(range)).selected;
    return goals.map((g) => {
      const e = goalStats(selected, g);
      return { goalId: g.id, sessions: e.total_sessions, conversions: e.total_conversions };
    });
  };
  const summarizedPatterns = async (day: number) =>
    (
      await h.ch.query<{ value: string }>(
        `SELECT value FROM metric_summaries FINAL
         WHERE site_id = {s:UInt32} AND parameter = 'goals' AND totals = 0 AND partition = {d:UInt32}
           AND source_part = {part:String}
         ORDER BY value`,
        { s: tenant.siteId, d: day, part: await partOf(day, 'sessions') },
      )
    ).map((r) => r.value);

  beforeAll(async () => {
    await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
    const common = new Map<string, number>();
    for (const e of events)
      if (e.type === 'pageview') common.set(e.pathname, (common.get(e.pathname) ?? 0) + 1);
    const [top] = [...common].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    await addGoal(pathGoal('every page', '/**'));
    await addGoal(pathGoal('most viewed', top![0]));
    await addGoal(pathGoal('across midnight', '/midnight/*/2'));
    await addGoal({
      name: 'an event',
      goalType: 'event',
      config: { eventName: events.find((e) => e.type === 'custom_event')!.event_name },
    });
  });

  it('answers from the summaries as from the sessions, and builds a pattern a day lacks', async () => {
    const first = await list();
    expect(first).toEqual(expectedList());
    expect(first.every((g) => g.sessions > 0)).toBe(true);
    expect(first.find((g) => g.goalId === goals[2]!.id)?.conversions).toBe(3);
    for (let i = 0; i < 2; i++) expect(await list()).toEqual(first);
    const patterns = goals
      .slice(0, 3)
      .map((g) => pathPatternRegex((g as Extract<Goal, { goalType: 'path' }>).config.pathPattern));
    expect(await summarizedPatterns(DAY)).toEqual([...new Set(patterns)].sort());
    // SHORT_RANGE: 8 June's sessions reach past it, so that day is read from its sessions.
    expect(await list(SHORT_RANGE)).toEqual(expectedList(SHORT_RANGE));

    // A goal added later: the days summarized before it are built again for it.
    await addGoal(pathGoal('midnight pages', '/midnight/**'));
    // A week of days a read at most: the range's nine are all built again by the second.
    for (let i = 0; i < 2; i++) expect(await list()).toEqual(expectedList());
    expect(await summarizedPatterns(DAY)).toContain(pathPatternRegex('/midnight/**'));
  });

  it('reads a day from its summary while it has one part, and from its sessions after a late event', async () => {
    const pattern = pathPatternRegex('/**');
    await h.ch.writer.insert({
      table: 'metric_summaries',
      values: [
        summaryRow(
          { span_start: '2026-06-07 00:00:00.000', span_end: '2026-06-07 23:59:59.999' },
          {
            parameter: 'goals',
            source_part: await partOf(DAY, 'sessions'),
            value: pattern,
            n_sessions: 1_000_000,
          },
        ),
      ],
      format: 'JSONEachRow',
    });
    forgetKeptReads(h.ch);
    const tampered = await list();
    expect(tampered[0]!.conversions).toBeGreaterThan(1_000_000);

    await addLateEvents(4, 'goal-summaries');
    expect(await list()).toEqual(expectedList());
    await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
    for (let i = 0; i < 2; i++) expect(await list()).toEqual(expectedList());
    expect(await summarizedPatterns(DAY)).toContain(pattern);
  });
});

// Journeys from the first page, unfiltered, have summaries of the days of `session_paths`: per
// day a totals row under `journeys:<steps>` (the sessions with a journey) and one row per journey
// under `journeys:<steps>:paths`.
describe.skipIf(TEST_CLICKHOUSE === 'cluster')('per-day summaries of the journeys', () => {
  type Journey = { path: string[]; count: number; percentage: number };
  const journeysOf = async (extra: Record<string, string>, range = RANGE) => {
    const res = await h.json<{ journeys: Journey[] }>(
      `/api/sites/${tenant.siteId}/journeys?${query(range, extra)}`,
      { key: tenant.key },
    );
    expect(res.status).toBe(200);
    return res.body.journeys;
  };
  const expected = (steps: number, limit: number, range = RANGE) =>
    referenceJourneys(ref.selection(events, tenant.siteId, full(range)), { steps, limit });
  const inside = [3, 4, 5, 6, 7, 8, 9, 10, 11].map((d) => 20260600 + d);
  /** A day's totals row, as stored for its current part. */
  const totalsOf = async (day: number) => {
    const [row] = await h.ch.query<{ s_part: number; span_start: string; span_end: string }>(
      `SELECT s_part, span_start, span_end FROM metric_summaries FINAL
       WHERE site_id = {s:UInt32} AND parameter = 'journeys:3' AND totals = 1
         AND partition = {d:UInt32} AND source_part = {part:String}`,
      { s: tenant.siteId, d: day, part: await partOf(day) },
    );
    return row;
  };

  beforeAll(async () => {
    await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
  });

  it('answers from the summaries as from the sessions, a week of days built per read', async () => {
    expect(await summaryDays('journeys:3')).toEqual([]);
    const want = expected(3, 500);
    expect(want.length).toBeGreaterThan(20);
    expect(await journeysOf({ limit: '500' })).toEqual(want);
    const built = await summaryDays('journeys:3');
    expect(built).toHaveLength(7);
    expect(inside).toEqual(expect.arrayContaining(built));
    expect(await journeysOf({ limit: '500' })).toEqual(want);
    expect(await summaryDays('journeys:3')).toEqual(inside);
    // A day's journeys add up to its totals, which are its sessions with two pages or more.
    const [sums] = await h.ch.query<{ n: number }>(
      `SELECT sum(n_sessions) AS n FROM metric_summaries FINAL
       WHERE site_id = {s:UInt32} AND parameter = 'journeys:3:paths' AND partition = {d:UInt32}`,
      { s: tenant.siteId, d: DAY },
    );
    expect(Number(sums?.n)).toBe(Number((await totalsOf(DAY))?.s_part));
    expect(Number(sums?.n)).toBeGreaterThan(0);
    // Other lengths have summaries of their own, built by the reads asking for them; short
    // limits (with none read past them, the exact bound decides what else to read).
    for (const [steps, limit] of [
      [2, 20],
      [2, 20],
      [5, 500],
      [3, 5],
    ] as const) {
      expect({
        steps,
        limit,
        journeys: await journeysOf({ steps: String(steps), limit: String(limit) }),
      }).toEqual({
        steps,
        limit,
        journeys: expected(steps, limit),
      });
    }
    expect(await summaryDays('journeys:2')).toHaveLength(9);
    for (const limit of [1, 3, 10, 40]) {
      expect(await journeys(h.ch, tenant.siteId, full(RANGE), { steps: 3, limit }, 0)).toEqual(
        expected(3, limit),
      );
    }
    // SHORT_RANGE: 8 June's sessions reach past it, so that day is read from its sessions.
    expect(await journeysOf({ limit: '500' }, SHORT_RANGE)).toEqual(expected(3, 500, SHORT_RANGE));
  });

  it('reads a day from its summary while its rows add up, and from its sessions after a late event', async () => {
    for (let i = 0; i < 2; i++) await journeysOf({ limit: '500' });
    const totals = await totalsOf(DAY);
    expect(totals).toBeDefined();
    // The day's journeys stored twice, as two builds at once would (until the rows merge): each
    // still counts once.
    await h.ch.command(
      `INSERT INTO metric_summaries SELECT * FROM metric_summaries
       WHERE site_id = {s:UInt32} AND parameter = 'journeys:3:paths' AND partition = {d:UInt32}`,
      { s: tenant.siteId, d: DAY },
    );
    forgetKeptReads(h.ch);
    expect(await journeysOf({ limit: '500' })).toEqual(expected(3, 500));
    // A journey no session takes (a page repeated in a row counts once), on 7 June.
    const [top] = await journeysOf({ limit: '1' });
    const page = top!.path[0]!;
    const [key] = await h.ch.query<{ v: string }>(
      "SELECT arrayStringConcat(arrayMap(p -> toString(bitShiftRight(cityHash64(p), 16)), [{p:String}, {p:String}]), ',') AS v",
      { p: page },
    );
    const row = (parameter: string, fields: Record<string, unknown>) =>
      summaryRow(totals!, { parameter, ...fields });
    const part = await partOf(DAY);
    await h.ch.writer.insert({
      table: 'metric_summaries',
      values: [
        row('journeys:3:paths', {
          source_part: part,
          totals: 0,
          value: key!.v,
          n_sessions: 1_000_000,
          s_part: 0,
        }),
      ],
      format: 'JSONEachRow',
    });
    forgetKeptReads(h.ch);
    // Its rows no longer add up to the day's totals: the answer comes from the sessions.
    expect(await journeysOf({ limit: '500' })).toEqual(expected(3, 500));
    // With the totals raised alike, the summary is read: the journey shows.
    await h.ch.writer.insert({
      table: 'metric_summaries',
      values: [
        row('journeys:3', {
          source_part: part,
          totals: 1,
          value: '',
          n_sessions: 0,
          s_part: Number(totals!.s_part) + 1_000_000,
        }),
      ],
      format: 'JSONEachRow',
    });
    forgetKeptReads(h.ch);
    const [first] = await journeysOf({ limit: '500' });
    expect(first).toMatchObject({ path: [page, page], count: 1_000_000 });

    // Late events in sessions of that day: its partition gains a part, its summary is left.
    await addLateEvents(3, 'journey-summaries');
    const after = await journeysOf({ limit: '500' });
    expect(after).toEqual(expected(3, 500));
    expect(after.map((j) => j.path)).not.toContainEqual([page, page]);
    // Merged into one part again: a new summary of the new part, the same answers.
    await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
    for (let i = 0; i < 2; i++) expect(await journeysOf({ limit: '500' })).toEqual(expected(3, 500));
    expect(await totalsOf(DAY)).toBeDefined();
  });
});

// Unfiltered funnels over `session_paths` have summaries of the days: per day a totals row under
// `funnel:<hash of the steps>`, the sessions reaching each step (values `1`..`n`), and apart
// under `funnel:<hash>:visitors` one row per visitor with their furthest step that day.
describe.skipIf(TEST_CLICKHOUSE === 'cluster')('per-day summaries of the funnels', () => {
  const page = (value: string): FunnelStep => ({ type: 'page', value });
  const event = (value: string): FunnelStep => ({ type: 'event', value });
  const FUNNEL = [page('/pricing'), page('/signup'), event('signup')];
  /** Every page three times: most sessions, many sharing a millisecond between their steps. */
  const EVERY_PAGE = [page('/**'), page('/**'), page('/**')];
  const parameterOf = (steps: FunnelStep[]) => funnelSummaryParameter(steps)!;
  const analyze = async (steps: FunnelStep[], range = RANGE) => {
    const res = await h.json<{ data: unknown[] }>(
      `/api/sites/${tenant.siteId}/funnels/analyze?${query(range)}`,
      {
        key: tenant.key,
        method: 'POST',
        body: { steps },
      },
    );
    expect(res.status).toBe(200);
    return res.body.data;
  };
  /** Builds a week of the range's days at most; the days summarized after it. */
  const build = (steps: FunnelStep[]) => buildFunnelSummaries(h.ch, tenant.siteId, full(RANGE), steps);
  const expected = (steps: FunnelStep[], range = RANGE) =>
    referenceFunnel(ref.selection(events, tenant.siteId, full(range)), steps);
  const inside = [3, 4, 5, 6, 7, 8, 9, 10, 11].map((d) => 20260600 + d);
  /** The visitors' rows of a day as stored (FINAL), by visitor number. */
  const storedVisitors = async (steps: FunnelStep[], day: number) =>
    (
      await h.ch.query<{ value: string; top_n: number }>(
        `SELECT value, top_n FROM metric_summaries FINAL
         WHERE site_id = {s:UInt32} AND parameter = {p:String} AND partition = {d:UInt32}
           AND source_part = {part:String} ORDER BY value`,
        { s: tenant.siteId, p: `${parameterOf(steps)}:visitors`, d: day, part: await partOf(day) },
      )
    ).map((r) => [r.value, Number(r.top_n)]);
  /** Each visitor's furthest step over the sessions of a partition day (the day its session id tells), from the events. */
  const visitorsOf = (steps: FunnelStep[], day: number) => {
    const sessions = new Map<string, StoredEvent[]>();
    for (const e of events) {
      if (e.site_id !== tenant.siteId) continue;
      const started = new Date(Number.parseInt(e.session_id.replaceAll('-', '').slice(0, 12), 16));
      if (Number(started.toISOString().slice(0, 10).replaceAll('-', '')) !== day) continue;
      sessions.set(e.session_id, [...(sessions.get(e.session_id) ?? []), e]);
    }
    const furthest = new Map<string, number>();
    for (const list of sessions.values()) {
      list.sort((a, b) => a.timestamp.localeCompare(b.timestamp) || a.event_id.localeCompare(b.event_id));
      const reach = reachedSteps(list, steps);
      const visitor = keyOfUserId(list[0]!.user_id).toString();
      if (reach > 0) furthest.set(visitor, Math.max(furthest.get(visitor) ?? 0, reach));
    }
    return [...furthest].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  };

  beforeAll(async () => {
    await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
  });

  it('answers from the summaries as from the sessions, a week of days built per build, none by answers', async () => {
    for (const steps of [FUNNEL, EVERY_PAGE]) {
      const want = expected(steps);
      expect(want[0]).toMatchObject({ sessions: expect.any(Number) });
      expect(await analyze(steps)).toEqual(want);
      expect(await summaryDays(parameterOf(steps))).toEqual([]);
      expect(await build(steps)).toBe(7);
      const built = await summaryDays(parameterOf(steps));
      expect(built).toHaveLength(7);
      expect(inside).toEqual(expect.arrayContaining(built));
      expect(await analyze(steps)).toEqual(want);
      expect(await build(steps)).toBe(9);
      expect(await summaryDays(parameterOf(steps))).toEqual(inside);
      // A day holds each visitor's furthest step over its sessions, tied ones walked exactly.
      const visitors = visitorsOf(steps, DAY);
      expect(visitors.length).toBeGreaterThan(5);
      expect(await storedVisitors(steps, DAY)).toEqual(visitors);
      // With every session walked exactly, and over a range a day's sessions reach out of.
      expect(await analyzeFunnel(h.ch, tenant.siteId, full(RANGE), steps, 0)).toEqual(want);
      expect(await analyze(steps, SHORT_RANGE)).toEqual(expected(steps, SHORT_RANGE));
      // The step's sessions: summarized days counted from their summaries, and walked only when
      // the page reaches back into them (deep pages walk every one).
      for (const range of [RANGE, SHORT_RANGE]) {
        const sel = ref.selection(events, tenant.siteId, full(range));
        for (const [stepNumber, mode, limit, offset] of [
          [1, 'reached', 10, 0],
          [2, 'dropped', 20, 0],
          [2, 'reached', 50, 40],
          [3, 'reached', 100, 0],
          [1, 'reached', 100, 300],
        ] as const) {
          const listed = referenceFunnelSessions(sel, steps, stepNumber, mode);
          for (const spare of [0, 50]) {
            const page = { stepNumber, mode, limit, offset };
            const got = await funnelStepSessions(h.ch, tenant.siteId, full(range), steps, page, spare);
            expect({ ...page, ...JSON.parse(JSON.stringify(got)) }).toEqual({
              ...page,
              data: listed.slice(offset, offset + limit),
              totalCount: listed.length,
            });
          }
        }
      }
    }
    // Names change nothing of what a step matches: the same summaries.
    expect(parameterOf(FUNNEL.map((s) => ({ ...s, name: 'named' })))).toBe(parameterOf(FUNNEL));
    expect(parameterOf([page('/pricing'), page('/signup')])).not.toBe(parameterOf(FUNNEL));
  });

  it('reads a day from its summary, visitors stored twice once, and from its sessions after a late event', async () => {
    for (let i = 0; i < 2; i++) await build(FUNNEL);
    const parameter = parameterOf(FUNNEL);
    const want = expected(FUNNEL) as { visitors: number; sessions: number }[];
    // The day's visitors stored twice, as two builds at once would (until the rows merge).
    await h.ch.command(
      `INSERT INTO metric_summaries SELECT * FROM metric_summaries
       WHERE site_id = {s:UInt32} AND parameter = {p:String} AND partition = {d:UInt32}`,
      { s: tenant.siteId, p: `${parameter}:visitors`, d: DAY },
    );
    forgetKeptReads(h.ch);
    expect(await analyze(FUNNEL)).toEqual(want);
    // A visitor only the summary knows, through every step, and sessions only it counts.
    const [totals] = await h.ch.query<{ span_start: string; span_end: string; n: number }>(
      `SELECT span_start, span_end, n_sessions AS n FROM metric_summaries FINAL
       WHERE site_id = {s:UInt32} AND parameter = {p:String} AND partition = {d:UInt32} AND value = '1'`,
      { s: tenant.siteId, p: parameter, d: DAY },
    );
    const row = (fields: Record<string, unknown>) => summaryRow(totals!, fields);
    const part = await partOf(DAY);
    await h.ch.writer.insert({
      table: 'metric_summaries',
      values: [
        row({ parameter: `${parameter}:visitors`, source_part: part, value: '12345', top_n: 3 }),
        row({ parameter, source_part: part, value: '1', n_sessions: Number(totals!.n) + 1000 }),
      ],
      format: 'JSONEachRow',
    });
    forgetKeptReads(h.ch);
    const tampered = (await analyze(FUNNEL)) as { visitors: number; sessions: number }[];
    expect(tampered.map((s) => s.visitors)).toEqual(want.map((s) => s.visitors + 1));
    expect(tampered.map((s) => s.sessions)).toEqual(want.map((s, k) => s.sessions + (k === 0 ? 1000 : 0)));
    // The step's sessions count the day from its summary while the page is newer than the day,
    // and from its sessions once the page reaches back into it.
    const stepSessions = (limit: number) =>
      funnelStepSessions(h.ch, tenant.siteId, full(RANGE), FUNNEL, {
        stepNumber: 1,
        mode: 'reached',
        limit,
        offset: 0,
      });
    const reached = referenceFunnelSessions(
      ref.selection(events, tenant.siteId, full(RANGE)),
      FUNNEL,
      1,
      'reached',
    );
    expect((await stepSessions(1)).totalCount).toBe(reached.length + 1000);
    expect((await stepSessions(100)).totalCount).toBe(reached.length);

    // Late events in sessions of that day: its partition gains a part, its summary is left.
    await addLateEvents(3, 'funnel-summaries');
    expect(await analyze(FUNNEL)).toEqual(expected(FUNNEL));
    // Merged into one part again: a new summary of the new part, the same answers.
    await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
    expect(await analyze(FUNNEL)).toEqual(expected(FUNNEL));
    expect(await build(FUNNEL)).toBe(9);
    expect(await analyze(FUNNEL)).toEqual(expected(FUNNEL));
    expect(await storedVisitors(FUNNEL, DAY)).toEqual(visitorsOf(FUNNEL, DAY));
  });
});
