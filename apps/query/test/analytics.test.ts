import {
  type CommonParams,
  compactSessionDays,
  generateEvents,
  insertEvents,
  LOCAL_SUFFIX,
  METRIC_PARAMETERS,
  type StoredEvent,
} from '@trackhouse/clickhouse';
import { uuidv7, uuidv7FromSeed } from '@trackhouse/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueryHarness, type QueryHarness } from './harness';
import { f, full, query } from './params';
import { compareEvents, goalSessions, selectEvents } from './reference';
import { craftedEvents, lateEvents } from './traffic-data';
import * as ref from './traffic-reference';

let h: QueryHarness;
let tenant: Awaited<ReturnType<QueryHarness['tenant']>>;
let events: StoredEvent[];
let eventsOnly: QueryHarness['json'];

beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '1000000' });
  tenant = await h.tenant();
  eventsOnly = h.jsonOn({ ...h.ch, rollups: false });
  const other = await h.tenant();
  const site = tenant.siteId;
  // Around the spring changes (US March 8, EU March 29, Adelaide April 5) and the autumn ones
  // (EU October 25, US November 1), with many events sharing a millisecond.
  const spring = [
    ...generateEvents({
      siteId: site,
      events: 6000,
      days: 45,
      end: new Date('2026-04-05T12:00:00Z'),
      seed: 11,
      tieRate: 0.2,
    }),
  ];
  const autumn = [
    ...generateEvents({
      siteId: site,
      events: 1500,
      days: 12,
      end: new Date('2026-11-03T12:00:00Z'),
      seed: 12,
      tieRate: 0.2,
    }),
  ];
  const crafted = craftedEvents({ ...spring[0]!, site_id: site });
  const noise = [
    ...generateEvents({
      siteId: other.siteId,
      events: 400,
      days: 45,
      end: new Date('2026-04-05T12:00:00Z'),
      seed: 13,
    }),
  ];
  await insertEvents(h.ch, [...spring, ...autumn, ...noise]);
  // A replayed batch (same deduplication token) is stored once.
  for (let attempt = 0; attempt < 2; attempt++) {
    await h.ch.writer.insert({
      table: 'events',
      values: crafted,
      format: 'JSONEachRow',
      clickhouse_settings: { insert_deduplication_token: `traffic-crafted-${site}` },
    });
  }
  // The rollups' days merged, as an hour after their last insert: the late events below then
  // leave some days in one part (read as they are) and others in several (read merged).
  await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
  // Late events land inside sessions stored long before them.
  const late = lateEvents([...spring, ...autumn, ...crafted], 60);
  // Its own token: the embedded client keeps settings of a call on its connection, so an insert
  // without one after the replay would count as a replay of it.
  await h.ch.writer.insert({
    table: 'events',
    values: late,
    format: 'JSONEachRow',
    clickhouse_settings: { insert_deduplication_token: `traffic-late-${site}` },
  });
  events = [...spring, ...autumn, ...crafted, ...late];
}, 120_000);
afterAll(async () => {
  await h.close();
});

type Json = QueryHarness['json'];
/** The app as it runs (rollups where they apply), or on the same engine with rollups off. */
const PATHS = [
  ['rollups where they apply', () => h.json],
  ['events only (QUERY_ROLLUPS=false)', () => eventsOnly],
] as const satisfies readonly (readonly [string, () => Json])[];
const getOn =
  (json: () => Json) =>
  <T>(path: string, c: Partial<CommonParams>, extra: Record<string, string> = {}) =>
    json()<T>(`/api/sites/${tenant.siteId}/${path}?${query(c, extra)}`, { key: tenant.key });
const get = getOn(() => h.json);

type Scenario = Partial<CommonParams> & { buckets: ref.Bucket[] };

const SCENARIOS: Scenario[] = [
  { buckets: ['day', 'week', 'month'] },
  {
    startDate: '2026-03-01',
    endDate: '2026-03-15',
    timeZone: 'America/New_York',
    buckets: ['day', 'hour', 'week'],
  },
  {
    startDate: '2026-03-08',
    endDate: '2026-03-08',
    timeZone: 'America/New_York',
    buckets: ['minute', 'five_minutes', 'fifteen_minutes', 'hour'],
  },
  {
    startDate: '2026-03-29',
    endDate: '2026-03-29',
    timeZone: 'Europe/Berlin',
    buckets: ['hour', 'fifteen_minutes'],
  },
  {
    startDate: '2026-10-24',
    endDate: '2026-11-02',
    timeZone: 'Europe/Berlin',
    buckets: ['hour', 'day', 'month'],
  },
  {
    startDate: '2026-11-01',
    endDate: '2026-11-01',
    timeZone: 'America/New_York',
    buckets: ['hour', 'five_minutes'],
  },
  { startDate: '2026-03-20', timeZone: 'Asia/Kolkata', buckets: ['day', 'week'] },
  { endDate: '2026-04-05', timeZone: 'Australia/Adelaide', buckets: ['day'] },
  { startDate: '2026-04-04', endDate: '2026-04-05', timeZone: 'Australia/Adelaide', buckets: ['hour'] },
  { filters: [f('country', 'equals', 'US', 'GB')], buckets: ['month'] },
  {
    startDate: '2026-03-01',
    endDate: '2026-03-31',
    timeZone: 'Europe/Berlin',
    filters: [f('pathname', 'contains', 'BLOG', 'checkout')],
    buckets: ['day'],
  },
  {
    filters: [f('pathname', 'not_contains', 'blog'), f('browser', 'not_equals', 'Chrome')],
    buckets: ['week'],
  },
  {
    filters: [f('page_title', 'regex', '^Title /d', '^Page /d'), f('referrer', 'not_regex', 'google')],
    buckets: ['day'],
  },
  {
    filters: [f('user_id', 'equals', 'member-42', 'bbbbbbbbbbbbbbbb', '0000000000000007')],
    buckets: ['day'],
  },
  { filters: [f('user_id', 'not_contains', 'customer', 'member')], buckets: ['week'] },
  {
    startDate: '2026-03-05',
    endDate: '2026-03-25',
    timeZone: 'Asia/Kolkata',
    filters: [f('entry_page', 'equals', '/pricing', '/')],
    buckets: ['day'],
  },
  {
    startDate: '2026-03-10',
    timeZone: 'Europe/Berlin',
    filters: [f('exit_page', 'regex', '^/checkout', '^/same-ms')],
    buckets: ['day'],
  },
  { filters: [f('event_name', 'equals', 'purchase', 'TypeError')], buckets: ['day'] },
  {
    filters: [f('channel', 'equals', 'Organic Search', 'Referral'), f('language', 'not_equals', 'en-US')],
    buckets: ['week'],
  },
  { filters: [f('city', 'contains', 'o'), f('utm_source', 'not_equals', 'google')], buckets: ['month'] },
  // Attributes and paths as a dashboard combines them (the places one session's events differ
  // on among them).
  {
    filters: [f('country', 'equals', 'AU', 'US'), f('pathname', 'contains', 'docs', 'pricing')],
    buckets: ['day'],
  },
  {
    startDate: '2026-03-21',
    endDate: '2026-03-21',
    filters: [f('device_type', 'not_equals', 'desktop'), f('pathname', 'regex', '^/docs', '^/pricing$')],
    buckets: ['hour'],
  },
  // The session whose events differ: its first event and paths pass, but no one event does;
  // and one event does (counted once).
  {
    startDate: '2026-03-21',
    endDate: '2026-03-21',
    filters: [f('country', 'equals', 'NZ'), f('pathname', 'contains', 'docs')],
    buckets: ['hour'],
  },
  {
    startDate: '2026-03-21',
    endDate: '2026-03-21',
    filters: [f('country', 'equals', 'NZ'), f('pathname', 'contains', 'pricing')],
    buckets: ['hour'],
  },
  // An attribute filter naming no path: of that session, only its tablet pageview matches (the
  // session counts, with one matching pageview of its two).
  {
    startDate: '2026-03-21',
    endDate: '2026-03-21',
    filters: [f('device_type', 'equals', 'tablet')],
    buckets: ['hour'],
  },
  // A negative entry page filter over sessions without pageviews (none to match).
  {
    startDate: '2026-03-14',
    endDate: '2026-03-15',
    filters: [f('entry_page', 'not_equals', '/blog'), f('browser', 'not_equals', 'Safari')],
    buckets: ['hour'],
  },
];

const cases = SCENARIOS.map((s, i) => [i, s] as const);
const selections = new Map<string, ref.Selection>();
function selectionOf(s: Partial<CommonParams>): ref.Selection {
  const { buckets: _, ...common } = s as Scenario;
  const key = JSON.stringify(common);
  let found = selections.get(key);
  if (!found) {
    found = ref.selection(events, tenant.siteId, full(common));
    selections.set(key, found);
  }
  return found;
}
const closed = (s: Partial<CommonParams>) => s.startDate !== undefined && s.endDate !== undefined;

