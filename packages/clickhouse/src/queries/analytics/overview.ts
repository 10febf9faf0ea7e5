import type { ClickHouse } from '../../client';
import { type CommonParams, filterConditions, Params, rangeCondition, whereClause } from '../builder';
import { keptPartitions, partitionCounts, SESSION_FACTS } from './increments';
import {
  crossingSessions,
  fromRollup,
  insideRange,
  readRollup,
  rollupApplies,
  rollupSessionRows,
  rollupSessionsApply,
  SESSION_ROW_FIELDS,
  type SessionRowField,
  type Settled,
} from './rollup';
import { rowFiltersApply, rowPageviewsApply, unsureApply } from './row-filters';
import { addDays, countedSessions, daysBetween, ratio, SESSION_MS } from './shared';
import {
  addCounts,
  emptyCounts,
  inPartitions,
  type KeyedCounts,
  settledPartsQuery,
  summarizedDays,
} from './summaries';
import { rangeVisitors, visitorDaysApply } from './visitors';

/** SPEC 13 `overview` numbers of one range. */
export interface TrafficSummary {
  sessions: number;
  pageviews: number;
  users: number;
  pages_per_session: number;
  bounce_rate: number;
  session_duration: number;
}

/** Per-session columns every session total is built from. */
export const SESSION_TOTAL_COLUMNS = [`countIf(type = 'pageview') AS s_pageviews`, `${SESSION_MS} AS s_ms`];

/** Sums over counted sessions, as the session-level part of a summary. */
export interface SessionTotals {
  sessions: number;
  session_pageviews: number;
  bounces: number;
  duration_ms: number;
}

export const SESSION_TOTAL_AGGREGATES = `count() AS sessions, sum(s_pageviews) AS session_pageviews,
  countIf(s_pageviews = 1) AS bounces, sum(s_ms) AS duration_ms`;

/** Averages over counted sessions: pages per session, bounce rate (0–100), duration (seconds). */
export function sessionAverages(t: SessionTotals) {
  return {
    pages_per_session: ratio(t.session_pageviews, t.sessions),
    bounce_rate: ratio(t.bounces * 100, t.sessions),
    session_duration: ratio(t.duration_ms, t.sessions * 1000),
  };
}

/**
 * Sessions and their averages over the counted sessions (each grouped over its events in range,
 * filters not applied); pageviews and users over the events in range that match the filters.
 */
export async function overview(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
): Promise<TrafficSummary> {
  if (rollupSessionsApply(ch)) {
    return summaryOf(await readRollup(ch, (settled) => rollupOverview(ch, siteId, common, settled)));
  }
  const s = new Params();
  const [totals] = await ch.query<SessionTotals>(
    `SELECT ${SESSION_TOTAL_AGGREGATES}
     FROM (${countedSessions(s, siteId, common, SESSION_TOTAL_COLUMNS)})`,
    s.values,
  );
  const e = new Params();
  const [counts] = await ch.query<{ pageviews: number; users: number }>(
    `SELECT countIf(type = 'pageview') AS pageviews, uniqExact(user_id) AS users
     FROM events WHERE ${whereClause(e, siteId, common)}`,
    e.values,
  );
  const t = totals ?? { sessions: 0, session_pageviews: 0, bounces: 0, duration_ms: 0 };
  return {
    sessions: t.sessions,
    pageviews: counts?.pageviews ?? 0,
    users: counts?.users ?? 0,
    ...sessionAverages(t),
  };
}

/**
 * The overviews of a range and of the one it is compared with (`compare=previous`), side by side
 * (on a server and on the embedded engine's read connections alike, docs/decisions.md). From the
 * rollups, against one snapshot of their settled parts: that saves the two lookups of the parts
 * a range's own read makes.
 */
export async function comparedOverviews(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  other: CommonParams,
): Promise<[TrafficSummary, TrafficSummary]> {
  if (!rollupSessionsApply(ch)) {
    return Promise.all([overview(ch, siteId, common), overview(ch, siteId, other)]);
  }
  const [a, b] = await readRollup(ch, (settled) =>
    Promise.all([rollupOverview(ch, siteId, common, settled), rollupOverview(ch, siteId, other, settled)]),
  );
  return [summaryOf(a), summaryOf(b)];
}

