import type { ClickHouse } from '../../client';
import { type CommonParams, type FilterParameter, Params, rangeCondition } from '../builder';
import { keptPartitions, partitionCounts, SESSION_FACTS, SESSION_PATHS } from './increments';
import { memo } from './memo';
import { sessionPageCounts, sessionPagesApply } from './pages';
import {
  byteOrder,
  EVENT_KEY_MS,
  flaggedKey,
  keyFlag,
  keyHash,
  keyInRange,
  keyMs,
  listedSessionsLimit,
  type PageNames,
  pathHash,
  pathRows,
  readPageNames,
  sessionInRange,
  sessionsAt,
  sessionsWithin,
} from './paths';
import {
  crossingSessions,
  fromRollup,
  insideRange,
  matchedSessions,
  readRollup,
  rollupSessionRows,
  rollupSessionsApply,
  SESSION_ROW_FIELDS,
  type SessionRollup,
  type Settled,
  type SettledRest,
  settledRest,
} from './rollup';
import { unsureApply } from './row-filters';
import {
  ADJACENT_EQUAL,
  countedSessions,
  EVENT_ORDER,
  matchesFilters,
  NEXT_GAPS,
  orderMs,
  rankedPage,
  ratio,
  SESSION_ATTRIBUTES,
  valueHash,
} from './shared';
import {
  addCounts,
  coveredSessions,
  daysSpan,
  emptyCounts,
  inPartitions,
  type KeyedCounts,
  type KeyedParameter,
  mergeCounts,
  NEXT_DAY_SESSION,
  nextDaySessions,
  nextPartition,
  PARTITION_DAY,
  type Parts,
  settledPartsQuery,
  summarizedDays,
  type ValueCounts,
  withinDays,
} from './summaries';

type SessionAttribute = (typeof SESSION_ATTRIBUTES)[number];
const isSessionAttribute = (p: MetricParameter): p is SessionAttribute =>
  (SESSION_ATTRIBUTES as readonly string[]).includes(p);

/** Values of single pageviews: a session counts under each value among its pageviews. */
const PAGE_VALUES = ['pathname', 'page_title', 'hostname', 'querystring'] as const;
const isPageValue = (p: MetricParameter) => (PAGE_VALUES as readonly string[]).includes(p);

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

/**
 * One value's counts, and the totals over every value (the empty one included). `n_sessions`:
 * sessions counted under the value; `n_events`: session-level, those sessions' pageviews;
 * page-level, pageviews; event_name, custom events.
 */
interface Row extends ValueCounts {
  all_sessions: number;
  all_events: number;
  n_values: number;
}

/**
 * Rows are grouped by `day` too: the partition day of their sessions with `byDay` (to summarize
 * several days at once, summaries.ts), else 0; totals (windows) are per day.
 */
const dayOf = (byDay: boolean) => (byDay ? PARTITION_DAY : '0');
const TOTALS = `sum(toUInt8(v != '')) OVER (PARTITION BY day) AS n_values`;

/** Ranks the values of per-session rows (`s_value`, `s_pageviews`, `s_gap`): a session counts once. */
const rankSessionValues = (
  sessions: string,
  byDay = false,
) => `SELECT ${dayOf(byDay)} AS day, s_value AS v, count() AS n_sessions, sum(s_pageviews) AS n_events,
    countIf(s_pageviews = 1) AS bounces, sumIf(s_gap, s_gap >= 0) AS top_ms, countIf(s_gap >= 0) AS top_n,
    sum(count()) OVER (PARTITION BY day) AS all_sessions, sum(sum(s_pageviews)) OVER (PARTITION BY day) AS all_events,
    ${TOTALS}
  FROM (${sessions})
  GROUP BY day, v`;

/**
 * One row per value of a session attribute, entry page or exit page: a session counts once.
 * Filtered, the counted sessions of the range are preselected (countedSessions); `extra` lists
 * some sessions (the tied ones of keyedCounts, all counted already), whose few events are read
 * and tested whole: preselecting them read every matching event of the range again (226 of a
 * filtered pathname answer's 1,180 ms at 10 M events).
 */
function bySessionValue(
  p: Params,
  siteId: number,
  common: CommonParams,
  parameter: MetricParameter,
  extra?: string,
  byDay = false,
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
  return rankSessionValues(countedSessions(p, siteId, common, columns, { extra, preselect: !extra }), byDay);
}

/**
 * A session attribute's values ranked (empty values left out). Unfiltered: the days whose
 * sessions lie in range and have a summary read from it (summaries.ts), the range's other
 * sessions from `session_facts` as every unfiltered session answer reads them; filtered: the
 * counted sessions from `session_facts` (rollupSessionRows).
 */
async function sessionAttributeRows(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: SessionAttribute,
  settled: Settled | undefined,
): Promise<Row[]> {
  // Summaries hold every session of their days: none apply to a filtered answer. Their sessions
  // lie inside the range, so the crossing ones are found meanwhile, the same with them or not.
  const [days, edges] = await Promise.all([
    common.filters.length === 0
      ? summarizedDays(
          ch,
          siteId,
          common,
          parameter,
          settled,
          (_, parts) => sessionAttributeCounts(ch, siteId, parameter, parts),
          { table: 'session_facts' },
        )
      : undefined,
    crossingSessions(ch, siteId, common, settled, undefined, undefined, unsureApply(ch, common)),
  ]);
  // Unfiltered, the sessions inside the range of a partition still changing (today's,
  // keptPartitions) are counted apart, kept between reads (keptAttributeCounts).
  const kept = common.filters.length === 0 ? keptPartitions(settled, common) : [];
  const keptCounts = Promise.all(
    kept.map(([day, parts]) => keptAttributeCounts(ch, siteId, common, parameter, day, parts)),
  );
  keptCounts.catch(() => {});
  const leftOut = [...(days?.partitions ?? []), ...kept.map(([day]) => Number(day))];
  const p = new Params();
  const sessions = await rollupSessionRows(ch, p, siteId, common, ['pageviews', parameter], settled, {
    restrict: leftOut.length > 0 ? (q) => inPartitions(q, leftOut, true) : undefined,
    edges,
  });
  const live = await ch.query<ValueCounts>(
    `SELECT s_${parameter} AS v, ${SESSION_VALUE_COUNTS('s_pageviews')} FROM (${sessions}) GROUP BY v`,
    p.values,
  );
  const counts = emptyCounts();
  addSessionValues(counts, live);
  for (const part of [days?.counts, ...(await keptCounts)]) if (part) mergeCounts(counts, part);
  return rankedValues(counts, false);
}