describe.each(PATHS)('traffic analytics against a brute-force computation: %s', (_path, json) => {
  const get = getOn(json);
  it.each(cases)('scenario %i: overview, and compare=previous over the range before', async (_, s) => {
    const res = await get<{ data: unknown; previous?: unknown }>('overview', s);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: ref.overview(selectionOf(s)) });
    if (!closed(s)) return;
    const compared = await get<{ data: unknown; previous: unknown }>('overview', s, { compare: 'previous' });
    const days = (Date.parse(s.endDate!) - Date.parse(s.startDate!)) / 86_400_000 + 1;
    const shift = (d: string, n: number) =>
      new Date(Date.parse(d) + n * 86_400_000).toISOString().slice(0, 10);
    const before = { ...s, startDate: shift(s.startDate!, -days), endDate: shift(s.startDate!, -1) };
    expect(compared.body).toEqual({
      data: ref.overview(selectionOf(s)),
      previous: ref.overview(selectionOf(before)),
    });
  });

  it.each(cases)('scenario %i: buckets aligned in the time zone, empty ones included', async (_, s) => {
    for (const bucket of s.buckets) {
      const now = Date.now();
      const res = await get<{ data: unknown[] }>('overview-bucketed', s, { bucket });
      expect(res.status).toBe(200);
      expect({ bucket, data: res.body.data }).toEqual({
        bucket,
        data: ref.overviewBucketed(selectionOf(s), full(s), bucket, now),
      });
    }
  });

  it.each(cases)('scenario %i: metric of every parameter, ranked, with totals', async (i, s) => {
    const selection = selectionOf(s);
    for (const parameter of METRIC_PARAMETERS) {
      const res = await get<{ data: { data: unknown[]; totalCount: number } }>('metric', s, {
        parameter,
        limit: '1000',
      });
      expect(res.status).toBe(200);
      const expected = ref.metric(selection, parameter);
      expect({ parameter, ...res.body.data }).toEqual({
        parameter,
        ...expected,
        data: expected.data.slice(0, 1000),
      });
    }
    // A later page of the page values (ranked apart from the SQL on the rollup path; empty where
    // a short range has fewer values).
    for (const parameter of ['pathname', 'entry_page', 'exit_page', 'event_name'] as const) {
      const res = await get<{ data: { data: unknown[]; totalCount: number } }>('metric', s, {
        parameter,
        limit: '3',
        page: '2',
      });
      const expected = ref.metric(selection, parameter);
      expect({ parameter, ...res.body.data }).toEqual({
        parameter,
        ...expected,
        data: expected.data.slice(3, 6),
      });
      // The first scenario (the whole data) has a second page of each.
      if (i === 0)
        expect({ parameter, page: expected.data.slice(3, 6).length }).toEqual({ parameter, page: 3 });
    }
  });

  it.each(cases)('scenario %i: sessions and users, ranked and paged', async (i, s) => {
    const selection = selectionOf(s);
    const sessions = ref.sessions(selection);
    for (const page of [1, 2]) {
      const res = await get<{ data: unknown[]; totalCount: number }>('sessions', s, {
        limit: '100',
        page: String(page),
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        data: sessions.slice((page - 1) * 100, page * 100),
        totalCount: sessions.length,
      });
    }
    const sort = (['last_seen', 'first_seen', 'sessions', 'pageviews', 'events'] as const)[i % 5]!;
    const order = i % 2 === 0 ? 'desc' : 'asc';
    const users = ref.users(selection, sort, order);
    for (const page of [1, 3]) {
      const res = await get<{ data: unknown[]; totalCount: number }>('users', s, {
        sort,
        order,
        limit: '40',
        page: String(page),
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ data: users.slice((page - 1) * 40, page * 40), totalCount: users.length });
    }
  });
});

describe('buckets of whole quarter hours (summaries per quarter hour, visitors by quarter hour)', () => {
  // Offsets of 5:45, 5:30 and 9:30/10:30 (Adelaide's change on April 5) and Berlin's change on
  // March 29: each bucket a run of whole UTC quarter hours, none of a whole UTC hour or day.
  const ZONES = ['Asia/Kathmandu', 'Asia/Kolkata', 'Australia/Adelaide', 'Europe/Berlin'];
  const range = { startDate: '2026-03-20', endDate: '2026-04-05' };

  it.each(ZONES)(
    '%s: day, hour and week buckets equal the reference before and after the days are summarized',
    async (timeZone) => {
      const s = { ...range, timeZone };
      const summarized = async () => {
        const [row] = await h.ch.query<{ n: number }>(
          `SELECT countDistinct(partition) AS n FROM metric_summaries
         WHERE site_id = {s:UInt32} AND parameter = 'quarters' AND totals = 1`,
          { s: tenant.siteId },
        );
        return Number(row?.n ?? 0);
      };
      // Each read builds a week of the range's settled days at most: three reads summarize them.
      for (let read = 0; read < 3; read++) {
        for (const bucket of ['day', 'hour', 'week'] as const) {
          const res = await get<{ data: unknown[] }>('overview-bucketed', s, { bucket });
          expect({ read, bucket, data: res.body.data }).toEqual({
            read,
            bucket,
            data: ref.overviewBucketed(selectionOf(s), full(s), bucket, Date.now()),
          });
        }
      }
      // Summaries of whole UTC days, on a cluster none (parts are per shard).
      if (h.ch.cluster) expect(await summarized()).toBe(0);
      else expect(await summarized()).toBeGreaterThan(10);
    },
  );
});

