import type { ClickHouse } from '../../client';
import { type CommonParams, type FilterParameter, Params } from '../builder';
import {
  byteOrder,
  keyHash,
  keyInRange,
  keyMs,
  MAX_LISTED_SESSIONS,
  pageNames,
  pathHash,
  pathRows,
  sessionsAt,
  sessionsWithin,
} from './paths';
import { readRollup, rollupApplies, rollupSessionRows, type Settled } from './rollup';
import {
  countedSessions,
  EVENT_ORDER,
  matchesFilters,
  orderMs,
  rankedPage,
  ratio,
  SESSION_ATTRIBUTES,
} from './shared';

type SessionAttribute = (typeof SESSION_ATTRIBUTES)[number];
const isSessionAttribute = (p: MetricParameter): p is SessionAttribute =>
  (SESSION_ATTRIBUTES as readonly string[]).includes(p);

/** Values of single pageviews: a session counts under each value among its pageviews. */
const PAGE_VALUES = ['pathname', 'page_title', 'hostname', 'querystring'] as const;

export const METRIC_PARAMETERS = [
  ...SESSION_ATTRIBUTES,
  ...PAGE_VALUES,
  'entry_page',
  'exit_page',
  'event_name',
] as const satisfies readonly Exclude<FilterParameter, 'user_id'>[];
export type MetricParameter = (typeof METRIC_PARAMETERS)[number];

/** Parameters whose items carry `time_on_page_seconds`. */
export const TIMED_PARAMETERS = new Set<MetricParameter>(['pathname', 'entry_page', 'exit_page']);

export interface MetricItem {
  value: string;
  count: number;
  percentage: number;
  pageviews: number;
  pageviews_percentage: number;
  bounce_rate: number;
  time_on_page_seconds?: number;
}

/** One value's counts, and the totals over every value (the empty one included). */
interface Row {
  v: string;
  /** Sessions counted under the value. */
  n_sessions: number;
  /** Session-level: those sessions' pageviews; page-level: pageviews; event_name: custom events. */
  n_events: number;
  bounces: number;
  top_ms: number;
  top_n: number;
  all_sessions: number;
  all_events: number;
  n_values: number;
}

const TOTALS = `sum(toUInt8(v != '')) OVER () AS n_values`;

/** Ranks the values of per-session rows (`s_value`, `s_pageviews`, `s_gap`): a session counts once. */
const rankSessionValues = (
  sessions: string,
) => `SELECT s_value AS v, count() AS n_sessions, sum(s_pageviews) AS n_events,
    countIf(s_pageviews = 1) AS bounces, sumIf(s_gap, s_gap >= 0) AS top_ms, countIf(s_gap >= 0) AS top_n,
    sum(count()) OVER () AS all_sessions, sum(sum(s_pageviews)) OVER () AS all_events, ${TOTALS}
  FROM (${sessions})
  GROUP BY v`;

/** One row per value of a session attribute, entry page or exit page: a session counts once. */
function bySessionValue(
  p: Params,
  siteId: number,
  common: CommonParams,
  parameter: MetricParameter,
  extra?: string,
): string {
  const columns = [`countIf(type = 'pageview') AS s_pageviews`];
  if (parameter === 'entry_page' || parameter === 'exit_page') {
    // The entry (exit) pageview by the event order, and the next event after it among every
    // event's order key: no sorting, no tuples.
    const [bound, pick] = parameter === 'entry_page' ? ['minIf', 'argMinIf'] : ['maxIf', 'argMaxIf'];
    columns.push(
      `${bound}(${EVENT_ORDER}, type = 'pageview') AS s_at`,
      `${pick}(toString(pathname), ${EVENT_ORDER}, type = 'pageview') AS s_value`,
      `arrayFilter(x -> x > s_at, groupArray(${EVENT_ORDER})) AS s_after`,
      `if(s_pageviews = 0 OR empty(s_after), -1, ${orderMs('arrayMin(s_after)')} - ${orderMs('s_at')}) AS s_gap`,
    );
  } else {
    // An identifier from the allowlist above, never request text.
    columns.push(`toString(argMin(${parameter}, ${EVENT_ORDER})) AS s_value`, '-1 AS s_gap');
  }
  return rankSessionValues(countedSessions(p, siteId, common, columns, extra));
}

/** bySessionValue of a session attribute over the rollup (ranges without filters). */
async function bySessionAttribute(
  ch: ClickHouse,
  p: Params,
  siteId: number,
  common: CommonParams,
  parameter: SessionAttribute,
  settled: Settled | undefined,
): Promise<string> {
  const rows = await rollupSessionRows(ch, p, siteId, common, ['pageviews', parameter], settled);
  return rankSessionValues(`SELECT s_${parameter} AS s_value, s_pageviews, -1 AS s_gap FROM (${rows})`);
}