/**
 * A session attribute's counts over one partition's sessions lying inside the range,
 * unfiltered, as a day's summary holds them; for a partition still changing, kept between
 * reads (partitionCounts).
 */
function keptAttributeCounts(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: SessionAttribute,
  day: string,
  parts: string[],
): Promise<KeyedCounts> {
  const key = JSON.stringify([parameter, siteId, common.startDate, common.endDate, common.timeZone, day]);
  return partitionCounts(ch, SESSION_FACTS, siteId, day, parts, key, async (restrict) => {
    const p = new Params();
    const pageviews = SESSION_ROW_FIELDS.pageviews.rollup(true);
    const rows = await ch.query<ValueCounts>(
      `SELECT ${SESSION_ROW_FIELDS[parameter].rollup(true)} AS v, ${SESSION_VALUE_COUNTS(pageviews)}
       FROM session_facts FINAL WHERE ${insideRange(p, siteId, common)} AND ${restrict(p)}
       GROUP BY v`,
      p.values,
    );
    const counts = emptyCounts();
    addSessionValues(counts, rows);
    return counts;
  });
}

/** A session value's counts over per-session rows with their pageviews (`pageviews`). */
const SESSION_VALUE_COUNTS = (pageviews: string) =>
  `count() AS n_sessions, sum(${pageviews}) AS n_events, countIf(${pageviews} = 1) AS bounces, 0 AS top_ms, 0 AS top_n`;

/** Adds per-value counts of sessions counted once each: their totals are the values' sums. */
function addSessionValues(into: KeyedCounts, rows: ValueCounts[]): void {
  for (const r of rows) {
    addCounts(into, r);
    into.all_sessions += Number(r.n_sessions);
    into.all_events += Number(r.n_events);
  }
}

/**
 * A session attribute's counts per settled day over every session of the day's part (`parts`),
 * for its summary (the days are those whose sessions all lie in the range asked for).
 */
async function sessionAttributeCounts(
  ch: ClickHouse,
  siteId: number,
  parameter: SessionAttribute,
  parts: string[],
): Promise<Map<number, KeyedCounts>> {
  const p = new Params();
  const pageviews = SESSION_ROW_FIELDS.pageviews.rollup(false);
  const columns = `${SESSION_ROW_FIELDS[parameter].rollup(false)} AS v, ${SESSION_VALUE_COUNTS(pageviews)}`;
  const rows = await ch.query<ValueCounts & { day: string }>(
    settledPartsQuery(p, 'session_facts', siteId, parts, columns, 'v'),
    p.values,
  );
  const byDay = new Map<number, KeyedCounts>();
  for (const r of rows) {
    const day = Number(r.day);
    const counts = byDay.get(day) ?? emptyCounts();
    byDay.set(day, counts);
    addSessionValues(counts, [r]);
  }
  return byDay;
}

/**
 * One row per value of single events (page values of pageviews, names of custom events) among
 * the events in range that match the filters. Each counted session contributes its values
 * (none: one placeholder row, so that the session totals stay whole); `k = 1` marks a value's
 * first occurrence in its session. `extra` as in bySessionValue.
 */
function byEventValue(
  p: Params,
  siteId: number,
  common: CommonParams,
  parameter: MetricParameter,
  extra?: string,
  byDay = false,
  hashed = false,
): string {
  const matches = matchesFilters(p, siteId, common);
  const columns = [`countIf(type = 'pageview') AS s_pageviews`];
  const timed = parameter === 'pathname';
  if (timed) {
    // Every event's order key, whether it is a matching pageview, and its path (if so) in the
    // same order; each array sorted by the keys, the counted pageviews' paths and gaps taken
    // beside their flags (no lambda capturing an array: see keyedPageValues).
    columns.push(
      `groupArray(${EVENT_ORDER}) AS s_ks`,
      `groupArray(toUInt8(type = 'pageview' AND ${matches}) AS e_counted) AS s_fs`,
      `groupArray(if(e_counted, toString(pathname), '')) AS s_ps`,
      `arraySort((f, k) -> k, s_fs, s_ks) AS s_ofs`,
      `arrayFilter((v, f) -> f = 1, arraySort((v, k) -> k, s_ps, s_ks), s_ofs) AS s_vals`,
      `arrayFilter((g, f) -> f = 1, ${NEXT_GAPS(`arrayMap(k -> ${orderMs('k')}, arraySort(s_ks))`)}, s_ofs) AS s_gaps`,
    );
  } else columns.push(`${eventValues(parameter, matches, hashed)} AS s_vals`);
  return rankEventValues(
    countedSessions(p, siteId, common, columns, { extra, preselect: !extra }),
    timed,
    byDay,
    hashed,
  );
}

/**
 * A session's values of single events (`parameter` of its pageviews, or names of its custom
 * events) among those matching `matches`, as an array.
 */
