import {
  type CommonParams,
  filterConditions,
  nextDay,
  type Params,
  rangeBounds,
  rangeCondition,
} from '../builder';

export { EVENT_ORDER, eventOrderKey, orderMs } from '../builder';

/** A span of time: its first and last instant, as the engine writes DateTime64(3, 'UTC'). */
export type Span = [string, string];

/**
 * Spans sorted and joined where they overlap or touch (that text orders as the instants do).
 */
export function mergedSpans(spans: Span[]): Span[] {
  const sorted = [...spans].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const out: Span[] = [];
  for (const [from, to] of sorted) {
    const last = out.at(-1);
    if (last && from <= last[1]) {
      if (to > last[1]) last[1] = to;
    } else out.push([from, to]);
  }
  return out;
}

/** A condition on events: their time in one of `spans` (none: false). */
export const inSpans = (p: Params, spans: Span[]) =>
  spans
    .map(
      ([from, to]) =>
        `timestamp BETWEEN ${p.bind("DateTime64(3, 'UTC')", from)} AND ${p.bind("DateTime64(3, 'UTC')", to)}`,
    )
    .join(' OR ') || '0';

/**
 * Hours back from the end of a range that the newest-first lists (sessions, goal sessions,
 * users by last seen) look at first, widening until a page fills.
 */
export const RECENT_HOURS = [3, 24, 24 * 8];

/**
 * The instant `hours` before the end of the range or before now, whichever is sooner (an open
 * range ends now): a range through today has nothing in its last hours.
 */
export function hoursBeforeEnd(p: Params, common: CommonParams, hours: number): string {
  const { to } = rangeBounds(p, common);
  return `${to ? `least(${to}, now64(3))` : 'now64(3)'} - INTERVAL ${p.bind('UInt32', hours)} HOUR`;
}

/** More than any zone's offset ahead of UTC (+14:00 now, +15:14 the furthest a place ever kept). */
const AHEAD_MS = 16 * 3_600_000;

/**
 * An instant (epoch milliseconds) no later than hoursBeforeEnd's, whatever the range's zone: its
 * end date's next midnight in a zone further ahead of UTC than any, or now, less the hours.
 */
export function earliestHoursBeforeEnd(common: CommonParams, hours: number): number {
  const end = common.endDate ? Date.parse(`${nextDay(common.endDate)}T00:00:00Z`) - AHEAD_MS : Infinity;
  return Math.min(end, Date.now()) - hours * 3_600_000;
}

/**
 * Attributes that come from the visitor's address (the place) and browser (its user agent,
 * screen and language): as a rule the same on every event of a session (row-filters.ts).
 */
export const VISITOR_ATTRIBUTES = [
  'country',
  'region',
  'city',
  'browser',
  'browser_version',
  'operating_system',
  'operating_system_version',
  'device_type',
  'language',
] as const;

/** Attributes a session takes from its first event in range (SPEC 13). */
export const SESSION_ATTRIBUTES = [
  'referrer',
  'channel',
  'utm_source',
  'utm_medium',
  'utm_campaign',
  'utm_term',
  'utm_content',
  'browser',
  'browser_version',
  'operating_system',
  'operating_system_version',
  'device_type',
  'country',
  'region',
  'city',
  'language',
] as const;

/**
 * An element of a tuple column of a per-session rollup: a subcolumn (read alone) unless FINAL
 * merges the tuple (then the element of the merged tuple, see 0005).
 */
export const rollupElement = (column: string, name: string) => (final: boolean) =>
  final ? `tupleElement(${column}, '${name}')` : `${column}.${name}`;

/**
 * The length of an array column of a per-session rollup: its sizes subcolumn (read alone)
 * unless FINAL merges the arrays. `length()` reads the whole arrays: a third of an unfiltered
 * users list's read.
 */
export const rollupSize = (column: string) => (final: boolean) =>
  final ? `length(${column})` : `${column}.size0`;

/**
 * Whether a sorted array holds two equal neighbours (`sorted`, an expression of its rows): two
 * keys of one millisecond, a tie. Neighbours as two shifted copies, no lambda capturing the array.
 */
export const ADJACENT_EQUAL = (sorted: string) =>
  `arrayExists((a, b) -> a = b, arrayPopBack(${sorted}), arrayPopFront(${sorted}))`;

/**
 * Each element's gap to the next of a sorted array of milliseconds (`ms`), -1 for the last one.
 * Array expressions only: a lambda reading the next element by index would capture the array,
 * which the engine copies for each element mapped (quadratic in a session's events).
 */
export const NEXT_GAPS = (ms: string) => `arrayPushBack(arrayPopFront(arrayDifference(${ms})), toInt64(-1))`;

/** Milliseconds between a session's first and last event in range. */
export const SESSION_MS = 'toUnixTimestamp64Milli(max(timestamp)) - toUnixTimestamp64Milli(min(timestamp))';

/** Every filter as one condition on an event ('1' when there are none). */
export function matchesFilters(p: Params, siteId: number, common: CommonParams): string {
  const parts = filterConditions(p, siteId, common);
  return parts.length === 0 ? '1' : parts.map((c) => `(${c})`).join(' AND ');
}

