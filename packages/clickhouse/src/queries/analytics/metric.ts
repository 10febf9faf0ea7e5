import type { ClickHouse } from '../../client';
import { type CommonParams, type FilterParameter, Params } from '../builder';
import { readRollup, rollupApplies, rollupSessionRows, type Settled } from './rollup';
import {
  countedSessions,
  EVENT_ORDER,
  matchesFilters,
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

/** Milliseconds from element `j` of a session's sorted events to the next one, -1 for the last. */
const gapAfter = (j: string) =>
  `if(${j} < length(s_evs), toUnixTimestamp64Milli(s_evs[${j} + 1].1) - toUnixTimestamp64Milli(s_evs[${j}].1), -1)`;

/** Ranks the values of per-session rows (`s_value`, `s_pageviews`, `s_gap`): a session counts once. */
const rankSessionValues = (
  sessions: string,
) => `SELECT s_value AS v, count() AS n_sessions, sum(s_pageviews) AS n_events,
    countIf(s_pageviews = 1) AS bounces, sumIf(s_gap, s_gap >= 0) AS top_ms, countIf(s_gap >= 0) AS top_n,
    sum(count()) OVER () AS all_sessions, sum(sum(s_pageviews)) OVER () AS all_events, ${TOTALS}
  FROM (${sessions})
  GROUP BY v`;

/** One row per value of a session attribute, entry page or exit page: a session counts once. */
function bySessionValue(p: Params, siteId: number, common: CommonParams, parameter: MetricParameter): string {
  const columns = [`countIf(type = 'pageview') AS s_pageviews`];
  if (parameter === 'entry_page' || parameter === 'exit_page') {
    const pick = parameter === 'entry_page' ? 'arrayFirstIndex' : 'arrayLastIndex';
    columns.push(
      `arraySort(groupArray((timestamp, event_id, type = 'pageview', toString(pathname)))) AS s_evs`,
      `${pick}(x -> x.3, s_evs) AS s_at`,
      `if(s_at = 0, '', s_evs[s_at].4) AS s_value`,
      `if(s_at = 0, -1, ${gapAfter('s_at')}) AS s_gap`,
    );
  } else {
    // An identifier from the allowlist above, never request text.
    columns.push(`toString(argMin(${parameter}, ${EVENT_ORDER})) AS s_value`, '-1 AS s_gap');
  }
  return rankSessionValues(countedSessions(p, siteId, common, columns));
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
function byEventValue(p: Params, siteId: number, common: CommonParams, parameter: MetricParameter): string {
  const matches = matchesFilters(p, siteId, common);
  const columns = [`countIf(type = 'pageview') AS s_pageviews`];
  const timed = parameter === 'pathname';
  if (timed) {
    columns.push(
      `arraySort(groupArray((timestamp, event_id, type = 'pageview' AND ${matches}, toString(pathname)))) AS s_evs`,
      `arrayFilter(j -> s_evs[j].3, arrayEnumerate(s_evs)) AS s_at`,
      `arrayMap(j -> s_evs[j].4, s_at) AS s_vals`,
      `arrayMap(j -> ${gapAfter('j')}, s_at) AS s_gaps`,
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
  FROM (${countedSessions(p, siteId, common, columns)})
  LEFT ARRAY JOIN s_vals AS v, arrayEnumerate(s_vals) AS i, arrayEnumerateUniq(s_vals) AS k${timed ? ', s_gaps AS gap' : ''}
  GROUP BY v`;
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
  const { rows, totals } = rolled ? await readRollup(ch, ranked) : await ranked();
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