function eventValues(parameter: MetricParameter, matches: string, hashed = false): string {
  const type = parameter === 'event_name' ? 'custom_event' : 'pageview';
  // An identifier from the allowlists above, never request text.
  const value = hashed ? valueHash(parameter) : `toString(${parameter})`;
  return `groupArrayIf(${value}, type = '${type}' AND ${matches})`;
}

/**
 * Ranks the values of per-session rows (`s_pageviews`, `s_vals`, with `timed` `s_gaps` too): see
 * byEventValue.
 */
function rankEventValues(sessions: string, timed: boolean, byDay: boolean, hashed = false): string {
  // Hashed values (valueHash) are grouped as numbers and answered as text; the empty one, and a
  // session without values (its one row, `i = 0`), as ''.
  const empty = valueHash("''");
  const [value, key, totals] = hashed
    ? [
        `if(i = 0, ${empty}, hv) AS h, if(h = ${empty}, '', toString(h)) AS v`,
        'hv',
        `sum(toUInt8(h != ${empty})) OVER (PARTITION BY day) AS n_values`,
      ]
    : ['v', 'v', TOTALS];
  return `SELECT ${dayOf(byDay)} AS day, ${value}, countIf(k = 1) AS n_sessions, countIf(i > 0) AS n_events,
    countIf(k = 1 AND s_pageviews = 1) AS bounces,
    ${timed ? 'sumIf(gap, i > 0 AND gap >= 0) AS top_ms, countIf(i > 0 AND gap >= 0) AS top_n' : '0 AS top_ms, 0 AS top_n'},
    sum(countIf(i <= 1)) OVER (PARTITION BY day) AS all_sessions,
    sum(countIf(i > 0)) OVER (PARTITION BY day) AS all_events, ${totals}
  FROM (${sessions})
  LEFT ARRAY JOIN s_vals AS ${key}, arrayEnumerate(s_vals) AS i, arrayEnumerateUniq(s_vals) AS k${timed ? ', s_gaps AS gap' : ''}
  GROUP BY day, ${hashed ? 'h' : 'v'}`;
}

/**
 * Values of single events but pathname (whose times on page need every event), filtered: the
 * counted sessions from `session_facts` (rollupSessionRows), each with its values among its
 * matching events, ranked as byEventValue ranks them.
 */
async function matchedEventValueRows(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: MetricParameter,
  settled: Settled | undefined,
): Promise<Row[]> {
  const p = new Params();
  // The matching events are those the values are taken from: no condition beyond their type.
  // Event names are shares of the matching custom events: the counted sessions without one add
  // nothing to the answer (the session total, which nothing reads for them, aside), so only
  // the matching custom events are grouped.
  // Custom events read where they are sorted apart (at 10 M events, in-process: 383 against
  // 681 ms reading them among all events).
  // Page titles of the settled days from `session_pages_by_country` where it applies (pages.ts).
  const pages =
    parameter === 'page_title' && sessionPagesApply(ch, common)
      ? await sessionPageCounts(ch, siteId, common, parameter, settled, 'session_facts')
      : undefined;
  const sessions = await rollupSessionRows(ch, p, siteId, common, ['pageviews'], settled, {
    matched: [`${eventValues(parameter, '1')} AS s_vals`],
    ...(parameter === 'event_name'
      ? { matching: () => `type = 'custom_event'`, matchedFrom: 'events_by_name' as const }
      : pages
        ? { restrict: pages.restrict, matching: pages.matching }
        : {}),
  });
  const rows = await ch.query<Row & { day: number }>(
    `SELECT * FROM (${rankEventValues(sessions, false, false)})`,
    p.values,
  );
  const counts = countsByDay(rows).get(0) ?? emptyCounts();
  const paged = await pages?.counts;
  if (paged) mergeCounts(counts, paged);
  return rankedValues(counts, parameter === 'event_name');
}

/**
 * Values read from `session_paths`: pathname, entry and exit page (filters or not), event name
 * (without filters).
 */
const KEYED_PARAMETERS = new Set<MetricParameter>(['pathname', 'entry_page', 'exit_page', 'event_name']);
const isKeyed = (p: MetricParameter): p is KeyedParameter => KEYED_PARAMETERS.has(p);

/**
 * `byEventValue` (pathname) or `bySessionValue` (entry and exit page) over `session_paths`: each
 * session's keys in range sorted (every event is a key), its pageviews found among them, a
 * pageview's time on page the gap to the next key. Keys of one millisecond do not sort by event
 * id: a session with two keys in one millisecond (`tied`) is left out here, grouped alone under
 * `tied` with its id and times, to be computed from its events. Values are path hashes named
 * back from `site_pages`; `s_part` and `e_part` are each row's share of the session and event
 * totals (over the other sessions). `restrict`, a condition on `session_paths` rows, narrows the
 * sessions read.
 *
 * With filters, only the counted sessions (SPEC 13: those with an event in range matching every
 * filter), found from the matching events grouped by session and joined with their rows; a
 * pathname counts for their matching pageviews alone (found among the session's keys by their
 * milliseconds, `EVENT_KEY_MS`), the entry or exit page over all their pageviews in range, as
 * without.
 */
