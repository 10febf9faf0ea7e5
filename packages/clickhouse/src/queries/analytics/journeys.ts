import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeCondition } from '../builder';
import { pathPatternRegex } from '../goals';
import { countedSessionsOf } from './overview';
import {
  byteOrder,
  keyHash,
  keyInRange,
  keyMs,
  listedSessionsLimit,
  pageNames,
  pathHash,
  pathRows,
  type SessionSpan,
  sessionsAt,
  sessionsWithin,
} from './paths';
import { matchedSessions, readRollup, rollupApplies, rollupSessionsApply, type Settled } from './rollup';
import { EVENT_ORDER, matchesFilters, ratio } from './shared';
import {
  addCounts,
  emptyCounts,
  inPartitions,
  type KeyedCounts,
  type SummarizedParameter,
  summarizedDays,
} from './summaries';

export interface Journey {
  /** Pageview paths in order, repeats in a row counted once. */
  path: string[];
  /** Sessions that took it. */
  count: number;
  /** `count` as a percentage of the sessions in range. */
  percentage: number;
}

interface JourneyOptions {
  steps: number;
  limit: number;
  startPage?: string;
}

/** A journey and its sessions, before the share is taken. */
interface Counted {
  path: string[];
  count: number;
  /** Its path hashes as text (JOURNEY_KEY), where read from the events. */
  key?: string;
}

/** A journey's path hashes as text, the value its summaries store it by. */
const JOURNEY_KEY = "arrayStringConcat(arrayMap(h -> toString(h), j_hashes), ',') AS j_key";

/** The journeys' length when none is asked for (SPEC 13), whose summaries are built ahead (warm.ts). */
export const JOURNEY_STEPS = 3;

/** Journeys from `session_paths` ranked beyond the asked limit, so that tied sessions' exact journeys can be merged in. */
const SPARE_JOURNEYS = 200;

/**
 * The common part of both ways of computing journeys: names for the path hashes, the hashes of
 * the start page's paths, and the index in `j_pages` where a session's journey begins.
 */
function journeyParts(p: Params, siteId: number, opts: JourneyOptions): { with: string; from: string } {
  const names = pageNames(p, siteId, 'j_names');
  if (opts.startPage === undefined) return { with: names, from: '1' };
  const starts = `(SELECT groupUniqArray(${pathHash('pathname')}) FROM site_pages
      WHERE site_id = ${p.bind('UInt32', siteId)} AND match(pathname, ${p.bind('String', pathPatternRegex(opts.startPage))})) AS j_starts`;
  return {
    with: `${names}, ${starts}`,
    from: `arrayFirstIndex(h -> transform(h, j_starts, arrayMap(x -> toUInt8(1), j_starts), toUInt8(0)) = 1, j_pages)`,
  };
}

/** Ranked as the answer is: by sessions, ties by path in byte order. */
const RANKED = 'ORDER BY j_count DESC, j_path ASC';
const named = "arrayMap(h -> transform(h, j_names.1, j_names.2, ''), j_hashes) AS j_path";

/**
 * Journeys from the events: per session, its pageviews in range sorted by one number per
 * pageview that sorts as (timestamp, event_id) (arrays of plain numbers cost a third of arrays of
 * tuples), paths as hashes. `extra` narrows the events read.
 */