/**
 * One row per value of single events (page values of pageviews, names of custom events) among
 * the events in range that match the filters. Each counted session contributes its values
 * (none: one placeholder row, so that the session totals stay whole); `k = 1` marks a value's
 * first occurrence in its session.
 */
function byEventValue(
  p: Params,
  siteId: number,
  common: CommonParams,
  parameter: MetricParameter,
  extra?: string,
): string {
  const matches = matchesFilters(p, siteId, common);
  const columns = [`countIf(type = 'pageview') AS s_pageviews`];
  const timed = parameter === 'pathname';
  if (timed) {
    // Every event's order key, whether it is a matching pageview, and its path (if so) in the
    // same order; the session's events in order as positions sorted by key.
    columns.push(
      `groupArray(${EVENT_ORDER}) AS s_ks`,
      `groupArray(toUInt8(type = 'pageview' AND ${matches}) AS e_counted) AS s_fs`,
      `groupArray(if(e_counted, toString(pathname), '')) AS s_ps`,
      `arraySort((j, k) -> k, arrayEnumerate(s_ks), s_ks) AS s_order`,
      `arrayFilter(i -> s_fs[s_order[i]] = 1, arrayEnumerate(s_order)) AS s_at`,
      `arrayMap(i -> s_ps[s_order[i]], s_at) AS s_vals`,
      `arrayMap(i -> if(i < length(s_order), ${orderMs('s_ks[s_order[i + 1]]')} - ${orderMs('s_ks[s_order[i]]')}, -1), s_at) AS s_gaps`,
    );
  } else {
    const type = parameter === 'event_name' ? 'custom_event' : 'pageview';
    // An identifier from the allowlists above, never request text.
    columns.push(`groupArrayIf(toString(${parameter}), type = '${type}' AND ${matches}) AS s_vals`);
  }
  return `SELECT v, countIf(k = 1) AS n_sessions, countIf(i > 0) AS n_events,
    countIf(k = 1 AND s_pageviews = 1) AS bounces,
    ${timed ? 'sumIf(gap, i > 0 AND gap >= 0) AS top_ms, countIf(i > 0 AND gap >= 0) AS top_n' : '0 AS top_ms, 0 AS top_n'},
    sum(countIf(i <= 1)) OVER () AS all_sessions, sum(countIf(i > 0)) OVER () AS all_events, ${TOTALS}
  FROM (${countedSessions(p, siteId, common, columns, extra)})
  LEFT ARRAY JOIN s_vals AS v, arrayEnumerate(s_vals) AS i, arrayEnumerateUniq(s_vals) AS k${timed ? ', s_gaps AS gap' : ''}
  GROUP BY v`;
}

/** Values read from `session_paths` without filters: pathname, entry and exit page, event name. */
const KEYED_PARAMETERS = new Set<MetricParameter>(['pathname', 'entry_page', 'exit_page', 'event_name']);

/**
 * `byEventValue` (pathname) or `bySessionValue` (entry and exit page) over `session_paths`: each
 * session's keys in range sorted (every event is a key), its pageviews found among them, a
 * pageview's time on page the gap to the next key. Keys of one millisecond do not sort by event
 * id: a session with two keys in one millisecond (`tied`) is left out here, grouped alone under
 * `tied` with its id and times, to be computed from its events. Values are path hashes named
 * back from `site_pages`; the totals (windows) are over the other sessions.
 */