function keyedPageValues(
  p: Params,
  siteId: number,
  common: CommonParams,
  parameter: MetricParameter,
  settled: Settled | undefined,
  restrict?: string,
  byDay = false,
  matching?: string,
): string {
  const inRange = keyInRange(p, common);
  const perPage = parameter === 'pathname';
  const filtered = common.filters.length > 0;
  const pick = parameter === 'entry_page' ? 'arrayFirstIndex' : 'arrayLastIndex';
  // Flags of the keys: 2 a pageview whose value counts, 1 a pageview whose value does not (a
  // pathname not matching the filters), 0 any other event. The counted pageviews' hashes and
  // gaps are taken beside their flags, never by index in a lambda: a lambda's captured array
  // is copied for each element it maps, which made the statement quadratic in a session's
  // events (the unfiltered pathnames' statement 103 against 72 ms at 10 M events, docs/benchmarks.md).
  const [at, hashes, gaps] = perPage
    ? [
        '',
        `arrayMap(x -> ${keyHash('x')}, arrayFilter((x, f) -> f = 2, m_ks, m_fs))`,
        `arrayFilter((g, f) -> f = 2, ${NEXT_GAPS('m_ms')}, m_fs)`,
      ]
    : [
        `, ${pick}(f -> f > 0, m_fs) AS m_at`,
        `if(m_at = 0, [], [${keyHash('m_ks[m_at]')}])`,
        'if(m_at = 0, [], [if(m_at < length(m_ks), m_ms[m_at + 1] - m_ms[m_at], -1)])',
      ];
  // The flags ride in each key's low bits (flaggedKey): one array filtered and sorted, where
  // the keys and their flags side by side took two filters and a sort by another array (the
  // unfiltered pathnames' statement 227 against 255 ms, 383 against 446 ms of CPU, over 17 hours
  // of a 3 M-event day, alternated in one process).
  const pageFlag = filtered && perPage ? `if(has(m_at_ms, ${keyMs('x')}), 2, 1)` : '2';
  const paths = pathRows(
    p,
    siteId,
    common,
    () => 'session_id, session_start, session_end, page_keys, event_keys, other_keys',
    settled,
    restrict,
  );
  // The matching pageviews by the milliseconds of their keys: they are the keys with those
  // milliseconds wherever the flags count (a tied session's are not read), and a number of
  // milliseconds costs far less to compute and gather than the key (filtered pathnames 884
  // against 1,040 ms at 10 M events, alternated in one process).
  const matched = perPage ? [`groupArrayIf(${EVENT_KEY_MS}, type = 'pageview') AS m_at_ms`] : [];
  const rows = filtered
    ? `SELECT * FROM (${paths}) AS s
      INNER JOIN (${matchedSessions(p, siteId, common, matching, matched)}) AS m USING session_id`
    : paths;
  // A session lying wholly inside the range (most of them) has every key in it: not filtered.
  const inside = sessionInRange(p, common);
  const all = `arrayConcat(arrayMap(x -> ${flaggedKey('x', pageFlag)}, page_keys),
        arrayMap(x -> ${flaggedKey('x', '0')}, arrayConcat(event_keys, other_keys)))`;
  // One level of subquery per step: an alias is expanded into every expression that uses it,
  // so one flat SELECT of these chained arrays took the engine 30-40 ms to plan (docs/benchmarks.md).
  const keys = `SELECT session_id, m_day,
      ${inside ? `if(${inside}, m_all, arrayFilter(x -> ${inRange('x')}, m_all))` : 'm_all'} AS m_k
    FROM (SELECT session_id, session_start, session_end, ${byDay ? PARTITION_DAY : '0'} AS m_day, ${all} AS m_all
      FROM (${rows}))
    WHERE length(m_k) > 0`;
  const sorted = `SELECT session_id, m_day, m_ks, m_fs, m_ms, ${ADJACENT_EQUAL('m_ms')} AS m_tied${at},
      arrayCount(f -> f > 0, m_fs) AS m_pvs
    FROM (SELECT session_id, m_day, m_ks, arrayMap(x -> ${keyFlag('x')}, m_ks) AS m_fs,
      arrayMap(x -> toInt64(${keyMs('x')}), m_ks) AS m_ms
      FROM (SELECT session_id, m_day, arraySort(m_k) AS m_ks FROM (${keys})))`;
  const sessions = `SELECT session_id, m_day, m_ms, m_tied, m_pvs,
      if(m_tied, [], ${hashes}) AS m_hs, if(m_tied, [], ${gaps}) AS m_gaps
    FROM (${sorted})`;
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
  return `SELECT m_day AS day, m_tied AS tied, h, ${counts},
      sumIf(gap, i > 0 AND gap >= 0) AS top_ms, countIf(i > 0 AND gap >= 0) AS top_n,
      ${sessionsOf} AS s_part, ${eventsOf} AS e_part,
      groupArrayIf((toString(session_id), m_ms[1], m_ms[-1]), m_tied) AS tied_sessions
    FROM (${sessions})
    LEFT ARRAY JOIN m_hs AS h, arrayEnumerate(m_hs) AS i, arrayEnumerateUniq(m_hs) AS k, m_gaps AS gap
    GROUP BY m_day, m_tied, h`;
}

/**
 * `byEventValue` of event names over `session_paths`: per session with a custom event in range,
 * the name hashes of those events and its pageviews in range. Nothing depends on order, so no
 * session is tied. Names come back from the site's custom events (`events_by_name`). Event names
 * are shares of all custom events, so the sessions without one are not read (the session total,
 * which nothing reads for event names, is 0).
 */