/**
 * The sessions the overview counts (SPEC 13), without its other numbers (journeys' shares): from
 * the rollups, its reads less the distinct visitors (the longest of them, unfiltered) and the
 * matching pageviews of filters tested on the session rows.
 */
export async function countedSessionsOf(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
): Promise<number> {
  if (!rollupSessionsApply(ch)) return (await overview(ch, siteId, common)).sessions;
  return (await readRollup(ch, (settled) => rollupOverview(ch, siteId, common, settled, true))).sessions;
}

const summaryOf = (t: OverviewTotals): TrafficSummary => ({
  sessions: t.sessions,
  pageviews: t.pageviews,
  users: t.users,
  ...sessionAverages(t),
});

type OverviewTotals = SessionTotals & { pageviews: number; users: number };

/**
 * The overview's totals from the rollups. Every event in range of a counted session that matches
 * the filters counts (with no filters: every event of it), and a session has one anonymous
 * visitor: the users follow from the sessions, the pageviews from their matching pageviews (or,
 * where the filters are tested on the session rows and one is on the path, from the matching
 * pageview events counted).
 * Unfiltered, the days whose sessions lie in range and have a summary of their session totals
 * (`sessionTotalDays`) add those totals. The distinct visitors of a long enough closed range
 * come from the days they have events on (`rangeVisitors`); otherwise from the counted sessions,
 * the summarized days' read for their visitors alone (a visitor of several days counts once).
 * With `sessionsOnly`, only the sessions and their totals are right: the visitors are not
 * counted, nor the pageviews that match filters tested on the session rows.
 */