function keyedPageValues(
  p: Params,
  siteId: number,
  common: CommonParams,
  parameter: MetricParameter,
  settled: Settled | undefined,
): string {
  const inRange = keyInRange(p, common);
  const perPage = parameter === 'pathname';
  const pick = parameter === 'entry_page' ? 'arrayFirstIndex' : 'arrayLastIndex';
  const pages = perPage
    ? 'arrayFilter(j -> m_fs[j] = 1, arrayEnumerate(m_ks)) AS m_pj'
    : `${pick}(f -> f = 1, m_fs) AS m_at, if(m_at = 0, [], [m_at]) AS m_pj`;
  const rows = pathRows(p, siteId, common, () => 'session_id, page_keys, event_keys, other_keys', settled);
  const sessions = `SELECT session_id,
      arrayConcat(page_keys, event_keys, other_keys) AS m_all,
      arrayConcat(arrayMap(x -> toUInt8(1), page_keys), arrayMap(x -> toUInt8(0), event_keys),
        arrayMap(x -> toUInt8(0), other_keys)) AS m_flags,
      arrayFilter((x, f) -> ${inRange('x')}, m_all, m_flags) AS m_k,
      arrayFilter((f, x) -> ${inRange('x')}, m_flags, m_all) AS m_f,
      arraySort(m_k) AS m_ks,
      arraySort((f, x) -> x, m_f, m_k) AS m_fs,
      arrayMap(x -> toInt64(${keyMs('x')}), m_ks) AS m_ms,
      length(arrayDistinct(m_ms)) < length(m_ms) AS m_tied,
      ${pages},
      if(m_tied, [], arrayMap(j -> ${keyHash('m_ks[j]')}, m_pj)) AS m_hs,
      if(m_tied, [], arrayMap(j -> if(j < length(m_ks), m_ms[j + 1] - m_ms[j], -1), m_pj)) AS m_gaps,
      arraySum(m_fs) AS m_pvs
    FROM (${rows})
    WHERE length(m_k) > 0`;
  const [counts, sessionsOf, eventsOf] = perPage
    ? [
        `countIf(k = 1) AS n_sessions, countIf(i > 0) AS n_events, countIf(k = 1 AND m_pvs = 1) AS bounces`,
        'countIf(i <= 1)',
        'countIf(i > 0)',
      ]
    : [
        `count() AS n_sessions, sum(m_pvs) AS n_events, countIf(m_pvs = 1) AS bounces`,
        'count()',
        'sum(m_pvs)',
      ];
  return `WITH ${pageNames(p, siteId, 'm_names')}
    SELECT m_tied AS tied, transform(h, m_names.1, m_names.2, '') AS v, ${counts},
      sumIf(gap, i > 0 AND gap >= 0) AS top_ms, countIf(i > 0 AND gap >= 0) AS top_n,
      sum(if(m_tied, 0, ${sessionsOf})) OVER () AS all_sessions,
      sum(if(m_tied, 0, ${eventsOf})) OVER () AS all_events,
      groupArrayIf((toString(session_id), m_ms[1], m_ms[-1]), m_tied) AS tied_sessions
    FROM (${sessions})
    LEFT ARRAY JOIN m_hs AS h, arrayEnumerate(m_hs) AS i, arrayEnumerateUniq(m_hs) AS k, m_gaps AS gap
    GROUP BY m_tied, h`;
}

/**
 * `byEventValue` of event names over `session_paths`: per session with a custom event in range,
 * the name hashes of those events and its pageviews in range. Nothing depends on order, so no
 * session is tied. Names come back from the site's custom events (`events_by_name`). Event names
 * are shares of all custom events, so the sessions without one are not read (`all_sessions`,
 * which nothing reads for event names, is 0).
 */
function keyedEventNames(
  p: Params,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
): string {
  const inRange = keyInRange(p, common);
  const site = p.bind('UInt32', siteId);
  const rows = pathRows(p, siteId, common, () => 'page_keys, event_keys', settled, 'length(event_keys) > 0');
  return `WITH (SELECT (groupArray(h), groupArray(name)) FROM (
      SELECT DISTINCT ${pathHash('event_name')} AS h, toString(event_name) AS name
      FROM events_by_name WHERE site_id = ${site} AND type = 'custom_event')) AS m_names
    SELECT 0 AS tied, transform(h, m_names.1, m_names.2, '') AS v,
      countIf(k = 1) AS n_sessions, count() AS n_events, countIf(k = 1 AND m_pvs = 1) AS bounces,
      0 AS top_ms, 0 AS top_n,
      0 AS all_sessions, sum(count()) OVER () AS all_events,
      CAST([], 'Array(Tuple(String, Int64, Int64))') AS tied_sessions
    FROM (
      SELECT arrayMap(x -> ${keyHash('x')}, arrayFilter(x -> ${inRange('x')}, event_keys)) AS m_hs,
        arrayCount(x -> ${inRange('x')}, page_keys) AS m_pvs
      FROM (${rows})
      WHERE length(m_hs) > 0)
    ARRAY JOIN m_hs AS h, arrayEnumerate(m_hs) AS i, arrayEnumerateUniq(m_hs) AS k
    GROUP BY h`;
}

/** The additive counts of a value (sums over disjoint sets of sessions add up). */
const ADDITIVE = ['n_sessions', 'n_events', 'bounces', 'top_ms', 'top_n'] as const;

/**
 * Every value of a page parameter or event name with its counts, unfiltered, from
 * `session_paths`; the tied sessions from their events, added in. Undefined when too many are
 * tied to list them.
 */