describe('day and hour buckets from the visitors of UTC days', () => {
  /** A site's day and hour buckets of `range` against the reference over `events` (asked by `json`). */
  const expectBuckets = async (
    t: { siteId: number; key: string },
    range: Partial<CommonParams>,
    events: StoredEvent[],
    json: QueryHarness['json'] = h.json,
  ) => {
    for (const bucket of ['day', 'hour'] as const) {
      const res = await json<{ data: unknown[] }>(
        `/api/sites/${t.siteId}/overview-bucketed?${query(range, { bucket })}`,
        { key: t.key },
      );
      expect({ bucket, data: res.body.data }).toEqual({
        bucket,
        data: ref.overviewBucketed(
          ref.selection(events, t.siteId, full(range)),
          full(range),
          bucket,
          Date.now(),
        ),
      });
    }
  };

  it('keep the counts of settled days, and count a day again once a late event or a merge changes its part', async () => {
    const t = await h.tenant();
    const stored = [
      ...generateEvents({
        siteId: t.siteId,
        events: 1500,
        days: 6,
        end: new Date('2026-07-10T12:00:00Z'),
        seed: 51,
      }),
    ];
    await insertEvents(h.ch, stored);
    // Each day of `visitor_hours` one part alone (on a cluster parts are per shard: never kept).
    const merge = () =>
      h.ch.cluster ? Promise.resolve() : h.ch.command('OPTIMIZE TABLE visitor_hours FINAL');
    await merge();
    const range = { startDate: '2026-07-05', endDate: '2026-07-10', timeZone: 'Europe/Berlin' };
    const kept = async () =>
      Number(
        (
          await h.ch.query<{ n: number }>(
            'SELECT count() AS n FROM bucket_visitors WHERE site_id = {s:UInt32}',
            {
              s: t.siteId,
            },
          )
        )[0]?.n ?? 0,
      );
    await expectBuckets(t, range, stored);
    const first = await kept();
    if (!h.ch.cluster) expect(first).toBeGreaterThanOrEqual(5 + 5 * 24);
    // Read again from what was kept: nothing more kept.
    await expectBuckets(t, range, stored);
    expect(await kept()).toBe(first);
    // A new visitor's late event at 23:30 UTC on July 7 (Berlin's July 8): its day gains a part.
    const ms = Date.parse('2026-07-07T23:30:00Z');
    const late: StoredEvent = {
      ...stored[0]!,
      user_id: '00000000000bee01',
      session_id: uuidv7(ms),
      event_id: uuidv7(ms),
      timestamp: '2026-07-07 23:30:00.000',
    };
    await insertEvents(h.ch, [late]);
    await expectBuckets(t, range, [...stored, late]);
    // Merged again: a new part, whose buckets are counted again and kept.
    await merge();
    await expectBuckets(t, range, [...stored, late]);
    if (!h.ch.cluster) expect(await kept()).toBeGreaterThan(first);
  });
  it('keep no count of a day that ended less than an hour ago, still receiving events', async () => {
    const t = await h.tenant();
    const end = new Date(Date.now() - 60_000);
    const stored = [...generateEvents({ siteId: t.siteId, events: 1200, days: 3, end, seed: 52 })];
    await insertEvents(h.ch, stored);
    if (!h.ch.cluster) await h.ch.command('OPTIMIZE TABLE visitor_hours FINAL');
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    const range = {
      startDate: day(end.getTime() - 4 * 86_400_000),
      endDate: day(end.getTime()),
      timeZone: 'UTC',
    };
    await expectBuckets(t, range, stored);
    const [row] = await h.ch.query<{ n: number; recent: number }>(
      `SELECT count() AS n, countIf(end > {recent:UInt32}) AS recent FROM bucket_visitors WHERE site_id = {s:UInt32}`,
      { s: t.siteId, recent: Math.floor(Date.now() / 1000) - 3600 },
    );
    expect(Number(row?.recent)).toBe(0);
    // The days before, one part each and ended long ago, are kept (on a cluster nothing is).
    if (!h.ch.cluster) expect(Number(row?.n)).toBeGreaterThan(24);
  });

  /** Days since 1970 of a YYYYMMDD day: its partition of `visitor_hours`. */
  const epochDay = (day: string) =>
    Date.parse(`${day.slice(0, 4)}-${day.slice(4, 6)}-${day.slice(6)}T00:00:00Z`) / 86_400_000;
  /**
   * Reads of the buckets, the overview and six breakdowns of `range` against the reference,
   * watching the statements that name day `day` (YYYYMMDD; its partition of `visitor_hours` is
   * its number of days since 1970). `read(events)` gives, of the statements reading the day's
   * quarter hours, visitors per bucket hours, session totals and breakdowns merged (FINAL), how
   * many read it whole and how many only the sessions or visitors its added parts touch; and as
   * `settled`, how many read its settled part (one part) beside the other days' rather than
   * leaving it out.
   */
  const watchDay = (t: { siteId: number; key: string }, range: Partial<CommonParams>, day: string) => {
    const epoch = String(epochDay(day));
    // The range's days and those either side (YYYYMMDD).
    const shifted = (date: string | undefined, days: number) =>
      new Date(Date.parse(`${date}T00:00:00Z`) + days * 86_400_000)
        .toISOString()
        .slice(0, 10)
        .replaceAll('-', '');
    const [first, last] = [shifted(range.startDate, -2), shifted(range.endDate, 2)];
    const reads: { sql: string; named: string; values: unknown[] }[] = [];
    const watched = h.jsonOn({
      ...h.ch,
      query: (sql, params, settings) => {
        const named = JSON.stringify(params ?? {});
        if (named.includes(`"${day}`) || named.includes(`"${epoch}`))
          reads.push({ sql, named, values: Object.values(params ?? {}) });
        return h.ch.query(sql, params, settings);
      },
    });
    const read = async (events: StoredEvent[]) => {
      reads.length = 0;
      await expectBuckets(t, range, events, watched);
      const res = await watched<{ data: unknown }>(`/api/sites/${t.siteId}/overview?${query(range)}`, {
        key: t.key,
      });
      const selection = ref.selection(events, t.siteId, full(range));
      expect(res.body.data).toEqual(ref.overview(selection));
      for (const parameter of [
        'pathname',
        'entry_page',
        'exit_page',
        'event_name',
        'country',
        'referrer',
      ] as const) {
        const res = await watched<{ data: unknown }>(
          `/api/sites/${t.siteId}/metric?${query(range, { parameter, limit: '1000' })}`,
          { key: t.key },
        );
        expect({ parameter, ...(res.body.data as object) }).toEqual({
          parameter,
          ...ref.metric(selection, parameter),
        });
      }
      // The day's own reads, merged (FINAL): of the quarter hours and session totals those not
      // beside the settled parts (UNION ALL); those of the visitors read the settled days beside.
      const tally = (marks: string[], beside = false) => {
        const own = reads.filter(
          ({ sql }) => marks.every((m) => sql.includes(m)) && (beside || !sql.includes('UNION ALL')),
        );
        const touched = own.filter(
          ({ sql }) =>
            sql.includes('(UUIDv7ToDateTime(session_id), session_id) IN') ||
            sql.includes('(day, user_key) IN'),
        ).length;
        return [own.length - touched, touched];
      };
      // Reads of the day's settled part beside the other days' rather than leaving its partition
      // out: the session rollups' not merged alone (unlike its own reads above) with no list of
      // days near the range holding it (the days left out; the settled partitions' list holds
      // days far from it), and the visitors' per bucket hours (the day among the days read).
      const near = (v: unknown) => typeof v === 'string' && /^\d{8}$/.test(v) && v >= first && v <= last;
      const settled = reads.filter(
        ({ sql, named, values }) =>
          (['tupleElement(t, 1)', 'count() AS sessions', 'n_sessions'].some((m) => sql.includes(m)) &&
            named.includes(`"${day}_`) &&
            !values.some((v) => Array.isArray(v) && v.includes(day) && v.every(near)) &&
            (sql.includes('UNION ALL') || !sql.includes('FINAL'))) ||
          (sql.includes('GROUP BY d, bits') &&
            named.includes(`"${epoch}_`) &&
            values.some((v) => Array.isArray(v) && v.includes(Number(epoch)))),
      ).length;
      return {
        quarters: tally(['tupleElement(t, 1)', 'session_paths FINAL']),
        visitors: tally(['arrayJoin(arrayConcat(', 'visitor_hours FINAL'], true),
        sessions: tally(['count() AS sessions', 'session_facts FINAL']),
        // The four keyed breakdowns, each on its own (exit pages and event names as read).
        keyed: tally(['n_sessions', 'session_paths FINAL', 'm_day']),
        // Two session attributes' breakdowns.
        attributes: tally(['n_sessions', 'session_facts FINAL', 'GROUP BY v']),
        settled,
      };
    };
    return { read };
  };
  // What watchDay's read() finds: a day read whole (the quarter hours once, the visitors once per
  // bucket kind, the four breakdowns), brought up to date from an added part (each twice: now and
  // as it was), and kept (nothing read); never its settled part read beside the other days.
  const WHOLE_READS = { quarters: 1, visitors: 2, sessions: 1, keyed: 4, attributes: 2 };
  const tallies = (whole: number, touched: number) => ({
    ...Object.fromEntries(
      Object.entries(WHOLE_READS).map(([kind, n]) => [kind, [whole * n, touched * 2 * n]]),
    ),
    settled: 0,
  });
  const WHOLE = tallies(1, 0);
  const TOUCHED = tallies(0, 1);
  const KEPT = tallies(0, 0);
  /** Stops (or starts) the merges of the per-session rollups. */
  const merges = async (verb: 'START' | 'STOP') => {
    for (const table of ['session_facts', 'session_paths', 'visitor_hours'])
      await h.ch.command(`SYSTEM ${verb} MERGES ${table}`);
  };
  /** Merges day `day`'s partitions (YYYYMMDD) of the per-session rollups into one part each. */
  const mergeDay = async (day: string) => {
    await merges('START');
    for (const table of ['session_facts', 'session_paths'])
      await h.ch.command(`OPTIMIZE TABLE ${table} PARTITION ID '${day}' FINAL`);
    await h.ch.command(`OPTIMIZE TABLE visitor_hours PARTITION ID '${epochDay(day)}' FINAL`);
    await merges('STOP');
  };

  /** The active parts of day `day`'s partition (YYYYMMDD) of `session_paths`. */
  const dayParts = async (day: string) =>
    Number(
      (
        await h.ch.query<{ n: number }>(
          `SELECT count() AS n FROM system.parts
           WHERE database = currentDatabase() AND table = 'session_paths' AND active AND partition_id = {day:String}`,
          { day },
        )
      )[0]?.n ?? 0,
    );

  it('keep the quarter hours, visitors, session totals, keyed breakdowns and session attributes of a day in several parts between reads, counting again only what its added parts touch', async () => {
    const t = await h.tenant();
    const stored = [
      ...generateEvents({
        siteId: t.siteId,
        events: 1200,
        days: 2,
        end: new Date('2026-07-20T12:00:00Z'),
        seed: 53,
      }),
    ];
    // Eight days: the overview counts its visitors by day (a week or more), its sessions apart.
    const range = { startDate: '2026-07-13', endDate: '2026-07-20', timeZone: 'Europe/Berlin' };
    const { read } = watchDay(t, range, '20260720');
    // On a cluster parts are per shard and every read merges: the answers alone are checked.
    const local = !h.ch.cluster;
    if (local) await merges('STOP');
    try {
      // 20 July's sessions in two parts (two inserts, merges stopped): a day being written.
      const half = stored.findIndex((e) => e.timestamp >= '2026-07-20 06');
      await insertEvents(h.ch, stored.slice(0, half));
      await insertEvents(h.ch, stored.slice(half));
      if (local) expect(await dayParts('20260720')).toBeGreaterThan(1);
      // Read whole once (the day's buckets, then the hours' from what was kept), then kept.
      if (local) expect(await read(stored)).toEqual(WHOLE);
      expect(await read(stored)).toEqual(KEPT);
      // Late pageviews in sessions of that day (one a second later, one a minute and a half
      // earlier: a session's start, duration and bounce change) and a new session: a part more,
      // whose sessions are counted now and as they were, from the kept counts.
      const ofDay = stored.filter((e) => e.timestamp >= '2026-07-20');
      const ms = Date.parse('2026-07-20T09:00:00Z');
      const added = [
        ...lateEvents(ofDay, 6),
        {
          ...ofDay[0]!,
          user_id: '00000000000bee02',
          session_id: uuidv7FromSeed(ms, 'new session'),
          event_id: uuidv7FromSeed(ms, 'new session 0'),
          timestamp: '2026-07-20 09:00:00.000',
        },
      ];
      await insertEvents(h.ch, added);
      let now = [...stored, ...added];
      if (local) expect(await read(now)).toEqual(TOUCHED);
      expect(await read(now)).toEqual(KEPT);
      const merge = () => mergeDay('20260720');
      // Late pageviews in sessions from 10:00, moved by `count` ms: the same sessions are picked
      // each time, and two keys of one millisecond (tied) would be read from the events.
      const more = async (count: number) => {
        const late = lateEvents(
          now.filter((e) => e.timestamp >= '2026-07-20 10'),
          count,
        ).map((e) => {
          const iso = new Date(Date.parse(`${e.timestamp.replace(' ', 'T')}Z`) + count).toISOString();
          return { ...e, timestamp: `${iso.slice(0, 10)} ${iso.slice(11, 23)}` };
        });
        await insertEvents(h.ch, late);
        now = [...now, ...late];
      };
      // The kept parts merged alone hold what they held: a part added after is counted from them.
      if (local) await merge();
      await more(3);
      if (local) expect(await read(now)).toEqual(TOUCHED);
      // A part added, merged with the kept ones into one, and one more: counted whole again.
      await more(4);
      if (local) await merge();
      await more(5);
      if (local) expect(await read(now)).toEqual(WHOLE);
      expect(await read(now)).toEqual(KEPT);
      // Two pageviews of a new session in one millisecond (tied keys): its page breakdowns are
      // read from the events, which hold later events too, so the day's are read whole and not
      // kept (event names, of other events, are not tied by them: brought up to date).
      const at = Date.parse('2026-07-20T11:00:00Z');
      const tied = ['/tied/a', '/tied/b'].map((pathname, i) => ({
        ...ofDay[0]!,
        user_id: '00000000000bee03',
        // Ids of their own time (uuidv7() never goes back in time).
        session_id: uuidv7FromSeed(at, 'tied session'),
        event_id: uuidv7FromSeed(at, `tied ${i}`),
        timestamp: '2026-07-20 11:00:00.000',
        pathname,
      }));
      await insertEvents(h.ch, tied);
      now = [...now, ...tied];
      if (local) {
        expect((await read(now)).keyed).toEqual([3, 8]);
        // Read again: the page breakdowns as before, the event names from what was kept.
        expect((await read(now)).keyed).toEqual([3, 6]);
      } else await read(now);
    } finally {
      if (local) await merges('START');
    }
  });

  it('keep the counts of a day that has not ended while it lies in one part between two writes, as in several parts', async () => {
    const t = await h.tenant();
    // A day that has not ended, three days ahead: no other test's day borders it (a neighbour
    // still changing too would have its visitors read with it).
    const dayMs = (Math.floor(Date.now() / 86_400_000) + 3) * 86_400_000;
    const iso = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    const day = iso(dayMs).replaceAll('-', '');
    const stored = [
      ...generateEvents({
        siteId: t.siteId,
        events: 800,
        days: 1,
        end: new Date(dayMs + 86_400_000),
        seed: 57,
      }),
    ];
    // Eight days in Berlin: the day's last UTC hours lie past the range's end.
    const range = { startDate: iso(dayMs - 7 * 86_400_000), endDate: iso(dayMs), timeZone: 'Europe/Berlin' };
    const { read } = watchDay(t, range, day);
    const local = !h.ch.cluster;
    if (local) await merges('STOP');
    try {
      const half = Math.floor(stored.length / 2);
      await insertEvents(h.ch, stored.slice(0, half));
      await insertEvents(h.ch, stored.slice(half));
      if (local) expect(await dayParts(day)).toBeGreaterThan(1);
      if (local) expect(await read(stored)).toEqual(WHOLE);
      // Merged into one part (as an hour without a write leaves today's): not summarized, and
      // its counts are those kept, nothing of it read again.
      if (local) {
        await mergeDay(day);
        expect(await dayParts(day)).toBe(1);
      }
      expect(await read(stored)).toEqual(KEPT);
      // The next write gives it a part again: counted from what was kept before the merge.
      const late = lateEvents(
        stored.filter((e) => e.timestamp.slice(11, 13) >= '02' && e.timestamp.slice(11, 13) < '20'),
        6,
      );
      await insertEvents(h.ch, late);
      const now = [...stored, ...late];
      if (local) expect(await read(now)).toEqual(TOUCHED);
      expect(await read(now)).toEqual(KEPT);
    } finally {
      if (local) await merges('START');
    }
  });

  it('keep the keyed breakdowns and crossing sessions of the settled partitions read beside the summarized days by their parts, and read them again once a late event changes one', async () => {
    const t = await h.tenant();
    const stored = [
      ...generateEvents({
        siteId: t.siteId,
        events: 900,
        days: 3,
        end: new Date('2026-06-20T18:00:00Z'),
        seed: 54,
      }),
    ];
    // A session of 17 June's partition (a UTC day) crossing into the range at Berlin's midnight
    // (22:00 UTC): read beside the range's summarized days.
    const ms = Date.parse('2026-06-17T21:50:00Z');
    const crossing = ['21:50:00', '22:10:00'].map((time, i) => ({
      ...stored[0]!,
      user_id: '00000000000bee04',
      session_id: uuidv7FromSeed(ms, 'crossing session'),
      event_id: uuidv7FromSeed(ms + i, `crossing ${i}`),
      timestamp: `2026-06-17 ${time}.000`,
      type: 'pageview' as const,
      event_name: '',
      pathname: `/crossing/${i}`,
    }));
    // A session of that day ending before the range, until a late event carries it across.
    const before = ['21:30:00', '21:40:00'].map((time, i) => ({
      ...crossing[0]!,
      user_id: '00000000000bee05',
      session_id: uuidv7FromSeed(ms, 'session before'),
      event_id: uuidv7FromSeed(ms + i, `before ${i}`),
      timestamp: `2026-06-17 ${time}.000`,
      pathname: `/before/${i}`,
    }));
    let now = [...stored, ...crossing, ...before];
    await insertEvents(h.ch, now);
    const local = !h.ch.cluster;
    const settle = async () => {
      if (local)
        for (const table of ['session_facts', 'session_paths'])
          await h.ch.command(`OPTIMIZE TABLE ${table} FINAL`);
    };
    await settle();
    const range = { startDate: '2026-06-18', endDate: '2026-06-20', timeZone: 'Europe/Berlin' };
    const reads: string[] = [];
    const watched = h.jsonOn({
      ...h.ch,
      query: (sql, params, settings) => {
        if (!sql.includes('FINAL')) reads.push(`${sql} ${JSON.stringify(params ?? {})}`);
        return h.ch.query(sql, params, settings);
      },
    });
    /**
     * The overview and five breakdowns against the reference, and of the reads of settled parts
     * alone (no partition merged), how many counted keys naming 17 June's part, and how many
     * found crossing sessions.
     */
    const read = async (events: StoredEvent[]) => {
      reads.length = 0;
      const selection = ref.selection(events, t.siteId, full(range));
      const overview = await watched<{ data: unknown }>(`/api/sites/${t.siteId}/overview?${query(range)}`, {
        key: t.key,
      });
      expect(overview.body.data).toEqual(ref.overview(selection));
      for (const parameter of ['pathname', 'entry_page', 'exit_page', 'event_name', 'country'] as const) {
        const res = await watched<{ data: unknown }>(
          `/api/sites/${t.siteId}/metric?${query(range, { parameter, limit: '1000' })}`,
          { key: t.key },
        );
        expect({ parameter, ...(res.body.data as object) }).toEqual({
          parameter,
          ...ref.metric(selection, parameter),
        });
      }
      return {
        keyed: reads.filter((r) => r.includes('n_sessions') && r.includes('"20260617_')).length,
        crossing: reads.filter((r) => r.includes('edge_until')).length,
      };
    };
    // Read once (the range's days summarized meanwhile), then again: the parts' counts and
    // crossing sessions kept (on a cluster no part is settled: every read merges).
    const once = local ? { keyed: 4, crossing: 1 } : { keyed: 0, crossing: 0 };
    const kept = { keyed: 0, crossing: 0 };
    expect(await read(now)).toEqual(once);
    expect(await read(now)).toEqual(kept);
    // Late pageviews of the crossing session and of the one before the range, which now crosses
    // too: their partition in two parts, merged at every read (the other parts' crossing
    // sessions read once more, by their names now).
    const late = [
      {
        ...crossing[1]!,
        event_id: uuidv7FromSeed(ms + 2, 'crossing 2'),
        timestamp: '2026-06-17 22:20:00.000',
        pathname: '/crossing/2',
      },
      {
        ...before[1]!,
        event_id: uuidv7FromSeed(ms + 2, 'before 2'),
        timestamp: '2026-06-17 22:05:00.000',
        pathname: '/before/2',
      },
    ];
    await insertEvents(h.ch, late);
    now = [...now, ...late];
    expect(await read(now)).toEqual({ ...kept, crossing: once.crossing });
    expect(await read(now)).toEqual(kept);
    // Merged into a part of another name: read again once, then kept.
    await settle();
    expect(await read(now)).toEqual(once);
    expect(await read(now)).toEqual(kept);
  });
});

