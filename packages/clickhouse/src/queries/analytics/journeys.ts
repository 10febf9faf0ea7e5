import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeCondition } from '../builder';
import { pathPatternRegex } from '../goals';
import { overview } from './overview';
import { EVENT_ORDER, matchesFilters, ratio } from './shared';

export interface Journey {
  /** Pageview paths in order, repeats in a row counted once. */
  path: string[];
  /** Sessions that took it. */
  count: number;
  /** `count` as a percentage of the sessions in range. */
  percentage: number;
}

/**
 * The most common journeys: per counted session (SPEC 13: filters select sessions), its
 * pageview paths in range in event order, a page repeated in a row (a reload) kept once, from
 * its first pageview or, with `startPage` (a goal's path pattern), from its first pageview
 * matching it. A journey is the first `steps` of those paths; sessions with fewer than two are
 * left out, shorter ones count as they are. Ranked by sessions, ties by path in byte order.
 */
export async function journeys(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  opts: { steps: number; limit: number; startPage?: string },
): Promise<Journey[]> {
  const p = new Params();
  const filters = common.filters.length > 0 ? matchesFilters(p, siteId, common) : undefined;
  const pages = `arrayCompact(arrayMap(x -> x.2, arraySort(groupArrayIf((${EVENT_ORDER}, pathname), type = 'pageview'))))`;
  const from =
    opts.startPage === undefined
      ? '1'
      : `arrayFirstIndex(x -> match(x, ${p.bind('String', pathPatternRegex(opts.startPage))}), j_pages)`;
  const journeysQuery = ch.query<{ j_path: string[]; j_count: number }>(
    `SELECT j_path, count() AS j_count
     FROM (
       SELECT ${pages} AS j_pages, ${from} AS j_from,
         arraySlice(j_pages, greatest(j_from, 1), ${p.bind('UInt8', opts.steps)}) AS j_path
       FROM events
       WHERE ${rangeCondition(p, siteId, common)} AND (type = 'pageview'${filters ? ` OR ${filters}` : ''})
       GROUP BY session_id
       HAVING j_from > 0 AND length(j_path) >= 2${filters ? ` AND max(${filters})` : ''})
     GROUP BY j_path
     ORDER BY j_count DESC, j_path ASC
     LIMIT ${p.bind('UInt32', opts.limit)}`,
    p.values,
  );
  // The sessions in range as the overview counts them (from the rollup when it applies).
  const [rows, { sessions }] = await Promise.all([journeysQuery, overview(ch, siteId, common)]);
  return rows.map((r) => ({
    path: r.j_path,
    count: Number(r.j_count),
    percentage: ratio(Number(r.j_count) * 100, sessions),
  }));
}