async function rollupOverview(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
  sessionsOnly = false,
): Promise<OverviewTotals> {
  // Side by side on the pool: no crossing session belongs to a summarized day (its sessions all
  // lie in the range), so the crossing sessions are the same with those days left out. The
  // distinct visitors of a long range come from their days (visitors.ts), not the sessions: the
  // longest read, it runs on while the sessions' rows are read (about 10 ms less in-process at
  // 10 M events, within the machine's spread). Its failure is taken where it is awaited; a
  // handler attached now keeps it from counting as unhandled when another read fails first.
  const unfiltered = rollupApplies(ch, common);
  const counting =
    !sessionsOnly && visitorDaysApply(ch, common) ? rangeVisitors(ch, siteId, common) : undefined;
  counting?.catch(() => {});
  const withKeys = !sessionsOnly && counting === undefined;
  // Filters tested on the session rows leave no matching events to count the pageviews from:
  // with a path filter they are counted apart, on another read connection meanwhile; without
  // one, every pageview of a row that passes matches, and the rows give them.
  const rowPageviews = !sessionsOnly && rowPageviewsApply(ch, common);
  const matchingPageviews =
    !sessionsOnly && !rowPageviews && rowFiltersApply(ch, common)
      ? countMatchingPageviews(ch, siteId, common)
      : undefined;
  matchingPageviews?.catch(() => {});
  // Unfiltered and without the visitors' keys, the sessions inside the range of a partition
  // still changing (today's, keptPartitions) are counted apart, kept between reads
  // (keptSessionTotals).
  const kept = unfiltered && !withKeys ? keptPartitions(settled, common) : [];
  const keptTotals = Promise.all(
    kept.map(([day, parts]) => keptSessionTotals(ch, siteId, common, day, parts)),
  );
  keptTotals.catch(() => {});
  const [days, edges] = await Promise.all([
    unfiltered ? sessionTotalDays(ch, siteId, common, settled) : undefined,
    crossingSessions(ch, siteId, common, settled, undefined, undefined, unsureApply(ch, common)),
  ]);
  const p = new Params();
  const fields: SessionRowField[] = withKeys ? ['pageviews', 'ms', 'user_key'] : ['pageviews', 'ms'];
  const leftOut = [...(days?.partitions ?? []), ...kept.map(([day]) => Number(day))];
  const rows = await rollupSessionRows(ch, p, siteId, common, fields, settled, {
    restrict: leftOut.length > 0 ? (q) => inPartitions(q, leftOut, true) : undefined,
    edges,
    matchedPageviews: rowPageviews,
  });
  const pageviews =
    matchingPageviews !== undefined || (sessionsOnly && rowFiltersApply(ch, common))
      ? '0'
      : common.filters.length > 0
        ? 'sum(m_pageviews)'
        : 'sum(s_pageviews)';
  const read = !withKeys
    ? `SELECT ${SESSION_TOTAL_AGGREGATES}, ${pageviews} AS pageviews, 0 AS users FROM (${rows})`
    : days
      ? `SELECT countIf(r) AS sessions, sumIf(s_pageviews, r) AS session_pageviews,
             countIf(r AND s_pageviews = 1) AS bounces, sumIf(s_ms, r) AS duration_ms,
             sumIf(s_pageviews, r) AS pageviews, uniqExact(s_user_key) AS users
           FROM (
             SELECT 1 AS r, s_pageviews, s_ms, s_user_key FROM (${rows})
             UNION ALL
             SELECT 0, 0, 0, user_key FROM (${fromRollup(
               p,
               `site_id = ${p.bind('UInt32', siteId)} AND ${inPartitions(p, days.partitions)}`,
               () => 'user_key',
               settled,
             )}))`
      : `SELECT ${SESSION_TOTAL_AGGREGATES}, ${pageviews} AS pageviews, uniqExact(s_user_key) AS users
           FROM (${rows})`;
  const [t] = await ch.query<OverviewTotals>(read, p.values);
  const visitors = await counting;
  const totals = t ?? {
    sessions: 0,
    session_pageviews: 0,
    bounces: 0,
    duration_ms: 0,
    pageviews: 0,
    users: 0,
  };
  const users = visitors ?? Number(totals.users);
  if (matchingPageviews !== undefined) return { ...totals, pageviews: await matchingPageviews, users };
  // The summarized days' totals and the kept partitions'.
  const summed = [days?.counts, ...(await keptTotals)].flatMap((c) => c?.byValue.get('') ?? []);
  const add = (f: 'n_sessions' | 'n_events' | 'bounces' | 'top_ms') => summed.reduce((n, r) => n + r[f], 0);
  return {
    sessions: Number(totals.sessions) + add('n_sessions'),
    session_pageviews: Number(totals.session_pageviews) + add('n_events'),
    bounces: Number(totals.bounces) + add('bounces'),
    duration_ms: Number(totals.duration_ms) + add('top_ms'),
    pageviews: Number(totals.pageviews) + add('n_events'),
    users,
  };
}

/**
 * The totals of one partition's sessions lying inside the range, unfiltered, as a day's summary
 * holds them (value ''): sessions, their pageviews (`n_events`), bounces and durations (`top_ms`).
 * For a partition still changing, kept between reads (partitionCounts).
 */
function keptSessionTotals(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  day: string,
  parts: string[],
): Promise<KeyedCounts> {
  const key = JSON.stringify(['sessions', siteId, common.startDate, common.endDate, common.timeZone, day]);
  return partitionCounts(ch, SESSION_FACTS, siteId, day, parts, key, async (restrict) => {
    const p = new Params();
    const pageviews = SESSION_ROW_FIELDS.pageviews.rollup(true);
    const [r] = await ch.query<SessionTotals>(
      fromRollup(
        p,
        `${insideRange(p, siteId, common)} AND ${restrict(p)}`,
        () =>
          `count() AS sessions, sum(${pageviews}) AS session_pageviews, countIf(${pageviews} = 1) AS bounces,
           sum(${SESSION_ROW_FIELDS.ms.rollup()}) AS duration_ms`,
        undefined,
        'session_facts',
      ),
      p.values,
    );
    const counts = emptyCounts();
    if (r && Number(r.sessions) > 0)
      addCounts(counts, {
        v: '',
        n_sessions: Number(r.sessions),
        n_events: Number(r.session_pageviews),
        bounces: Number(r.bounces),
        top_ms: Number(r.duration_ms),
        top_n: 0,
      });
    return counts;
  });
}