describe('users list where one visitor holds the latest sessions', () => {
  it('ranks every visitor when the leading sessions hold too few of them', async () => {
    // The 150 sessions ending last all belong to one visitor: the first page by last_seen is that
    // visitor alone, and the second page's visitor lies past every session read ahead.
    const t = await h.tenant();
    const generated = [
      ...generateEvents({
        siteId: t.siteId,
        events: 3000,
        days: 5,
        end: new Date('2026-06-10T12:00:00Z'),
        seed: 21,
      }),
    ];
    const ends = new Map<string, string>();
    for (const e of generated)
      if ((ends.get(e.session_id) ?? '') < e.timestamp) ends.set(e.session_id, e.timestamp);
    const latest = new Set(
      [...ends]
        .sort((a, b) => (a[1] < b[1] ? 1 : -1))
        .slice(0, 150)
        .map(([id]) => id),
    );
    const heavy = generated[0]!.user_id;
    const stored = generated.map((e) => (latest.has(e.session_id) ? { ...e, user_id: heavy } : e));
    await insertEvents(h.ch, stored);
    const range = { startDate: '2026-06-01', endDate: '2026-06-10' };
    const expected = ref.users(ref.selection(stored, t.siteId, full(range)), 'last_seen', 'desc');
    expect(expected.slice(0, 2).map((u) => u.user_id)).toEqual([heavy, expect.not.stringMatching(heavy)]);
    for (const [json, page] of [
      [h.json, '1'],
      [h.json, '2'],
      [eventsOnly, '2'],
    ] as const) {
      const res = await json<{ data: unknown[]; totalCount: number }>(
        `/api/sites/${t.siteId}/users?${query(range, { sort: 'last_seen', order: 'desc', limit: '1', page })}`,
        { key: t.key },
      );
      expect(res.body).toEqual({
        data: expected.slice(Number(page) - 1, Number(page)),
        totalCount: expected.length,
      });
    }
  });
});

