import type { ClickHouse } from '../../client';
import { type CommonParams, type Filter, type FilterParameter, matchAny, type Params } from '../builder';
import { rollupElement, rollupSize, VISITOR_ATTRIBUTES } from './shared';

/**
 * Filters tested on a session's `session_facts` row instead of its events (migration 0015).
 *
 * SPEC 13 counts a session when one of its events in range matches every filter. For a session
 * lying wholly inside the range (all its events are in it) whose constant attributes agree on
 * every event (`constants_low = constants_high`), an event matching every filter exists exactly
 * when its first event's constant attributes pass their filters and one of its paths passes
 * every path filter: the constant attributes are the same on all its events, so only the path
 * tells its events apart. That holds while the filters name no other attribute that varies
 * from event to event (hostname, referrer, event name…): with one, the same event would have
 * to pass two tests that the row keeps apart, and the answer reads the events. The entry and
 * exit page are the session's own (SPEC 8): for a session inside the range, those of its row,
 * and a session without pageviews has none to match.
 *
 * A path filter is tested once per distinct path of the site (`site_paths`), the session
 * matching when one of its path hashes is among those that pass.
 *
 * The sessions whose hashes differ (few; none where every session keeps its address and
 * browser) are looked up first, through the skip index of 0015, and left out of the rows by id
 * to be tested on their events: comparing every row's two hashes instead cost 15-80 ms of a
 * filtered answer at 10 M events. Where no filter is on a constant attribute, none is needed.
 *
 * On `session_facts`, a constant attribute is read from its own dictionary-encoded column
 * (`visitor_country`…, migration 0024), which holds the value of one of the session's events:
 * the first event's wherever the row is tested. `session_pages_by_country` keeps them in its
 * `first_event` tuple, dictionary-encoded too (0023, 0025).
 */

/** Attributes that come from the visitor's address and browser: the hashes of 0015 cover them. */
const CONSTANT_ATTRIBUTES = new Set<FilterParameter>(VISITOR_ATTRIBUTES);

/** Filters of the session itself: its entry and exit page, as the row has them. */
const SESSION_PAGES = new Map<FilterParameter, 'entry' | 'exit'>([
  ['entry_page', 'entry'],
  ['exit_page', 'exit'],
]);

/** Whether the filters of `common` (some) can be tested on session rows. */
export const rowFiltersApply = (ch: ClickHouse, common: CommonParams) =>
  ch.rollups !== false &&
  common.filters.length > 0 &&
  common.filters.every(
    (f) =>
      CONSTANT_ATTRIBUTES.has(f.parameter) || f.parameter === 'pathname' || SESSION_PAGES.has(f.parameter),
  );

/** The per-session table a row filter reads. */
export type SessionRows = 'session_facts' | 'session_pages_by_country';

/** A constant attribute of a row of `rows` (0024 for `session_facts`, 0016 and 0025 for `session_pages_by_country`). */
const constantColumn = (rows: SessionRows, parameter: FilterParameter, final: boolean) =>
  rows === 'session_facts' ? `visitor_${parameter}` : rollupElement('first_event', parameter)(final);

/** A filter's test on the row (not a path filter): on its first event's value or its own page. */
function rowTest(p: Params, rows: SessionRows, f: Filter, final: boolean): string {
  const page = SESSION_PAGES.get(f.parameter);
  if (!page) return `(${matchAny(p, constantColumn(rows, f.parameter, final), f.type, f.value)})`;
  // A session without pageviews has no entry or exit page: no such filter passes it.
  return `(${rollupSize('pageview_ids')(final)} > 0 AND ${matchAny(p, rollupElement(page, 'pathname')(final), f.type, f.value)})`;
}

/**
 * The condition on a `session_facts` row (read with FINAL or not) that its session has an event
 * matching every filter, for a session lying wholly inside the range whose constant attributes
 * agree on every event (the others are left out by id: `Edges.unsure`).
 */
export function rowFilterCondition(
  p: Params,
  rows: SessionRows,
  siteId: number,
  common: CommonParams,
  pathTest?: string,
): (final: boolean) => string {
  // Values bound once: the two forms of a read (settled parts, merged ones) share them, and the
  // paths' subquery is then one and the same text.
  const attributes = common.filters
    .filter((f) => f.parameter !== 'pathname')
    .map((f) => [false, true].map((final) => rowTest(p, rows, f, final)));
  const paths = common.filters
    .filter((f) => f.parameter === 'pathname')
    .map((f) => `(${matchAny(p, 'pathname', f.type, f.value)})`);
  // `IN` a subquery tests each element against a hash set built once; `hasAny` against the
  // subquery's array took 12-13 ms more of a filtered overview or pathname breakdown at 10 M
  // events (docs/benchmarks.md). `pathTest`, the test of a built row's path bits where the
  // caller has read the passing paths already (pages.ts, builtPathTest), takes its place.
  const passing =
    paths.length > 0
      ? (pathTest ??
        `arrayExists(x -> x IN (SELECT cityHash64(pathname) FROM site_paths
      WHERE site_id = ${p.bind('UInt32', siteId)} AND ${paths.join(' AND ')}), paths)`)
      : undefined;
  return (final) =>
    [...attributes.map((forms) => forms[final ? 1 : 0]!), ...(passing ? [passing] : [])].join(' AND ') || '1';
}

/**
 * Whether the filters are tested on the rows and none is on the path: then every event of a
 * session whose row passes matches every filter (its constant attributes are those of all its
 * events, its entry and exit page its own), so its matching pageviews are all its pageviews.
 * The sessions computed from their events count theirs (rollupSessionRows, `matchedPageviews`).
 */
export const rowPageviewsApply = (ch: ClickHouse, common: CommonParams) =>
  rowFiltersApply(ch, common) && !common.filters.some((f) => f.parameter === 'pathname');

/**
 * Whether the filters are tested on the rows and one is on an attribute the row holds for its
 * first event only: then a session whose hashes differ has to be tested on its events (a path,
 * entry or exit page filter alone is exact on every row).
 */
export const unsureApply = (ch: ClickHouse, common: CommonParams) =>
  rowFiltersApply(ch, common) && common.filters.some((f) => CONSTANT_ATTRIBUTES.has(f.parameter));

/**
 * A `session_facts` row whose constant attributes differ between its events (or not yet known),
 * in the form the index of 0015 skips granules by.
 */
export const UNSURE_ROW = 'constants_high - constants_low != 0';