function keyedEventNames(
  p: Params,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
  restrict?: string,
  byDay = false,
): string {
  const inRange = keyInRange(p, common);
  const site = p.bind('UInt32', siteId);
  const prewhere = ['length(event_keys) > 0', ...(restrict ? [restrict] : [])].join(' AND ');
  const rows = pathRows(p, siteId, common, () => 'session_id, page_keys, event_keys', settled, prewhere);
  // The site's distinct names first (from the dictionary of the column, in its sort order), each
  // hashed once: hashing every custom event's name before the DISTINCT cost the names' read
  // 18 against 10 ms at 10 M events (docs/benchmarks.md).
  return `WITH (SELECT (groupArray(${pathHash('name')}), groupArray(toString(name))) FROM (
      SELECT DISTINCT event_name AS name
      FROM events_by_name WHERE site_id = ${site} AND type = 'custom_event')) AS m_names
    SELECT m_day AS day, 0 AS tied, transform(h, m_names.1, m_names.2, '') AS v,
      countIf(k = 1) AS n_sessions, count() AS n_events, countIf(k = 1 AND m_pvs = 1) AS bounces,
      0 AS top_ms, 0 AS top_n, 0 AS s_part, count() AS e_part,
      CAST([], 'Array(Tuple(String, Int64, Int64))') AS tied_sessions
    FROM (
      SELECT ${byDay ? PARTITION_DAY : '0'} AS m_day,
        arrayMap(x -> ${keyHash('x')}, arrayFilter(x -> ${inRange('x')}, event_keys)) AS m_hs,
        arrayCount(x -> ${inRange('x')}, page_keys) AS m_pvs
      FROM (${rows})
      WHERE length(m_hs) > 0)
    ARRAY JOIN m_hs AS h, arrayEnumerate(m_hs) AS i, arrayEnumerateUniq(m_hs) AS k
    GROUP BY m_day, h`;
}

/**
 * Every value of a page parameter or event name with its counts, unfiltered, from
 * `session_paths` (narrowed by `restrict`), per partition day with `byDay` (else all under day
 * 0); the tied sessions from their events, added in (`ties.found` then set). Undefined when too
 * many are tied to list them.
 */
async function keyedCounts(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: KeyedParameter,
  settled: Settled | undefined,
  restrict?: (p: Params) => string,
  byDay = false,
  matching?: (p: Params) => string,
  pageNames: () => Promise<PageNames> = () => readPageNames(ch, siteId),
  ties?: { found: boolean },
): Promise<Map<number, KeyedCounts> | undefined> {
  const p = new Params();
  const narrow = restrict?.(p);
  type KeyedRow = Row & Parts & { day: number; tied: number; tied_sessions: [string, number, number][] };
  let rows: KeyedRow[];
  if (parameter === 'event_name') {
    rows = await ch.query<KeyedRow>(keyedEventNames(p, siteId, common, settled, narrow, byDay), p.values);
  } else {
    // Rows by path hash, named from the site's pages read meanwhile on another connection: the
    // names as a scalar subquery of the statement cost it about 8 ms more to plan and run at 10 M
    // events (docs/benchmarks.md).
    const names = pageNames();
    names.catch(() => {});
    // Without the plan's filter push-down: pushing the outer conditions down through the
    // chained array expressions cost more to plan and run than it saved (pathname 73 against
    // 67 ms, entry page 79 against 71, filtered pathname 110 against 105 at 10 M events,
    // alternated in one process; the same rows). A `SETTINGS` clause holds for this query only.
    const hashed = await ch.query<Omit<KeyedRow, 'v'> & { h: number | string }>(
      `${keyedPageValues(p, siteId, common, parameter, settled, narrow, byDay, matching?.(p))}
       SETTINGS query_plan_filter_push_down = 0`,
      p.values,
    );
    const nameOf = await names;
    rows = hashed.map(({ h, ...r }) => ({ ...r, v: nameOf(h) }));
  }
  const tied = rows.filter((r) => Number(r.tied) === 1);
  if (tied.reduce((n, r) => n + r.tied_sessions.length, 0) > listedSessionsLimit(ch)) return undefined;
  const byDayCounts = new Map<number, KeyedCounts>();
  const countsOf = (day: number) => {
    const known = byDayCounts.get(day);
    if (known) return known;
    const fresh = emptyCounts();
    byDayCounts.set(day, fresh);
    return fresh;
  };
  for (const r of rows) {
    const counts = countsOf(Number(r.day));
    if (Number(r.tied) !== 0) continue;
    addCounts(counts, r);
    counts.all_sessions += Number(r.s_part);
    counts.all_events += Number(r.e_part);
  }
  const tiedSessions = tied.flatMap((r) => r.tied_sessions);
  if (tiedSessions.length > 0 && ties) ties.found = true;
  if (tiedSessions.length > 0) {
    const q = new Params();
    const within = sessionsWithin(q, sessionsAt(tiedSessions));
    const grouped =
      parameter === 'pathname'
        ? byEventValue(q, siteId, common, parameter, within, byDay)
        : bySessionValue(q, siteId, common, parameter, within, byDay);
    const exact = await ch.query<Row & { day: number }>(`SELECT * FROM (${grouped})`, q.values);
    const totalled = new Set<number>();
    for (const e of exact) {
      const day = Number(e.day);
      const counts = countsOf(day);
      if (!totalled.has(day)) {
        totalled.add(day);
        counts.all_sessions += Number(e.all_sessions);
        counts.all_events += Number(e.all_events);
      }
      addCounts(counts, e);
    }
  }
  return byDayCounts;
}

/**
 * The values of a keyed parameter ranked (empty values left out), unfiltered: the days whose
 * sessions lie in range and have a summary read from it, the other days' sessions from
 * `session_paths`.
 */