describe('sessions whose rows lie in several parts', () => {
  it("count a session whose later rows, stored apart, carry it past the range's end as crossing it", async () => {
    // A FINAL read merges a session's rows before testing them (its rollup row, and a visitor's
    // sessions in `sessions_by_visitor`): a session whose first rows lie in range and whose later
    // rows, in another part, lie after it crosses the end, counted over its events in range,
    // once, whatever its first rows say alone (the rollups' skip indexes once dropped the later
    // rows' granule, and the session with it).
    const t = await h.tenant();
    const [template] = generateEvents({
      siteId: t.siteId,
      events: 1,
      days: 1,
      end: new Date('2026-05-10T12:00:00Z'),
      seed: 43,
    });
    const at = (iso: string) => new Date(iso).toISOString().replace('T', ' ').slice(0, 23);
    const event = (user: string, session: string, iso: string, i: number): StoredEvent => ({
      ...template!,
      user_id: user,
      session_id: session,
      event_id: uuidv7(Date.parse(iso) + i),
      timestamp: at(iso),
      type: 'pageview',
      pathname: `/p${i}`,
    });
    const crossing = uuidv7(Date.parse('2026-05-10T23:00:00Z'));
    const inside = uuidv7(Date.parse('2026-05-10T10:00:00Z'));
    const first = [
      event('00000000000000a1', crossing, '2026-05-10T23:00:00Z', 0),
      event('00000000000000a1', crossing, '2026-05-10T23:20:00Z', 1),
      event('00000000000000a1', inside, '2026-05-10T10:00:00Z', 2),
      event('00000000000000b2', uuidv7(Date.parse('2026-05-09T08:00:00Z')), '2026-05-09T08:00:00Z', 3),
    ];
    const later = [event('00000000000000a1', crossing, '2026-05-11T00:05:00Z', 4)];
    const tables = ['session_facts', 'sessions_by_visitor'].map((table) =>
      h.ch.cluster ? `ON CLUSTER ${h.ch.cluster} ${table}${LOCAL_SUFFIX}` : table,
    );
    for (const table of tables) await h.ch.command(`SYSTEM STOP MERGES ${table}`);
    try {
      await insertEvents(h.ch, first);
      await insertEvents(h.ch, later);
      // The case itself: the session's rows in two parts of each table, unmerged.
      for (const table of ['session_facts', 'sessions_by_visitor'])
        expect(
          (
            await h.ch.query<{ n: number }>(
              `SELECT count() AS n FROM ${table} WHERE site_id = {s:UInt32} AND session_id = {id:UUID}`,
              { s: t.siteId, id: crossing },
            )
          )[0]!.n,
          table,
        ).toBe(2);
      const stored = [...first, ...later];
      const range = { startDate: '2026-05-09', endDate: '2026-05-10', timeZone: 'UTC' };
      const selection = ref.selection(stored, t.siteId, full(range));
      const users = ref.users(selection, 'last_seen', 'desc');
      expect(users.map((u) => [u.user_id, u.sessions, u.pageviews])).toEqual([
        ['00000000000000a1', 2, 3],
        ['00000000000000b2', 1, 1],
      ]);
      const sessions = ref.sessions(selection);
      for (const json of [h.json, eventsOnly]) {
        const get = <T>(path: string, extra: Record<string, string> = {}) =>
          json<T>(`/api/sites/${t.siteId}/${path}?${query(range, extra)}`, { key: t.key });
        expect((await get('overview')).body).toEqual({ data: ref.overview(selection) });
        expect((await get('sessions')).body).toEqual({ data: sessions, totalCount: sessions.length });
        expect((await get('users', { sort: 'last_seen', order: 'desc' })).body).toEqual({
          data: users,
          totalCount: users.length,
        });
      }
    } finally {
      for (const table of tables) await h.ch.command(`SYSTEM START MERGES ${table}`);
    }
  });

  it('count a session carried past the end of a range that ended within the last day (not yet everywhere) as crossing it', async () => {
    // A range is taken as still running until its end date is over everywhere on Earth; one of
    // the furthest zone ahead (UTC+14) ended at 10:00 UTC, here the latest such hour at least an
    // hour ago. A session of its still-merging partition, its later rows after that end, crosses it.
    const t = await h.tenant();
    const hour = 3_600_000;
    const now = Date.now();
    const end = Math.floor((now - 11 * hour) / (24 * hour)) * 24 * hour + 10 * hour;
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    const range = { startDate: day(end - 24 * hour), endDate: day(end), timeZone: 'Etc/GMT-14' };
    const [template] = generateEvents({ siteId: t.siteId, events: 1, days: 1, end: new Date(end), seed: 44 });
    const event = (session: string, ms: number, i: number): StoredEvent => ({
      ...template!,
      user_id: '00000000000000c3',
      session_id: session,
      event_id: uuidv7FromSeed(ms, `past the end ${i}`),
      timestamp: new Date(ms).toISOString().replace('T', ' ').slice(0, 23),
      type: 'pageview',
      pathname: `/p${i}`,
    });
    const crossing = uuidv7FromSeed(end - 20 * 60_000, 'past the end');
    const first = [
      event(crossing, end - 20 * 60_000, 0),
      event(crossing, end - 10 * 60_000, 1),
      event(uuidv7FromSeed(end - 5 * hour, 'inside'), end - 5 * hour, 2),
    ];
    const later = [event(crossing, end + 5 * 60_000, 3)];
    const tables = ['session_facts', 'sessions_by_visitor'].map((table) =>
      h.ch.cluster ? `ON CLUSTER ${h.ch.cluster} ${table}${LOCAL_SUFFIX}` : table,
    );
    for (const table of tables) await h.ch.command(`SYSTEM STOP MERGES ${table}`);
    try {
      await insertEvents(h.ch, first);
      await insertEvents(h.ch, later);
      const stored = [...first, ...later];
      const selection = ref.selection(stored, t.siteId, full(range));
      // Two sessions in range, the crossing one with its two pageviews before the end.
      expect(ref.overview(selection)).toMatchObject({ sessions: 2, pageviews: 3 });
      const sessions = ref.sessions(selection);
      for (const json of [h.json, eventsOnly]) {
        const get = <T>(path: string, extra: Record<string, string> = {}) =>
          json<T>(`/api/sites/${t.siteId}/${path}?${query(range, extra)}`, { key: t.key });
        expect((await get('overview')).body).toEqual({ data: ref.overview(selection) });
        expect((await get('sessions')).body).toEqual({ data: sessions, totalCount: sessions.length });
        expect((await get('metric', { parameter: 'country' })).body).toEqual({
          data: ref.metric(selection, 'country'),
        });
      }
    } finally {
      for (const table of tables) await h.ch.command(`SYSTEM START MERGES ${table}`);
    }
  });
});