/**
 * The pageviews in range that match every filter, counted in the aggregate over the range's rows
 * (the range alone the `PREWHERE`) with short-circuit evaluation off. With the bench's two
 * filters at 100 M events: 300 ms, against 480-510 with the filters as a `WHERE` after the
 * range (the rows filtered, then counted) and 700 with short-circuit evaluation on (`AND` then
 * tests each condition only on the rows the one before passed, and the tests of the dictionary
 * columns, country and path, cost several times more so). Left to itself the engine moves every
 * condition into `PREWHERE` steps, slower still (67-69 against 58-60 ms at 10 M events). A
 * `SETTINGS` clause is the statement's own: it is not kept on the embedded engine's connection.
 * An entry or exit page filter (a set of sessions from a subquery) keeps the `WHERE`: its set
 * tested on every row cost more than the filtering (780 against 670 ms at 10 M events).
 * docs/benchmarks.md.
 */
async function countMatchingPageviews(ch: ClickHouse, siteId: number, common: CommonParams): Promise<number> {
  const p = new Params();
  const range = rangeCondition(p, siteId, common);
  const matching = [...filterConditions(p, siteId, common), "type = 'pageview'"];
  const bySessions = common.filters.some((f) => f.parameter === 'entry_page' || f.parameter === 'exit_page');
  const [row] = await ch.query<{ n: number }>(
    bySessions
      ? `SELECT count() AS n FROM events PREWHERE ${range} WHERE ${matching.join(' AND ')}`
      : `SELECT countIf(${matching.map((c) => `(${c})`).join(' AND ')}) AS n FROM events PREWHERE ${range}
         SETTINGS short_circuit_function_evaluation = 'disable'`,
    p.values,
  );
  return Number(row?.n ?? 0);
}

/**
 * The days of an unfiltered range whose sessions all lie in it with a summary of their session
 * totals (the `sessions` summaries of `session_facts`, summaries.ts), added up: one value, the
 * empty one, with the sessions (`n_sessions`), their pageviews (`n_events`), bounces and
 * durations in milliseconds (`top_ms`), and the sessions as the day's total too. Undefined
 * when none apply. Call within readRollup() of `session_facts`, which gives `settled`.
 */
export function sessionTotalDays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
): ReturnType<typeof summarizedDays> {
  return summarizedDays(
    ch,
    siteId,
    common,
    'sessions',
    settled,
    async (days, parts) => {
      const p = new Params();
      const pageviews = SESSION_ROW_FIELDS.pageviews.rollup(false);
      const rows = await ch.query<SessionTotals & { day: string }>(
        settledPartsQuery(
          p,
          'session_facts',
          siteId,
          parts,
          `count() AS sessions, sum(${pageviews}) AS session_pageviews, countIf(${pageviews} = 1) AS bounces,
           sum(${SESSION_ROW_FIELDS.ms.rollup()}) AS duration_ms`,
        ),
        p.values,
      );
      const byDay = new Map(rows.map((r) => [Number(r.day), r]));
      // Every day gets its row, a day without sessions of the site zeros: a summary lacking it
      // would be built again at every read.
      return new Map(
        days.map((day): [number, KeyedCounts] => {
          const r = byDay.get(day);
          const totals = {
            v: '',
            n_sessions: Number(r?.sessions ?? 0),
            n_events: Number(r?.session_pageviews ?? 0),
            bounces: Number(r?.bounces ?? 0),
            top_ms: Number(r?.duration_ms ?? 0),
            top_n: 0,
          };
          return [day, { byValue: new Map([['', totals]]), all_sessions: totals.n_sessions, all_events: 0 }];
        }),
      );
    },
    { table: 'session_facts', values: [''] },
  );
}

/** The range of equal length that ends the day before `startDate`. */
export function previousRange(startDate: string, endDate: string): { startDate: string; endDate: string } {
  const days = daysBetween(startDate, endDate);
  return { startDate: addDays(startDate, -days), endDate: addDays(startDate, -1) };
}