async function keyedMetricRows(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: KeyedParameter,
  settled: Settled | undefined,
): Promise<Row[] | undefined> {
  // Summaries hold every session of their days: none apply to a filtered answer.
  const days =
    common.filters.length === 0
      ? await summarizedDays(ch, siteId, common, parameter, settled, (missing) =>
          keyedCounts(ch, siteId, common, parameter, settled, (p) => inPartitions(p, missing), true),
        )
      : undefined;
  // Filtered, the settled days' counted sessions from `session_pages_by_country` where it applies
  // (pages.ts).
  // Both reads name paths from one read of the site's pages.
  let names: Promise<PageNames> | undefined;
  const pageNames = () => {
    names ??= readPageNames(ch, siteId);
    return names;
  };
  const pages =
    common.filters.length > 0 && parameter !== 'event_name' && sessionPagesApply(ch, common)
      ? await sessionPageCounts(ch, siteId, common, parameter, settled, 'session_paths', pageNames)
      : undefined;
  // Unfiltered, a partition still changing (today's, keptPartitions) is counted apart and kept
  // between reads (keptKeyedCounts); undefined when too many of its sessions are tied to list.
  const kept = common.filters.length === 0 ? keptPartitions(settled, common) : [];
  const keptCounts = Promise.all(
    kept.map(([day, parts]) => keptKeyedCounts(ch, siteId, common, parameter, day, parts, pageNames)),
  );
  keptCounts.catch(() => {});
  const leftOut = [...(days?.partitions ?? []), ...kept.map(([day]) => Number(day))];
  const rest = days ? settledRest(settled, leftOut) : undefined;
  const live = rest
    ? await restCounts(ch, siteId, common, parameter, rest, pageNames)
    : await keyedCounts(
        ch,
        siteId,
        common,
        parameter,
        settled,
        leftOut.length > 0 ? (p) => inPartitions(p, leftOut, true) : pages?.restrict,
        false,
        pages?.matching,
        pageNames,
      );
  const paged = await pages?.counts;
  const apart = await keptCounts;
  if (!live || apart.includes(undefined)) return undefined;
  const counts = emptyCounts();
  for (const part of [...live.values(), ...(apart as KeyedCounts[])]) mergeCounts(counts, part);
  if (days) mergeCounts(counts, days.counts);
  if (paged) mergeCounts(counts, paged);
  return rankedValues(counts, parameter === 'event_name');
}

/**
 * keyedCounts of one partition still changing, unfiltered, kept between reads
 * (partitionCounts). Counts with tied sessions, computed from the events, are neither kept nor
 * brought up to date (the events hold what later parts add). Undefined when too many of them
 * are tied to list.
 */
async function keptKeyedCounts(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: KeyedParameter,
  day: string,
  parts: string[],
  pageNames: () => Promise<PageNames>,
): Promise<KeyedCounts | undefined> {
  const key = JSON.stringify([
    'keyed',
    parameter,
    siteId,
    common.startDate,
    common.endDate,
    common.timeZone,
    day,
  ]);
  try {
    return await partitionCounts(ch, SESSION_PATHS, siteId, day, parts, key, async (restrict) => {
      const ties = { found: false };
      const byDay = await keyedCounts(
        ch,
        siteId,
        common,
        parameter,
        undefined,
        restrict,
        false,
        undefined,
        pageNames,
        ties,
      );
      if (!byDay) throw new TooManyTied();
      const counts = emptyCounts();
      for (const part of byDay.values()) mergeCounts(counts, part);
      return ties.found ? { ...counts, unkept: true } : counts;
    });
  } catch (e) {
    if (e instanceof TooManyTied) return undefined;
    throw e;
  }
}

/** Unfiltered keyedCounts of settled partitions only (settledRest), by their parts' names. */
const keptRests = memo<{ counts: Map<number, KeyedCounts> | undefined; tied: boolean }>(256);

/**
 * keyedCounts of the partitions an unfiltered answer reads beside its summarized and kept days,
 * when each of them is settled: their counts never change while those parts last, so they are
 * kept between reads by the parts' names (at 10 M events, the crossing sessions of the day
 * before the range: a statement of about 35 ms, most of it planning). Nothing is read when there
 * is no such partition. Counts with tied sessions (computed from the events) are not kept.
 */
async function restCounts(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: KeyedParameter,
  rest: SettledRest,
  pageNames: () => Promise<PageNames>,
): Promise<Map<number, KeyedCounts> | undefined> {
  if (rest.parts.length === 0) return new Map();
  const key = JSON.stringify([
    'rest',
    parameter,
    siteId,
    common.startDate,
    common.endDate,
    common.timeZone,
    rest.parts,
  ]);
  const { counts } = await keptRests.read(
    ch,
    key,
    async () => {
      const ties = { found: false };
      const counts = await keyedCounts(
        ch,
        siteId,
        common,
        parameter,
        { ...rest, alone: true },
        undefined,
        false,
        undefined,
        pageNames,
        ties,
      );
      return { counts, tied: ties.found };
    },
    (r) => r.counts !== undefined && !r.tied,
  );
  return counts;
}

/** A kept partition's sessions too many tied to list (keptKeyedCounts). */
class TooManyTied extends Error {}

/** Values ranked (empty ones left out), each with the totals: by count, ties by value. */
function rankedValues(counts: KeyedCounts, isEvent: boolean): Row[] {
  const ranked = [...counts.byValue.values()]
    .filter((r) => r.v !== '')
    .sort((a, b) =>
      isEvent
        ? b.n_events - a.n_events || byteOrder(a.v, b.v)
        : b.n_sessions - a.n_sessions || byteOrder(a.v, b.v),
    );
  return ranked.map((r) => ({
    ...r,
    all_sessions: counts.all_sessions,
    all_events: counts.all_events,
    n_values: ranked.length,
  }));
}

/** Page values with summaries that are read from the events. */
type EventValueParameter = 'page_title' | 'hostname';
const isEventValue = (p: MetricParameter): p is EventValueParameter => p === 'page_title' || p === 'hostname';

/** Counts per day of `byEventValue` rows (totals from each day's first row: windows per day). */
function countsByDay(rows: (Row & { day: number })[]): Map<number, KeyedCounts> {
  const byDay = new Map<number, KeyedCounts>();
  for (const r of rows) {
    const day = Number(r.day);
    let counts = byDay.get(day);
    if (!counts) {
      counts = { ...emptyCounts(), all_sessions: Number(r.all_sessions), all_events: Number(r.all_events) };
      byDay.set(day, counts);
    }
    addCounts(counts, r);
  }
  return byDay;
}