function eventJourneys(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  opts: JourneyOptions,
  limit: number,
  extra: (p: Params) => string[] = () => [],
): Promise<Counted[]> {
  const p = new Params();
  const parts = journeyParts(p, siteId, opts);
  const filters = common.filters.length > 0 ? matchesFilters(p, siteId, common) : undefined;
  const page = `type = 'pageview'`;
  const pages = `arrayCompact(arraySort((h, k) -> k, groupArrayIf(${pathHash('pathname')}, ${page}),
    groupArrayIf(${EVENT_ORDER}, ${page})))`;
  const where = [rangeCondition(p, siteId, common), ...extra(p)].join(' AND ');
  return ch
    .query<{ j_path: string[]; j_count: number; j_key: string }>(
      `WITH ${parts.with}
       SELECT ${named}, ${JOURNEY_KEY}, count() AS j_count
       FROM (
         SELECT ${pages} AS j_pages, ${parts.from} AS j_from,
           arraySlice(j_pages, greatest(j_from, 1), ${p.bind('UInt8', opts.steps)}) AS j_hashes
         FROM events
         WHERE ${where} AND (${page}${filters ? ` OR ${filters}` : ''})
         GROUP BY session_id
         HAVING j_from > 0 AND length(j_hashes) >= 2${filters ? ` AND max(${filters})` : ''})
       GROUP BY j_hashes
       ${RANKED}
       LIMIT ${p.bind('UInt32', limit)}`,
      p.values,
    )
    .then((rows) => rows.map((r) => ({ path: r.j_path, key: r.j_key, count: Number(r.j_count) })));
}

/**
 * The journey of each row of `rows` (`session_id`, `page_keys` and the `carried` columns), one
 * row each with `j_tied`, whether two of its keys of different paths share a millisecond (keys
 * order them by path there, events by id), `j_ms` the keys' times, and `j_hashes` its journey
 * from `j_from` (the expression `from`, an index into `j_pages`, journeyParts), empty when tied.
 * Only the keys `inRange` takes, if given. A step per subquery: as one list of aliases, the
 * engine's analysis expands each alias where it is used, and took 43 of the 111 ms of the
 * unsummarized journeys at 10 M events (docs/benchmarks.md).
 */
function journeyRows(
  p: Params,
  rows: string,
  from: string,
  steps: number,
  inRange?: (key: string) => string,
  carried: string[] = [],
): string {
  const keys = inRange ? `arrayFilter(k -> ${inRange('k')}, page_keys)` : 'page_keys';
  const pass = ['session_id', ...carried].join(', ');
  return `SELECT ${pass}, j_ms, j_tied, ${from} AS j_from,
      if(j_tied, [], arraySlice(j_pages, greatest(j_from, 1), ${p.bind('UInt8', steps)})) AS j_hashes
    FROM (
      SELECT ${pass}, j_ms,
        arrayExists((m1, m2, h1, h2) -> m1 = m2 AND h1 != h2,
          arrayPopBack(j_ms), arrayPopFront(j_ms), arrayPopBack(j_all), arrayPopFront(j_all)) AS j_tied,
        arrayCompact(j_all) AS j_pages
      FROM (
        SELECT ${pass}, arrayMap(k -> ${keyHash('k')}, j_keys) AS j_all, arrayMap(k -> ${keyMs('k')}, j_keys) AS j_ms
        FROM (SELECT ${pass}, arraySort(${keys}) AS j_keys FROM (${rows}))))`;
}

/**
 * Journeys from `session_paths`, up to `limit` of them, and the sessions left out: those where
 * two pageviews of different paths share a millisecond (keys order them by path there, events by
 * id). With filters, the rows of the counted sessions only (those with a matching event in range,
 * found from the matching events grouped by session), whose journeys take all their pageviews in
 * range as without: at 10 M events in-process 1.1 s against 2.1 s grouping every pageview of the
 * range by session (docs/benchmarks.md).
 */
