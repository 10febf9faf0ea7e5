import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeCondition } from '../builder';
import { pathPatternRegex } from '../goals';
import { overview } from './overview';
import { EVENT_ORDER_KEY, matchesFilters, ratio } from './shared';

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
  const site = p.bind('UInt32', siteId);
  const filters = common.filters.length > 0 ? matchesFilters(p, siteId, common) : undefined;
  const page = `type = 'pageview'`;
  // Paths as their hashes, ordered by one number per pageview that sorts as (timestamp, event_id):
  // arrays of plain numbers cost a third of arrays of tuples.
  const pages = `arrayCompact(arraySort((h, k) -> k, groupArrayIf(cityHash64(pathname), ${page}),
    groupArrayIf(${EVENT_ORDER_KEY}, ${page})))`;
  const starts =
    opts.startPage === undefined
      ? ''
      : `(SELECT groupUniqArray(cityHash64(pathname)) FROM site_pages
          WHERE site_id = ${site} AND match(pathname, ${p.bind('String', pathPatternRegex(opts.startPage))})) AS j_starts,`;
  const from =
    opts.startPage === undefined
      ? '1'
      : `arrayFirstIndex(h -> transform(h, j_starts, arrayMap(x -> toUInt8(1), j_starts), toUInt8(0)) = 1, j_pages)`;
  const journeysQuery = ch.query<{ j_path: string[]; j_count: number }>(
    `WITH ${starts}
       (SELECT (groupArray(h), groupArray(path)) FROM (
          SELECT DISTINCT cityHash64(pathname) AS h, pathname AS path FROM site_pages WHERE site_id = ${site})) AS j_names
     SELECT arrayMap(h -> transform(h, j_names.1, j_names.2, ''), j_hashes) AS j_path, count() AS j_count
     FROM (
       SELECT ${pages} AS j_pages, ${from} AS j_from,
         arraySlice(j_pages, greatest(j_from, 1), ${p.bind('UInt8', opts.steps)}) AS j_hashes
       FROM events
       WHERE ${rangeCondition(p, siteId, common)} AND (${page}${filters ? ` OR ${filters}` : ''})
       GROUP BY session_id
       HAVING j_from > 0 AND length(j_hashes) >= 2${filters ? ` AND max(${filters})` : ''})
     GROUP BY j_hashes
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
