import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeCondition } from '../builder';
import { pathPatternRegex } from '../goals';
import { overview } from './overview';
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
import { matchedSessions, readRollup, rollupSessionsApply, type Settled } from './rollup';
import { EVENT_ORDER, matchesFilters, ratio } from './shared';

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
}

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
    .query<{ j_path: string[]; j_count: number }>(
      `WITH ${parts.with}
       SELECT ${named}, count() AS j_count
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
    .then((rows) => rows.map((r) => ({ path: r.j_path, count: Number(r.j_count) })));
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
): Promise<{ journeys: Counted[]; tied: SessionSpan[] }> {
  const p = new Params();
  const parts = journeyParts(p, siteId, opts);
  const inRange = keyInRange(p, common);
  // A journey takes two pageviews: sessions with fewer are skipped before their keys are read.
  const paths = pathRows(p, siteId, common, () => 'session_id, page_keys', settled, 'length(page_keys) >= 2');
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
     FROM (
       SELECT session_id,
         arraySort(arrayFilter(k -> ${inRange('k')}, page_keys)) AS j_keys,
         arrayMap(k -> ${keyHash('k')}, j_keys) AS j_all,
         arrayMap(k -> ${keyMs('k')}, j_keys) AS j_ms,
         arrayExists((m1, m2, h1, h2) -> m1 = m2 AND h1 != h2,
           arrayPopBack(j_ms), arrayPopFront(j_ms), arrayPopBack(j_all), arrayPopFront(j_all)) AS j_tied,
         arrayCompact(j_all) AS j_pages, ${parts.from} AS j_from,
         if(j_tied, [], arraySlice(j_pages, greatest(j_from, 1), ${p.bind('UInt8', opts.steps)})) AS j_hashes
       FROM (${rows})
       WHERE j_tied OR (j_from > 0 AND length(j_hashes) >= 2))
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

/**
 * Journeys from `session_paths`: the sessions without a shared millisecond from their keys,
 * ranked past the limit, and the others from their events (filters selecting them alike),
 * merged. A journey ranked below those read has at most the last one's count plus every tied
 * session: when that cannot reach the limit's last count, the answer is exact; otherwise every
 * journey is read.
 */
async function rolledJourneys(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  opts: JourneyOptions,
  settled: Settled | undefined,
  spare: number,
): Promise<Counted[]> {
  let keyed = await keyedJourneys(ch, siteId, common, opts, opts.limit + spare, settled);
  const { tied } = keyed;
  if (tied.length === 0) return keyed.journeys.slice(0, opts.limit);
  if (tied.length > listedSessionsLimit(ch)) return eventJourneys(ch, siteId, common, opts, opts.limit);
  const exact = await eventJourneys(ch, siteId, common, opts, tied.length, (p) => [sessionsWithin(p, tied)]);
  const merge = (journeys: Counted[]) => {
    const byPath = new Map(journeys.map((j) => [JSON.stringify(j.path), { ...j }]));
    for (const j of exact) {
      const key = JSON.stringify(j.path);
      const known = byPath.get(key);
      if (known) known.count += j.count;
      else byPath.set(key, { ...j });
    }
    return [...byPath.values()].sort((a, b) => b.count - a.count || comparePaths(a.path, b.path));
  };
  let merged = merge(keyed.journeys);
  const complete = keyed.journeys.length < opts.limit + spare;
  const last = keyed.journeys.at(-1)?.count ?? 0;
  const limitCount = merged[opts.limit - 1]?.count ?? 0;
  if (!complete && last + tied.length >= limitCount) {
    keyed = await keyedJourneys(ch, siteId, common, opts, undefined, settled);
    merged = merge(keyed.journeys);
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
  const [rows, { sessions }] = await Promise.all([counted, overview(ch, siteId, common)]);
  return rows.map((r) => ({
    path: r.path,
    count: r.count,
    percentage: ratio(r.count * 100, sessions),
  }));
}