async function keyedJourneys(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  opts: JourneyOptions,
  limit: number | undefined,
  settled: Settled | undefined,
  restrict?: (p: Params) => string,
): Promise<{ journeys: Counted[]; tied: SessionSpan[] }> {
  const p = new Params();
  const parts = journeyParts(p, siteId, opts);
  const inRange = keyInRange(p, common);
  // A journey takes two pageviews: sessions with fewer are skipped before their keys are read.
  const paths = pathRows(
    p,
    siteId,
    common,
    () => 'session_id, page_keys',
    settled,
    'length(page_keys) >= 2',
    restrict,
  );
  const rows =
    common.filters.length > 0
      ? `SELECT session_id, page_keys FROM (${paths}) AS s
         INNER JOIN (${matchedSessions(p, siteId, common, undefined, [])}) AS m USING session_id`
      : paths;
  const result = await ch.query<{
    j_tied: number;
    j_path: string[];
    j_count: number;
    j_sessions: [string, number, number][];
  }>(
    `WITH ${parts.with}
     SELECT j_tied, ${named}, count() AS j_count,
       groupArrayIf((toString(session_id), arrayMin(j_ms), arrayMax(j_ms)), j_tied) AS j_sessions
     FROM (${journeyRows(p, rows, parts.from, opts.steps, inRange)})
     WHERE j_tied OR (j_from > 0 AND length(j_hashes) >= 2)
     GROUP BY j_tied, j_hashes
     ORDER BY j_tied DESC, j_count DESC, j_path ASC
     ${limit === undefined ? '' : `LIMIT ${p.bind('UInt32', limit + 1)}`}`,
    p.values,
  );
  const tiedRow = result.find((r) => Number(r.j_tied) === 1);
  return {
    journeys: result
      .filter((r) => Number(r.j_tied) === 0)
      .map((r) => ({ path: r.j_path, count: Number(r.j_count) })),
    tied: sessionsAt(tiedRow?.j_sessions ?? []),
  };
}

/** Byte order of UTF-8 texts, then arrays element by element (as the engine sorts arrays of strings). */
function comparePaths(a: string[], b: string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const order = byteOrder(a[i]!, b[i]!);
    if (order !== 0) return order;
  }
  return a.length - b.length;
}

/** Sessions of two journeys' counts added up, by path. */
function mergeJourneys(...lists: Counted[][]): Counted[] {
  const byPath = new Map<string, Counted>();
  for (const list of lists) {
    for (const j of list) {
      const key = JSON.stringify(j.path);
      const known = byPath.get(key);
      if (known) known.count += j.count;
      else byPath.set(key, { path: j.path, count: j.count });
    }
  }
  return [...byPath.values()].sort((a, b) => b.count - a.count || comparePaths(a.path, b.path));
}

/**
 * Journeys from `session_paths`: the sessions without a shared millisecond from their keys,
 * ranked past the limit, and the others from their events (filters selecting them alike),
 * merged. A journey ranked below those read has at most the last one's count plus every tied
 * session: when that cannot reach the limit's last count, the answer is exact; otherwise every
 * journey is read. Unfiltered and from the first pageview, the range's summarized days add
 * their journeys (summarizedJourneys).
 */
async function rolledJourneys(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  opts: JourneyOptions,
  settled: Settled | undefined,
  spare: number,
): Promise<Counted[]> {
  const days =
    opts.startPage === undefined && rollupApplies(ch, common)
      ? await journeyDays(ch, siteId, common, opts, settled)
      : undefined;
  if (days) {
    const summarized = await summarizedJourneys(ch, siteId, common, opts, settled, days, spare);
    if (summarized) return summarized;
  }
  let keyed = await keyedJourneys(ch, siteId, common, opts, opts.limit + spare, settled);
  const { tied } = keyed;
  if (tied.length === 0) return keyed.journeys.slice(0, opts.limit);
  if (tied.length > listedSessionsLimit(ch)) return eventJourneys(ch, siteId, common, opts, opts.limit);
  const exact = await eventJourneys(ch, siteId, common, opts, tied.length, (p) => [sessionsWithin(p, tied)]);
  let merged = mergeJourneys(keyed.journeys, exact);
  const complete = keyed.journeys.length < opts.limit + spare;
  const last = keyed.journeys.at(-1)?.count ?? 0;
  const limitCount = merged[opts.limit - 1]?.count ?? 0;
  if (!complete && last + tied.length >= limitCount) {
    keyed = await keyedJourneys(ch, siteId, common, opts, undefined, settled);
    merged = mergeJourneys(keyed.journeys, exact);
  }
  return merged.slice(0, opts.limit);
}

/**
 * The parameters the journeys of `steps` pages from a session's first are summarized under: the
 * days' totals (the sessions with a journey), and apart, one row per journey and day (its path
 * hashes, JOURNEY_KEY, and sessions). Apart, a day's totals row is found in a few rows, not
 * behind its thousands of journeys.
 */