/**
 * Page titles or hostnames, unfiltered, with summaries (summaries.ts): the whole days in range
 * that have one read from it, the range's other events grouped by session as `byEventValue` does.
 * Those are the events outside the summarized days, and every event in range of the sessions
 * that are not covered but reach into those days (from `session_paths`: sessions crossing
 * midnight, mostly; listed by id, or found by a subquery when too many to list), but for the
 * next-day sessions of a summarized day whose next day is summarized too: they have every event
 * in range, so their counts are their day's `next_day` summary. Undefined without summarized
 * days: the answer is then ranked in SQL as with filters.
 */
async function eventValueRows(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: EventValueParameter,
  settled: Settled | undefined,
): Promise<Row[] | undefined> {
  // Each day's sessions that its summary leaves out are summarized too, read meanwhile: found
  // among every session of the summarized days, they took 63 of a 204 ms answer at 10 M events.
  const [days, apart, next] = await Promise.all([
    eventValueDays(ch, siteId, common, parameter, settled),
    summarizedDays(ch, siteId, common, 'uncovered_sessions:2', settled, (missing, parts) =>
      uncoveredSessions(ch, siteId, missing, parts),
    ),
    nextDayValueDays(ch, siteId, common, parameter, settled),
  ]);
  if (!days) return undefined;
  // The sessions reaching into the summarized days that their summaries leave out (sessions
  // crossing midnight, mostly): those of the days whose own are summarized, and those found
  // among the others' sessions (days summarized before theirs, and the range's other days).
  const summarized = new Set(days.partitions);
  const known = (apart?.partitions ?? []).filter((d) => summarized.has(d));
  // The known days whose next-day sessions are counted from their summary: the next day is
  // summarized too (the sessions then have every event in range, none read below), and the two
  // summaries, each of the day's part, agree on how many there are.
  const paired = known.filter((d) => {
    const held = next?.byDay.get(d)?.counts;
    if (!held || !summarized.has(nextPartition(d))) return false;
    let marked = 0;
    for (const r of apart!.byDay.get(d)!.counts.byValue.values()) marked += Number(r.n_events);
    return marked === held.all_sessions;
  });
  const uncovered = (q: Params, leaveOut: number[]) => {
    const span = daysSpan(q, days.partitions);
    const others = leaveOut.length > 0 ? ` AND ${inPartitions(q, leaveOut, true)}` : '';
    return fromRollup(
      q,
      `site_id = ${q.bind('UInt32', siteId)} AND session_end >= ${span.from} AND session_start < ${span.to}${others}`,
      () => 'session_id',
      settled,
      'session_paths',
      `NOT ${coveredSessions(q, days.partitions)}`,
    );
  };
  const limit = listedSessionsLimit(ch);
  const p = new Params();
  const [listed] = await ch.query<{ ids: string[]; n: number }>(
    `SELECT groupArray(${Math.max(1, Math.floor(limit))})(session_id) AS ids, count() AS n FROM (${uncovered(p, known)})`,
    p.values,
  );
  const pairedDays = new Set(paired);
  const ids = [
    ...(listed?.ids ?? []),
    ...known.flatMap((d) =>
      [...apart!.byDay.get(d)!.counts.byValue.values()]
        .filter((r) => !(pairedDays.has(d) && Number(r.n_events) === 1))
        .map((r) => r.v),
    ),
  ];
  const q = new Params();
  // Listed, they are found among the events four times faster than by the subquery (at 10 M
  // events); past the limit, by the subquery (of all of them, the paired days' next-day
  // sessions too, which are then not counted from their summaries).
  // Sorted, so that the same sessions make the same condition (rollup.ts crossingSessions).
  const listable = listed && Number(listed.n) + ids.length - listed.ids.length <= limit;
  const sessions = listable ? q.bind('Array(UUID)', ids.sort()) : `(${uncovered(q, [])})`;
  const rest = `(NOT ${withinDays(q, days.partitions)} OR session_id IN ${sessions})`;
  // Grouped by the values' hashes, named back from the summaries' values (and, for values no
  // summary holds, from these events): at 10 M events 38 against 57 ms for the page titles.
  const hashed = await ch.query<Row & { day: number }>(
    `SELECT * FROM (${byEventValue(q, siteId, common, parameter, rest, false, true)})`,
    q.values,
  );
  const names = new Map(days.names);
  const unnamed = [...new Set(hashed.map((r) => r.v).filter((h) => h !== '' && !names.has(h)))];
  if (unnamed.length > 0) {
    const found = await ch.query<{ h: string; name: string }>(
      `SELECT toString(${valueHash(parameter)}) AS h, any(toString(${parameter})) AS name FROM events
       WHERE ${rangeCondition(q, siteId, common)} AND ${rest}
         AND ${valueHash(parameter)} IN ${q.bind('Array(UInt64)', unnamed.map(BigInt))}
       GROUP BY h`,
      q.values,
    );
    for (const r of found) names.set(r.h, r.name);
  }
  const rows = hashed.map((r) => {
    const name = r.v === '' ? '' : names.get(r.v);
    if (name === undefined) throw new Error(`no ${parameter} of hash ${r.v}`);
    return { ...r, v: name };
  });
  const counts = countsByDay(rows).get(0) ?? emptyCounts();
  mergeCounts(counts, days.counts);
  if (listable) for (const d of paired) mergeCounts(counts, next!.byDay.get(d)!.counts);
  return rankedValues(counts, false);
}