async function keyedMetricRows(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: MetricParameter,
  settled: Settled | undefined,
): Promise<Row[] | undefined> {
  const p = new Params();
  const isEvent = parameter === 'event_name';
  const rows = await ch.query<Row & { tied: number; tied_sessions: [string, number, number][] }>(
    isEvent
      ? keyedEventNames(p, siteId, common, settled)
      : keyedPageValues(p, siteId, common, parameter, settled),
    p.values,
  );
  const tied = sessionsAt(rows.filter((r) => Number(r.tied) === 1).flatMap((r) => r.tied_sessions));
  if (tied.length > MAX_LISTED_SESSIONS) return undefined;
  const byValue = new Map<string, Row>();
  const totals = {
    all_sessions: Number(rows[0]?.all_sessions ?? 0),
    all_events: Number(rows[0]?.all_events ?? 0),
  };
  const add = (r: Row) => {
    const known = byValue.get(r.v);
    if (!known) byValue.set(r.v, { ...r, ...Object.fromEntries(ADDITIVE.map((c) => [c, Number(r[c])])) });
    else for (const c of ADDITIVE) known[c] += Number(r[c]);
  };
  for (const r of rows) if (Number(r.tied) === 0) add(r);
  if (tied.length > 0) {
    const q = new Params();
    const within = sessionsWithin(q, tied);
    const grouped =
      parameter === 'pathname'
        ? byEventValue(q, siteId, common, parameter, within)
        : bySessionValue(q, siteId, common, parameter, within);
    const exact = await ch.query<Row>(`SELECT * FROM (${grouped})`, q.values);
    totals.all_sessions += Number(exact[0]?.all_sessions ?? 0);
    totals.all_events += Number(exact[0]?.all_events ?? 0);
    for (const r of exact) add(r);
  }
  const ranked = [...byValue.values()]
    .filter((r) => r.v !== '')
    .sort((a, b) =>
      isEvent
        ? b.n_events - a.n_events || byteOrder(a.v, b.v)
        : b.n_sessions - a.n_sessions || byteOrder(a.v, b.v),
    );
  return ranked.map((r) => ({ ...r, ...totals, n_values: ranked.length }));
}

/**
 * SPEC 13 `metric`: values of one parameter ranked by count (ties by value, byte order), empty
 * values left out, one page of them and the number of distinct values.
 */
export async function metric(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: MetricParameter,
  page: { limit: number; offset: number },
): Promise<{ data: MetricItem[]; totalCount: number }> {
  const isEvent = parameter === 'event_name';
  const perSession = !isEvent && !(PAGE_VALUES as readonly string[]).includes(parameter);
  const rolled = isSessionAttribute(parameter) && rollupApplies(ch, common);
  const run = async (limit: number, offset: number, settled?: Settled) => {
    const p = new Params();
    const grouped = rolled
      ? await bySessionAttribute(ch, p, siteId, common, parameter, settled)
      : perSession
        ? bySessionValue(p, siteId, common, parameter)
        : byEventValue(p, siteId, common, parameter);
    return ch.query<Row>(
      `SELECT * FROM (${grouped})
       WHERE v != ''
       ORDER BY ${isEvent ? 'n_events' : 'n_sessions'} DESC, v ASC
       LIMIT ${p.bind('UInt32', limit)} OFFSET ${p.bind('UInt32', offset)}`,
      p.values,
    );
  };
  const ranked = (settled?: Settled) => rankedPage((limit, offset) => run(limit, offset, settled), page);
  const keyed =
    KEYED_PARAMETERS.has(parameter) && rollupApplies(ch, common)
      ? await readRollup(
          ch,
          (settled) => keyedMetricRows(ch, siteId, common, parameter, settled),
          'session_paths',
        )
      : undefined;
  const { rows, totals } = keyed
    ? { rows: keyed.slice(page.offset, page.offset + page.limit), totals: keyed[0] }
    : rolled
      ? await readRollup(ch, ranked)
      : await ranked();
  const timed = TIMED_PARAMETERS.has(parameter);
  return {
    totalCount: totals?.n_values ?? 0,
    data: rows.map((r) => {
      const count = isEvent ? r.n_events : r.n_sessions;
      const item: MetricItem = {
        value: r.v,
        count,
        percentage: ratio(count * 100, isEvent ? r.all_events : r.all_sessions),
        pageviews: isEvent ? 0 : r.n_events,
        pageviews_percentage: isEvent ? 0 : ratio(r.n_events * 100, r.all_events),
        bounce_rate: ratio(r.bounces * 100, r.n_sessions),
      };
      if (timed) item.time_on_page_seconds = ratio(r.top_ms, r.top_n * 1000);
      return item;
    }),
  };
}