const journeysParameter = (steps: number): SummarizedParameter => `journeys:${steps}`;
const journeyRowsParameter = (steps: number) => `journeys:${steps}:paths`;

/**
 * The summarized days of an unfiltered range for journeys of `opts.steps` pages from the first
 * (summaries.ts: days whose sessions all lie in the range), and the sessions their summaries
 * hold; the journeys themselves are added up by the engine (summarizedJourneys). A day is built
 * from its part of `session_paths`: every session's journey from its keys, and those of the
 * sessions with a shared millisecond from their events; its journeys are stored with its totals.
 */
async function journeyDays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  opts: JourneyOptions,
  settled: Settled | undefined,
): Promise<{ partitions: number[]; sessions: number } | undefined> {
  const days = await summarizedDays(
    ch,
    siteId,
    common,
    journeysParameter(opts.steps),
    settled,
    async (days, parts) => {
      const p = new Params();
      const rows = await ch.query<{
        day: number;
        j_tied: number;
        j_key: string;
        j_count: number;
        j_sessions: [string, number, number][];
      }>(
        `SELECT day, j_tied, ${JOURNEY_KEY}, count() AS j_count,
           groupArrayIf((toString(session_id), arrayMin(j_ms), arrayMax(j_ms)), j_tied) AS j_sessions
         FROM (${journeyRows(
           p,
           `SELECT toUInt32(_partition_id) AS day, session_id, page_keys FROM session_paths
            WHERE site_id = ${p.bind('UInt32', siteId)} AND _part IN ${p.bind('Array(String)', parts)}
              AND length(page_keys) >= 2`,
           '1',
           opts.steps,
           undefined,
           ['day'],
         )})
         WHERE j_tied OR length(j_hashes) >= 2
         GROUP BY day, j_tied, j_hashes`,
        p.values,
      );
      const tied = new Map<number, SessionSpan[]>();
      for (const r of rows) if (Number(r.j_tied) === 1) tied.set(Number(r.day), sessionsAt(r.j_sessions));
      if ([...tied.values()].reduce((n, s) => n + s.length, 0) > listedSessionsLimit(ch)) return undefined;
      const byDay = new Map<number, KeyedCounts>(days.map((day) => [day, emptyCounts()]));
      const add = (day: number, v: string, n: number) => {
        const counts = byDay.get(day);
        if (!counts) return;
        addCounts(counts, { v, n_sessions: n, n_events: 0, bounces: 0, top_ms: 0, top_n: 0 }, true);
        counts.all_sessions += n;
      };
      for (const r of rows) if (Number(r.j_tied) === 0) add(Number(r.day), r.j_key, Number(r.j_count));
      // The tied sessions' journeys from their events, a day at a time (they lie in the range).
      for (const [day, sessions] of tied) {
        const exact = await eventJourneys(ch, siteId, common, opts, sessions.length, (q) => [
          sessionsWithin(q, sessions),
        ]);
        for (const j of exact) add(day, j.key!, j.count);
      }
      return byDay;
    },
    { valuesUnder: journeyRowsParameter(opts.steps) },
  );
  return days && { partitions: days.partitions, sessions: days.counts.all_sessions };
}

/**
 * Journeys from the summaries of `days` added up (the first `limit + spare` of them, ranked by
 * sessions) and those of the range's other sessions, all of them, from their keys or events
 * (rolledJourneys). A journey the summaries rank below those read has at most the last one's
 * count there: when that and its count among the other sessions cannot reach the limit's last
 * count, the answer is exact; otherwise every summarized journey is read. Undefined when the
 * summaries read do not hold the sessions they were built with (a day's rows not stored), or
 * when too many of the other sessions share a millisecond to be listed.
 */