/**
 * The sessions of settled days (`days`, their `parts` of `session_paths`) that the page titles'
 * and hostnames' summaries leave out (not covered: they begin or end on another day), one value
 * per session id, for their summary (`uncovered_sessions:2`); `n_events` is 1 for the day's
 * next-day sessions (NEXT_DAY_SESSION), 0 for the others. A day's are the same in any range that
 * holds the day whole.
 */
async function uncoveredSessions(
  ch: ClickHouse,
  siteId: number,
  days: number[],
  parts: string[],
): Promise<Map<number, KeyedCounts>> {
  const p = new Params();
  const rows = await ch.query<{ day: string; ids: string[]; next: number[] }>(
    `SELECT _partition_id AS day, groupArray(toString(session_id)) AS ids,
       groupArray(toUInt8(${NEXT_DAY_SESSION})) AS next
     FROM session_paths
     WHERE site_id = ${p.bind('UInt32', siteId)} AND _part IN ${p.bind('Array(String)', parts)}
       AND NOT ${coveredSessions(p, days)}
     GROUP BY day`,
    p.values,
  );
  const byDay = new Map<number, KeyedCounts>();
  for (const r of rows) {
    const counts = emptyCounts();
    for (const [i, id] of r.ids.entries())
      addCounts(counts, {
        v: id,
        n_sessions: 1,
        n_events: Number(r.next[i]),
        bounces: 0,
        top_ms: 0,
        top_n: 0,
      });
    byDay.set(Number(r.day), counts);
  }
  return byDay;
}

/**
 * The page titles' or hostnames' counts over each settled day's next-day sessions (its
 * `next_day` summaries), days without one built. The sessions' every event counts, in the day
 * and the next, whatever range is asked for: eventValueRows takes a day's counts only where its
 * next day lies in the range too.
 */
function nextDayValueDays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: EventValueParameter,
  settled: Settled | undefined,
) {
  const build = async (missing: number[], parts: string[]) => {
    const q = new Params();
    const { startDate: _from, endDate: _to, ...open } = common;
    const sessions = `(${withinDays(
      q,
      missing.flatMap((d) => [d, nextPartition(d)]),
    )}
      AND session_id IN (SELECT session_id FROM session_paths
        WHERE site_id = ${q.bind('UInt32', siteId)} AND _part IN ${q.bind('Array(String)', parts)}
          AND ${nextDaySessions(q, missing)}))`;
    // As eventValueDays: not through the events' session index.
    const rows = await ch.query<Row & { day: number }>(
      `SELECT * FROM (${byEventValue(q, siteId, open, parameter, sessions, true)})
       SETTINGS use_index_for_in_with_subqueries = 0`,
      q.values,
    );
    return countsByDay(rows);
  };
  return summarizedDays(ch, siteId, common, `${parameter}:next_day`, settled, build);
}

/** The summarized days of page titles or hostnames (eventValueRows), days without one built. */
function eventValueDays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: EventValueParameter,
  settled: Settled | undefined,
) {
  const build = async (missing: number[]) => {
    const q = new Params();
    const covered = `(${withinDays(q, missing)} AND session_id IN (SELECT session_id FROM session_paths
      WHERE site_id = ${q.bind('UInt32', siteId)} AND ${coveredSessions(q, missing)}))`;
    // Not through the index: matching millions of ids against the events' session index costs
    // ten times the read (11 s against 0.9 s for 10 M events). A `SETTINGS` clause holds for
    // this query only (a call's settings would stay on its embedded connection).
    const rows = await ch.query<Row & { day: number }>(
      `SELECT * FROM (${byEventValue(q, siteId, common, parameter, covered, true)})
       SETTINGS use_index_for_in_with_subqueries = 0`,
      q.values,
    );
    return countsByDay(rows);
  };
  // With the stored values' hashes, which name the live sessions' values (eventValueRows).
  return summarizedDays(ch, siteId, common, parameter, settled, build, { names: true });
}

/**
 * How `metric` reads every value of `parameter` ranked in the service, and the rollup the read
 * takes its snapshot of; undefined: one page ranked in SQL from the events. Session attributes
 * and filtered single-event values but pathname read `session_facts` (filtered: the counted
 * sessions); pathname, entry and exit page `session_paths` (unfiltered, with summaries;
 * filtered, the counted sessions), as do the other unfiltered ones.
 */
function rankedReader(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: MetricParameter,
): { read: (settled?: Settled) => Promise<Row[] | undefined>; table: SessionRollup } | undefined {
  if (!rollupSessionsApply(ch)) return undefined;
  if (isSessionAttribute(parameter)) {
    return { read: (s) => sessionAttributeRows(ch, siteId, common, parameter, s), table: 'session_facts' };
  }
  const filtered = common.filters.length > 0;
  // Filtered, event names keep to the matching custom events' sessions (session_facts).
  if (isKeyed(parameter) && !(filtered && parameter === 'event_name')) {
    return { read: (s) => keyedMetricRows(ch, siteId, common, parameter, s), table: 'session_paths' };
  }
  if (filtered) {
    return parameter === 'event_name' || isPageValue(parameter)
      ? { read: (s) => matchedEventValueRows(ch, siteId, common, parameter, s), table: 'session_facts' }
      : undefined;
  }
  if (isEventValue(parameter)) {
    return { read: (s) => eventValueRows(ch, siteId, common, parameter, s), table: 'session_paths' };
  }
  return undefined;
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
  const perSession = !isEvent && !isPageValue(parameter);
  const run = async (limit: number, offset: number) => {
    const p = new Params();
    const grouped = perSession
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
  const reader = rankedReader(ch, siteId, common, parameter);
  const all = reader ? await readRollup(ch, reader.read, reader.table) : undefined;
  const { rows, totals } = all
    ? { rows: all.slice(page.offset, page.offset + page.limit), totals: all[0] }
    : await rankedPage(run, page);
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