describe('users list of a range reaching now', () => {
  it("gives each visitor the range's latest identified id, whether its latest of all time lies in, before or after the range", async () => {
    const t = await h.tenant();
    const now = Date.now();
    const [template] = generateEvents({ siteId: t.siteId, events: 1, days: 1, end: new Date(now), seed: 41 });
    const hour = 3_600_000;
    const at = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 23);
    // One session per run of events (ids of its first event's time), each event an id of its own.
    const run = (user: string, steps: [ms: number, identified: string][]): StoredEvent[] => {
      const sessionId = uuidv7(steps[0]![0]);
      return steps.map(([ms, identified], i) => ({
        ...template!,
        user_id: user,
        session_id: sessionId,
        event_id: uuidv7(ms),
        timestamp: at(ms),
        type: 'pageview',
        pathname: `/p${i}`,
        identified_user_id: identified,
      }));
    };
    const tie = now - 20 * hour;
    const stored = [
      // Identified only before the range: none in it.
      ...run('00000000000000a1', [[now - 5 * 24 * hour, 'a-before']]),
      ...run('00000000000000a1', [
        [now - 30 * hour, ''],
        [now - 29 * hour, ''],
      ]),
      // Two ids in range: the later.
      ...run('00000000000000b2', [
        [now - 40 * hour, 'b-first'],
        [now - 10 * hour, 'b-second'],
      ]),
      // An id in range, another after the range's end (an event dated ahead): the one in range.
      ...run('00000000000000c3', [[now - 8 * hour, 'c-in-range']]),
      ...run('00000000000000c3', [[now + 3 * 24 * hour, 'c-after']]),
      // Two ids in one millisecond: the later event id.
      ...run('00000000000000d4', [
        [tie, 'd-one'],
        [tie, 'd-two'],
      ]),
      // Never identified.
      ...run('00000000000000e5', [[now - 2 * hour, '']]),
      // Identified, then anonymous events later in range.
      ...run('00000000000000f6', [
        [now - 12 * hour, 'f-only'],
        [now - 3 * hour, ''],
      ]),
    ];
    await insertEvents(h.ch, stored);
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    const range = { startDate: day(now - 2 * 24 * hour), endDate: day(now), timeZone: 'UTC' };
    const selection = ref.selection(stored, t.siteId, full(range));
    const expected = ref.users(selection, 'last_seen', 'desc');
    // The cases as the reference answers them.
    expect(Object.fromEntries(expected.map((u) => [u.user_id, u.identified_user_id]))).toEqual({
      '00000000000000a1': '',
      '00000000000000b2': 'b-second',
      '00000000000000c3': 'c-in-range',
      '00000000000000d4': expect.stringMatching(/^d-(one|two)$/),
      '00000000000000e5': '',
      '00000000000000f6': 'f-only',
    });
    for (const json of [h.json, eventsOnly]) {
      const res = await json<{ data: unknown[]; totalCount: number }>(
        `/api/sites/${t.siteId}/users?${query(range, { sort: 'last_seen', order: 'desc', limit: '10' })}`,
        { key: t.key },
      );
      expect(res.body).toEqual({ data: expected, totalCount: expected.length });
    }
  });
});

describe('lists of a range ending today', () => {
  it('takes the newest sessions, visitors and goal sessions from the last hours before now, as the events rank them', async () => {
    // Two days of events up to a minute ago, the range through today (its end hours away): the
    // pages come from the sessions of the hours before now (visitors by first seen: of the
    // range's first hours), widened where they fall short.
    const t = await h.tenant();
    const end = new Date(Date.now() - 60_000);
    const stored = [...generateEvents({ siteId: t.siteId, events: 2500, days: 2, end, seed: 33 })];
    await insertEvents(h.ch, stored);
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    const range = {
      startDate: day(end.getTime() - 3 * 86_400_000),
      endDate: day(end.getTime()),
      timeZone: 'UTC',
    };
    const selection = ref.selection(stored, t.siteId, full(range));
    const sessions = ref.sessions(selection);
    expect(sessions.length).toBeGreaterThan(100);
    // Pages of the list (limit, page) against the reference's sessions.
    const expectPages = async (
      c: Partial<CommonParams>,
      listed: typeof sessions,
      pages: [string, string][],
    ) => {
      for (const [limit, page] of pages) {
        const res = await h.json<{ data: unknown[]; totalCount: number }>(
          `/api/sites/${t.siteId}/sessions?${query(c, { limit, page })}`,
          { key: t.key },
        );
        const from = (Number(page) - 1) * Number(limit);
        expect({ limit, page, ...res.body }).toEqual({
          limit,
          page,
          data: listed.slice(from, from + Number(limit)),
          totalCount: listed.length,
        });
      }
    };
    await expectPages(range, sessions, [
      ['5', '1'],
      ['100', '1'],
      ['100', '2'],
    ]);
    // Filtered: the counted sessions of the last hours, found from their matching events there.
    const filtered = {
      ...range,
      filters: [f('pathname', 'not_contains', 'blog'), f('country', 'not_equals', 'GB')],
    };
    const counted = ref.sessions(ref.selection(stored, t.siteId, full(filtered)));
    expect(counted.length).toBeLessThan(sessions.length);
    // A page reaching back to the first sessions of the last three hours, where the window's
    // matching events begin.
    const recent = counted.filter((c) => Date.parse(c.session_start) >= Date.now() - 3 * 3_600_000).length;
    expect(recent).toBeGreaterThan(5);
    await expectPages(filtered, counted, [
      ['5', '1'],
      ['20', '2'],
      [String(recent), '1'],
    ]);
    for (const [sort, order] of [
      ['last_seen', 'desc'],
      ['first_seen', 'asc'],
    ] as const) {
      const users = ref.users(selection, sort, order);
      const res = await h.json<{ data: unknown[]; totalCount: number }>(
        `/api/sites/${t.siteId}/users?${query(range, { sort, order, limit: '10', page: '2' })}`,
        { key: t.key },
      );
      expect({ sort, ...res.body }).toEqual({ sort, data: users.slice(10, 20), totalCount: users.length });
    }
    const goal = { goalType: 'path', config: { pathPattern: '/**' } } as const;
    const created = await h.json<{ goalId: number }>(`/api/sites/${t.siteId}/goals`, {
      key: t.key,
      method: 'POST',
      body: { name: 'any page', ...goal },
    });
    const converted = goalSessions(selectEvents(stored, t.siteId, full(range)), goal);
    expect(converted.length).toBeGreaterThan(40);
    for (const [limit, page] of [
      ['5', '1'],
      ['40', '2'],
    ] as const) {
      const res = await h.json<{ data: unknown[] }>(
        `/api/sites/${t.siteId}/goals/${created.body.goalId}/sessions?${query(range, { limit, page })}`,
        { key: t.key },
      );
      const from = (Number(page) - 1) * Number(limit);
      expect({ limit, page, data: res.body.data }).toEqual({
        limit,
        page,
        data: converted.slice(from, from + Number(limit)),
      });
    }
  });

  it('reads the newest sessions and visitors without the settled parts whose sessions all ended before the last hours', async () => {
    // Four days up to a minute ago, each day's sessions one part (merged), the range through
    // today: the lists' first pages come from the sessions ending in the last hours, which the
    // days before yesterday cannot hold (nor the range's crossing sessions, long ended).
    const t = await h.tenant();
    const end = new Date(Date.now() - 60_000);
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    const range = {
      startDate: day(end.getTime() - 2 * 86_400_000),
      endDate: day(end.getTime()),
      timeZone: 'UTC',
    };
    const generated = [...generateEvents({ siteId: t.siteId, events: 2000, days: 4, end, seed: 34 })];
    // A session crossing the range's start, whatever the hour the test runs at.
    const start = Date.parse(`${range.startDate}T00:00:00Z`);
    const across = [-600_000, 600_000].map((offset, i) => ({
      ...generated[0]!,
      user_id: '00000000000000d4',
      session_id: uuidv7FromSeed(start - 600_000, 'across the start'),
      event_id: uuidv7FromSeed(start + offset, `across the start ${i}`),
      timestamp: new Date(start + offset).toISOString().replace('T', ' ').slice(0, 23),
      type: 'pageview' as const,
      event_name: '',
    }));
    const stored = [...generated, ...across];
    await insertEvents(h.ch, stored);
    const local = !h.ch.cluster;
    if (local) await h.ch.command('OPTIMIZE TABLE session_facts FINAL');
    const old = day(end.getTime() - 3 * 86_400_000).replaceAll('-', '');
    const heads: string[] = [];
    const watched = h.jsonOn({
      ...h.ch,
      query: (sql, params, settings) => {
        // The lists' reads of their leading sessions.
        if (sql.includes('groupArraySorted') || sql.includes('toString(s_end) AS end'))
          heads.push(JSON.stringify(params));
        return h.ch.query(sql, params, settings);
      },
    });
    const selection = ref.selection(stored, t.siteId, full(range));
    const sessions = ref.sessions(selection);
    const res = await watched<{ data: unknown[]; totalCount: number }>(
      `/api/sites/${t.siteId}/sessions?${query(range, { limit: '10' })}`,
      { key: t.key },
    );
    expect(res.body).toEqual({ data: sessions.slice(0, 10), totalCount: sessions.length });
    const users = ref.users(selection, 'last_seen', 'desc');
    const listed = await watched<{ data: unknown[]; totalCount: number }>(
      `/api/sites/${t.siteId}/users?${query(range, { limit: '10' })}`,
      { key: t.key },
    );
    expect(listed.body).toEqual({ data: users.slice(0, 10), totalCount: users.length });
    expect(heads.length).toBeGreaterThanOrEqual(2);
    // The sessions crossing the range's start, ended two days ago.
    const inRange = new Set(stored.filter((e) => e.timestamp >= range.startDate).map((e) => e.session_id));
    const crossing = [
      ...new Set(
        stored
          .filter((e) => e.timestamp < range.startDate && inRange.has(e.session_id))
          .map((e) => e.session_id),
      ),
    ];
    expect(crossing.length).toBeGreaterThan(0);
    // The day before the range (its crossing sessions' day), the range's first day and the
    // crossing sessions: not read.
    if (local)
      for (const read of heads) {
        expect(read).not.toContain(`"${old}_`);
        expect(read).not.toContain(`"${range.startDate.replaceAll('-', '')}_`);
        for (const id of crossing) expect(read).not.toContain(id);
      }
  });
});