/** The events in range that match every filter, as one condition. */
export const matchingEvents = (p: Params, siteId: number, common: CommonParams) =>
  `${rangeCondition(p, siteId, common)} AND ${matchesFilters(p, siteId, common)}`;

/**
 * One row per counted session of the range (SPEC 13): its events in range grouped, filters not
 * applied, the session kept when at least one of them matches every filter. Columns are
 * aggregates over those events; their aliases must not be column names (an alias would shadow
 * the column inside the filter conditions). `extra` narrows the events read (some sessions).
 *
 * `preselect` (for costly per-session aggregates: order keys, arrays of pages): with filters,
 * the counted sessions are found first (those with a matching event in range) and only their
 * events are read and grouped (`PREWHERE` tests the session id alone; the other columns are
 * read for the kept rows only), instead of grouping every event of the range and keeping the
 * sessions after. At 10 M events, in-process, the filtered entry pages and pathnames took half
 * the time, the session attributes three quarters; the overview and buckets, whose aggregates
 * are cheap, were no faster, the sessions list slower (docs/benchmarks.md).
 */
export function countedSessions(
  p: Params,
  siteId: number,
  common: CommonParams,
  columns: string[],
  { extra, preselect = false }: { extra?: string; preselect?: boolean } = {},
): string {
  const select = ['session_id', ...columns].join(',\n    ');
  const filtered = common.filters.length > 0;
  const range = rangeCondition(p, siteId, common);
  const where = `${range}${extra ? ` AND ${extra}` : ''}`;
  if (filtered && preselect) {
    return `SELECT ${select}
  FROM events
  PREWHERE session_id IN (SELECT session_id FROM events WHERE ${range} AND ${matchesFilters(p, siteId, common)})
  WHERE ${where}
  GROUP BY session_id`;
  }
  return `SELECT ${select}
  FROM events
  WHERE ${where}
  GROUP BY session_id${filtered ? `\n  HAVING max(${matchesFilters(p, siteId, common)})` : ''}`;
}

/**
 * One page of ranked rows, each carrying the totals over all of them (window functions), and the
 * row to read the totals from: past the last row the page is empty, so the first row is read
 * instead.
 */
export async function rankedPage<T>(
  run: (limit: number, offset: number) => Promise<T[]>,
  page: { limit: number; offset: number },
): Promise<{ rows: T[]; totals: T | undefined }> {
  const rows = await run(page.limit, page.offset);
  const totals = rows[0] ?? (page.offset > 0 ? (await run(1, 0))[0] : undefined);
  return { rows, totals };
}

/**
 * `num / den` rounded to 2 decimals (halves up), 0 when `den` is 0. Callers pass integers (counts,
 * milliseconds, count × 100), so every rate and average of the API is rounded from an exact ratio.
 */
export function ratio(num: number, den: number): number {
  return den === 0 ? 0 : Math.round((num * 100) / den) / 100;
}

/** Seconds since the epoch (a bucket's start) or ClickHouse DateTime64 text, as ISO 8601 UTC with ms. */
export const isoFromSeconds = (seconds: number) => new Date(seconds * 1000).toISOString();

/** How far after the same date's UTC midnight a zone's midnight lies at most (UTC−12). */
const LATEST_ZONE_MS = 12 * 3_600_000;

/**
 * Whether a range has ended everywhere on Earth: the day after its end date has begun in
 * UTC−12 (false for a range without an end).
 */
export const rangeEnded = (common: CommonParams) =>
  common.endDate !== undefined &&
  Date.parse(`${nextDay(common.endDate)}T00:00:00Z`) + LATEST_ZONE_MS < Date.now();

/** `YYYY-MM-DD` moved by whole days. */
export function addDays(date: string, days: number): string {
  const d = new Date(`${date}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + days);
  return d.toISOString().slice(0, 10);
}

/** Calendar days from `start` to `end`, both included. */
export const daysBetween = (start: string, end: string) =>
  Math.round((Date.parse(`${end}T00:00:00Z`) - Date.parse(`${start}T00:00:00Z`)) / 86_400_000) + 1;

/** Latest milliseconds a session start may have in `listOrder` (2^48 - 1: the year 10889). */
const LAST_MS = 2n ** 48n - 1n;

/**
 * The sessions list's order (newest start first, ties by id as text) as one 256-bit number per
 * session, ascending: milliseconds before LAST_MS, then the id's 16 bytes as written. A number
 * sorts much faster than a tuple. `startMs` is the session's start in milliseconds.
 */
export const listOrder = (startMs: string) =>
  `bitShiftLeft(toUInt256(${LAST_MS} - ${startMs}), 128) + toUInt256(reinterpretAsUInt128(reverse(UUIDToNum(session_id))))`;

/** A session's id and start (milliseconds) from its `listOrder` number (as text). */
export function listed(order: string): { id: string; start: number } {
  const n = BigInt(order);
  const hex = (n & (2n ** 128n - 1n)).toString(16).padStart(32, '0');
  return {
    id: `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`,
    start: Number(LAST_MS - (n >> 128n)),
  };
}

/**
 * A value's 64-bit hash (`column`, an identifier of the allowlists, or a literal): computed once
 * per distinct value of a dictionary column, grouped as a number where its text would be copied
 * and hashed per event (page titles and hostnames, metric.ts; their summaries name them back).
 */
export const valueHash = (column: string) => `cityHash64(${column})`;