async function summarizedJourneys(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  opts: JourneyOptions,
  settled: Settled | undefined,
  days: { partitions: number[]; sessions: number },
  spare: number,
): Promise<Counted[] | undefined> {
  const restrict = (q: Params) => inPartitions(q, days.partitions, true);
  // Without FINAL: a day stored twice (two builds at once, not merged yet) counts its sessions
  // twice, which the total tells; then read again with it.
  const read = async (limit: number | undefined, final = false) => {
    const p = new Params();
    const rows = await ch.query<{ j_path: string[]; j_count: number; j_all: number }>(
      `WITH ${pageNames(p, siteId, 'j_names')}
       SELECT ${named}, j_count, j_all
       FROM (
         SELECT arrayMap(h -> toUInt64(h), splitByChar(',', value)) AS j_hashes,
           sum(n_sessions) AS j_count, sum(j_count) OVER () AS j_all
         FROM metric_summaries${final ? ' FINAL' : ''}
         WHERE site_id = ${p.bind('UInt32', siteId)} AND parameter = ${p.bind('String', journeyRowsParameter(opts.steps))}
           AND partition IN ${p.bind('Array(UInt32)', days.partitions)}
           AND source_part IN ${p.bind('Array(String)', settled?.parts ?? [])}
         GROUP BY value
         ORDER BY j_count DESC, value
         ${limit === undefined ? '' : `LIMIT ${p.bind('UInt32', limit)}`})`,
      p.values,
    );
    const all = Number(rows[0]?.j_all ?? 0);
    const journeys = rows.map((r) => ({ path: r.j_path, count: Number(r.j_count) }));
    return { all, journeys };
  };
  const readWhole = async (limit: number | undefined) => {
    const once = await read(limit);
    return once.all === days.sessions ? once : read(limit, true);
  };
  const [top, keyed] = await Promise.all([
    readWhole(opts.limit + spare),
    keyedJourneys(ch, siteId, common, opts, undefined, settled, restrict),
  ]);
  if (top.all !== days.sessions || keyed.tied.length > listedSessionsLimit(ch)) return undefined;
  const others = mergeJourneys(
    keyed.journeys,
    keyed.tied.length > 0
      ? await eventJourneys(ch, siteId, common, opts, keyed.tied.length, (p) => [
          sessionsWithin(p, keyed.tied),
        ])
      : [],
  );
  let merged = mergeJourneys(top.journeys, others);
  if (top.journeys.length >= opts.limit + spare) {
    const seen = new Set(top.journeys.map((j) => JSON.stringify(j.path)));
    // A loop, not a spread: the other sessions' journeys may be more than a call takes arguments.
    let unread = 0;
    for (const j of others) if (j.count > unread && !seen.has(JSON.stringify(j.path))) unread = j.count;
    const limitCount = merged[opts.limit - 1]?.count ?? 0;
    if (top.journeys.at(-1)!.count + unread >= limitCount) {
      const whole = await readWhole(undefined);
      if (whole.all !== days.sessions) return undefined;
      merged = mergeJourneys(whole.journeys, others);
    }
  }
  return merged.slice(0, opts.limit);
}

/**
 * The most common journeys: per counted session (SPEC 13: filters select sessions), its
 * pageview paths in range in event order, a page repeated in a row (a reload) kept once, from
 * its first pageview or, with `startPage` (a goal's path pattern), from its first pageview
 * matching it. A journey is the first `steps` of those paths; sessions with fewer than two are
 * left out, shorter ones count as they are. Ranked by sessions, ties by path in byte order.
 * From `session_paths` (ranked `spare` past the limit; filtered, the counted sessions' rows),
 * from the events alone with rollups off.
 */
export async function journeys(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  opts: JourneyOptions,
  spare = SPARE_JOURNEYS,
): Promise<Journey[]> {
  const counted = rollupSessionsApply(ch)
    ? readRollup(ch, (settled) => rolledJourneys(ch, siteId, common, opts, settled, spare), 'session_paths')
    : eventJourneys(ch, siteId, common, opts, opts.limit);
  // The sessions in range as the overview counts them (from the rollup when it applies).
  const [rows, sessions] = await Promise.all([counted, countedSessionsOf(ch, siteId, common)]);
  return rows.map((r) => ({
    path: r.path,
    count: r.count,
    percentage: ratio(r.count * 100, sessions),
  }));
}