describe('one session, one user', () => {
  const sessionOf = (predicate: (e: StoredEvent) => boolean) => events.find(predicate)!.session_id;

  it('answers a session over all its events, oldest first, paged, dates and filters not applied', async () => {
    const ids = [
      sessionOf((e) => e.pathname === '/account'),
      sessionOf((e) => e.pathname === '/same-ms-a'),
      sessionOf((e) => e.pathname === '/late'),
      sessionOf((e) => e.timestamp.startsWith('2026-11-01 05:30')),
      sessionOf((e) => e.type === 'error'),
    ];
    for (const id of ids) {
      const expected = ref.sessionDetail(events, tenant.siteId, id)!;
      // A range and a filter that exclude the session change nothing.
      const res = await get<{
        data: { session: unknown; events: Record<string, unknown>[]; hasMore: boolean };
      }>(
        `sessions/${id}`,
        { startDate: '2020-01-01', endDate: '2020-01-01', filters: [f('country', 'equals', 'XX')] },
        { limit: '2' },
      );
      expect(res.status).toBe(200);
      expect(res.body.data.session).toEqual(expected.session);
      expect(res.body.data.hasMore).toBe(expected.events.length > 2);
      const all = await get<{ data: { events: Record<string, unknown>[]; hasMore: boolean } }>(
        `sessions/${id}`,
        {},
        {
          offset: '1',
          limit: '1000',
        },
      );
      expect(all.body.data.hasMore).toBe(false);
      const strip = (list: Record<string, unknown>[]) => list.map(({ lat: _a, lon: _b, ...rest }) => rest);
      expect(strip(all.body.data.events)).toEqual(strip(expected.events.slice(1)));
      expect(strip(res.body.data.events)).toEqual(strip(expected.events.slice(0, 2)));
    }
  });

  it('404 SESSION_NOT_FOUND for an unknown id, another site`s session, or an id written differently', async () => {
    const mine = sessionOf((e) => e.pathname === '/account');
    const other = await h.tenant();
    for (const [siteId, key, id] of [
      [tenant.siteId, tenant.key, '019cc045-78b2-77e4-8f3b-a5943bc53571'],
      [tenant.siteId, tenant.key, mine.toUpperCase()],
      [tenant.siteId, tenant.key, 'not-a-uuid'],
      [other.siteId, other.key, mine],
    ] as const) {
      const res = await h.json(`/api/sites/${siteId}/sessions/${encodeURIComponent(id)}`, { key });
      expect([res.status, res.body.code]).toEqual([404, 'SESSION_NOT_FOUND']);
    }
  });

  it('lists the sessions of one anonymous or identified id', async () => {
    for (const userId of ['member-42', 'aaaaaaaaaaaaaaaa']) {
      const scope = { filters: [f('user_id', 'equals', userId)] };
      const expected = ref.sessions(selectionOf(scope));
      const res = await get<{ data: unknown[]; totalCount: number }>('sessions', {}, { user_id: userId });
      expect(res.body).toEqual({ data: expected, totalCount: expected.length });
    }
    const both = await get<{ totalCount: number }>('sessions', {}, { user_id: 'member-42' });
    expect(both.body.totalCount).toBe(2);
  });

  it.each(PATHS)(
    'answers a user over all time by anonymous or identified id, and 404 USER_NOT_FOUND otherwise: %s',
    async (_path, json) => {
      const getUser = getOn(json);
      const anonymous = events.find((e) => e.type === 'pageview' && e.identified_user_id === '')!.user_id;
      for (const userId of ['member-42', 'aaaaaaaaaaaaaaaa', anonymous]) {
        const res = await getUser<{ data: unknown }>(`users/${encodeURIComponent(userId)}`, {
          startDate: '2020-01-01',
          endDate: '2020-01-01',
        });
        expect(res.status).toBe(200);
        const expected = ref.userDetail(events, tenant.siteId, userId);
        expect(res.body.data).toEqual(expected);
        // Both ways answer the fields in one order, the reference's.
        expect(Object.keys(res.body.data as object)).toEqual(Object.keys(expected!));
      }
      const identified = await getUser<{ data: { sessions: number; events: number } }>('users/member-42', {});
      expect(identified.body.data).toMatchObject({ sessions: 2, events: 4 });
      for (const userId of ['nobody', 'MEMBER-42', 'member']) {
        const res = await getUser<{ code: string }>(`users/${userId}`, {});
        expect([res.status, res.body.code]).toEqual([404, 'USER_NOT_FOUND']);
      }
    },
  );
});

describe('live user count', () => {
  it('counts distinct users of the last minutes, filters applied, dates ignored', async () => {
    const site = await h.tenant();
    const now = Date.now();
    const template = { ...events[0]!, site_id: site.siteId };
    const recent = [
      ['1111111111111111', 2, 'US'],
      ['1111111111111111', 1, 'US'],
      ['2222222222222222', 3, 'DE'],
      ['3333333333333333', 10, 'US'],
      ['4444444444444444', 90, 'DE'],
    ].map(([user, minutesAgo, country]) => {
      const iso = new Date(now - Number(minutesAgo) * 60_000).toISOString();
      return {
        ...template,
        user_id: String(user),
        country: String(country),
        timestamp: `${iso.slice(0, 10)} ${iso.slice(11, 23)}`,
        event_id: crypto.randomUUID(),
      };
    });
    await insertEvents(h.ch, recent);
    const count = async (extra: Record<string, string>, c: Partial<CommonParams> = {}) => {
      const res = await h.json<{ count: number }>(
        `/api/sites/${site.siteId}/live-user-count?${query(c, extra)}`,
        {
          key: site.key,
        },
      );
      expect(res.status).toBe(200);
      return res.body.count;
    };
    expect(await count({})).toBe(2);
    expect(await count({ minutes: '15' })).toBe(3);
    expect(await count({ minutes: '60' }, { startDate: '2020-01-01', endDate: '2020-01-02' })).toBe(3);
    expect(await count({ minutes: '15' }, { filters: [f('country', 'equals', 'DE')] })).toBe(1);
  });
});

/** RFC 4180 fields: quoted fields may hold commas, doubled quotes and line breaks. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      row.push(field);
      field = '';
    } else if (ch === '\n') {
      rows.push([...row, field]);
      row = [];
      field = '';
    } else field += ch;
  }
  return rows;
}

describe('export', () => {
  const exported = (s: Partial<CommonParams>) =>
    ref.selection(events, tenant.siteId, full(s)).selected.sort(compareEvents).map(ref.apiEvent);

  it.each([[{}], [SCENARIOS[1]!], [SCENARIOS[13]!], [SCENARIOS[16]!]])(
    'NDJSON: every event of the range, errors included, oldest first, as an attachment (%j)',
    async (s) => {
      const res = await h.request(`/api/sites/${tenant.siteId}/export?${query(s)}`, { key: tenant.key });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/x-ndjson; charset=utf-8');
      expect(res.headers.get('content-disposition')).toMatch(
        /^attachment; filename="trackhouse-site-\d+-.+\.ndjson"$/,
      );
      const text = await res.text();
      const rows =
        text === ''
          ? []
          : text
              .trimEnd()
              .split('\n')
              .map((l) => JSON.parse(l) as Record<string, unknown>);
      const expected = exported(s);
      expect(rows.map(({ lat: _a, lon: _b, ...r }) => r)).toEqual(
        expected.map(({ lat: _a, lon: _b, ...r }) => r),
      );
      rows.forEach((r, i) => {
        expect(r.lat).toBeCloseTo(expected[i]!.lat, 3);
        expect(r.lon).toBeCloseTo(expected[i]!.lon, 3);
      });
    },
  );

  it('CSV: one header, quoted text that survives commas, quotes and line breaks, formulas defused', async () => {
    // Months apart: parts of several partitions, so the answer comes in several chunks.
    const s = { startDate: '2026-03-18', endDate: '2026-11-30' };
    const res = await h.request(`/api/sites/${tenant.siteId}/export?${query(s, { format: 'csv' })}`, {
      key: tenant.key,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename=".+\.csv"$/);
    const chunks: Uint8Array[] = [];
    for await (const chunk of res.body!) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(1);
    const [header, ...rows] = parseCsv(Buffer.concat(chunks).toString());
    const expected = exported(s);
    expect(header).toEqual(Object.keys(expected[0]!));
    expect(rows.length).toBe(expected.length);
    const defused = (v: unknown) => (typeof v === 'string' && /^[=+\-@\t\r]/.test(v) ? `'${v}` : v);
    rows.forEach((row, i) => {
      const e = expected[i]!;
      const fields = Object.fromEntries(header!.map((name, j) => [name, row[j]]));
      expect(fields).toEqual(
        Object.fromEntries(
          Object.entries(e).map(([k, v]) => [k, typeof v === 'number' ? fields[k] : String(defused(v))]),
        ),
      );
      expect(Number(fields.screen_width)).toBe(e.screen_width);
      expect(Number(fields.lat)).toBeCloseTo(e.lat, 3);
    });
    const titles = rows.map((r) => r[header!.indexOf('page_title')]);
    expect(titles).toContain(`'=HYPERLINK("http://evil.example","x")`);
    expect(titles).toContain(`'\tindented, "quoted"\nand a second line`);
    expect(titles).toContain(`'-2+3`);
    expect(titles).toContain('Zed');
  });

  it('CSV of a range without events: the header alone', async () => {
    const s = { startDate: '2020-01-01', endDate: '2020-01-02' };
    const res = await h.request(`/api/sites/${tenant.siteId}/export?${query(s, { format: 'csv' })}`, {
      key: tenant.key,
    });
    expect(res.status).toBe(200);
    expect(parseCsv(await res.text())).toEqual([Object.keys(exported({})[0]!)]);
  });

  it('events on either side of UTC midnights (the days an export is read by), each once in order', async () => {
    const site = await h.tenant();
    const midnight = Date.parse('2026-06-02T00:00:00.000Z');
    const day = 86_400_000;
    // Both sides of two midnights, a tie on the second, a day without events, the range's last ms.
    const offsets = [-day / 2, -1, 0, day - 1, day, day, 3 * day + 5, 4 * day - 1];
    const template = { ...events[0]!, site_id: site.siteId };
    const stored = offsets.map((ms, i): StoredEvent => {
      const iso = new Date(midnight + ms).toISOString();
      return {
        ...template,
        timestamp: `${iso.slice(0, 10)} ${iso.slice(11, 23)}`,
        // Ids out of time order among equal times: the tie is broken by the id, not the insert.
        event_id: uuidv7(midnight + ms + (i === 4 ? 5 : 0)),
        pathname: `/at-${i}`,
      };
    });
    await insertEvents(h.ch, [...stored].reverse());
    const expected = [...stored].sort(compareEvents).map((e) => e.pathname);
    expect(expected).toHaveLength(offsets.length);
    const ranges = [{}, { startDate: '2026-06-01', endDate: '2026-06-05' }];
    for (const range of ranges) {
      const res = await h.request(`/api/sites/${site.siteId}/export?${query(range)}`, { key: site.key });
      const lines = (await res.text()).trimEnd().split('\n');
      expect(lines.map((l) => (JSON.parse(l) as { pathname: string }).pathname)).toEqual(expected);
    }
    // A range in Berlin's time: its bounds, not the UTC days, decide which events are in it.
    const berlin = { startDate: '2026-06-02', endDate: '2026-06-02', timeZone: 'Europe/Berlin' };
    const res = await h.request(`/api/sites/${site.siteId}/export?${query(berlin)}`, { key: site.key });
    const inBerlin = stored.filter((e) => {
      const at = Date.parse(`${e.timestamp.replace(' ', 'T')}Z`);
      return at >= midnight - 2 * 3_600_000 && at < midnight + day - 2 * 3_600_000;
    });
    expect(inBerlin.length).toBeGreaterThan(1);
    const lines = (await res.text()).trimEnd().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { pathname: string }).pathname)).toEqual(
      inBerlin.sort(compareEvents).map((e) => e.pathname),
    );
  });

  it('a download abandoned midway cancels its query and the engine keeps serving', async () => {
    const res = await h.request(`/api/sites/${tenant.siteId}/export`, { key: tenant.key });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    await reader.cancel();
    const after = await get<{ data: { sessions: number } }>('overview', {});
    expect(after.body.data.sessions).toBe(ref.overview(selectionOf({})).sessions);
  });

  it('reads of the export follow the access rules: public site, private link, strangers', async () => {
    const stranger = await h.tenant('owner', false);
    const denied = await h.json(`/api/sites/${tenant.siteId}/export`, { key: stranger.key });
    expect([denied.status, denied.body.code]).toEqual([403, 'ACCESS_DENIED']);
    const anonymous = await h.json(`/api/sites/${tenant.siteId}/export`);
    expect([anonymous.status, anonymous.body.code]).toEqual([401, 'MISSING_API_KEY']);
    const open = await h.tenant();
    await h.json(`/api/sites/${open.siteId}/config`, {
      key: open.key,
      method: 'PUT',
      body: { public: true },
    });
    const pub = await h.request(`/api/sites/${open.siteId}/export`);
    expect([pub.status, await pub.text()]).toEqual([200, '']);
  });
});

describe('malformed parameters', () => {
  const bad: [string, string][] = [
    ['overview', 'compare=previous'],
    ['overview', 'compare=previous&start_date=2026-03-01'],
    ['overview', 'compare=next&start_date=2026-03-01&end_date=2026-03-02'],
    ['overview-bucketed', 'bucket=year'],
    ['overview-bucketed', 'bucket=hour'],
    ['overview-bucketed', 'bucket=minute&start_date=2026-03-01'],
    ['overview-bucketed', 'bucket=minute&start_date=2026-03-01&end_date=2026-03-03'],
    ['overview-bucketed', 'bucket=five_minutes&start_date=2026-03-01&end_date=2026-03-07'],
    ['overview-bucketed', 'bucket=hour&start_date=2026-01-01&end_date=2026-03-31'],
    ['overview-bucketed', 'bucket=hour&start_date=2026-01-01&end_date=2026-03-25'],
    ['overview-bucketed', 'bucket=day&start_date=2020-01-01&end_date=2026-01-01'],
    ['overview-bucketed', 'bucket=week&start_date=1900-01-01&end_date=2026-01-01'],
    ['metric', ''],
    ['metric', 'parameter=user_id'],
    ['metric', 'parameter=screen_width'],
    ['metric', 'parameter=country&limit=1001'],
    ['metric', 'parameter=country&limit=0'],
    ['metric', 'parameter=country&page=1001'],
    ['sessions', 'limit=101'],
    ['sessions', 'page=0'],
    ['sessions', 'page=1001'],
    ['sessions', `user_id=${'x'.repeat(256)}`],
    ['sessions/019cc045-78b2-77e4-8f3b-a5943bc53571', 'limit=1001'],
    ['sessions/019cc045-78b2-77e4-8f3b-a5943bc53571', 'offset=100001'],
    ['users', 'sort=name'],
    ['users', 'order=up'],
    ['users', 'limit=101'],
    ['users', 'page=1001'],
    ['live-user-count', 'minutes=0'],
    ['live-user-count', 'minutes=61'],
    ['export', 'format=xml'],
    ['export', 'time_zone=Mars/Olympus'],
    ['export', 'filters=nope'],
  ];
  it.each(bad)('%s?%s → 400 with details', async (path, qs) => {
    const res = await h.json<{ success: boolean; code: string; details: { fieldErrors: object } }>(
      `/api/sites/${tenant.siteId}/${path}?${qs}`,
      { key: tenant.key },
    );
    expect([res.status, res.body.success, res.body.code]).toEqual([400, false, 'INVALID_PARAMS']);
    expect(res.body.details).toHaveProperty('fieldErrors');
  });

  it('accepts the largest ranges within the bucket limit', async () => {
    for (const qs of [
      'bucket=hour&start_date=2026-01-01&end_date=2026-03-24&time_zone=Europe/Berlin',
      'bucket=day&start_date=2021-01-01&end_date=2026-06-23',
      'bucket=minute&start_date=2026-03-08&end_date=2026-03-08&time_zone=America/New_York',
    ]) {
      const res = await h.json<{ data: unknown[] }>(`/api/sites/${tenant.siteId}/overview-bucketed?${qs}`, {
        key: tenant.key,
      });
      expect(res.status).toBe(200);
      expect(res.body.data.length).toBeLessThanOrEqual(2000);
    }
  });
});
