/**
 * Collects bound parameters while a query is assembled: values only ever reach ClickHouse as
 * `{pN:Type}` parameters, identifiers only from the allowlists in this folder.
 */
export class Params {
  readonly values: Record<string, unknown> = {};
  private next = 0;

  bind(type: string, value: unknown): string {
    const name = `p${this.next++}`;
    this.values[name] = value;
    return `{${name}:${type}}`;
  }
}

export const FILTER_PARAMETERS = [
  'browser',
  'browser_version',
  'operating_system',
  'operating_system_version',
  'device_type',
  'language',
  'country',
  'region',
  'city',
  'hostname',
  'pathname',
  'page_title',
  'querystring',
  'referrer',
  'channel',
  'event_name',
  'user_id',
  'utm_source',
  'utm_medium',
  'utm_campaign',
  'utm_term',
  'utm_content',
  'entry_page',
  'exit_page',
] as const;
export type FilterParameter = (typeof FILTER_PARAMETERS)[number];

export const FILTER_TYPES = [
  'equals',
  'not_equals',
  'contains',
  'not_contains',
  'regex',
  'not_regex',
] as const;
export type FilterType = (typeof FILTER_TYPES)[number];

export interface Filter {
  parameter: FilterParameter;
  type: FilterType;
  value: string[];
}

/** The read endpoints' common parameters, validated. Dates are inclusive, in `timeZone`. */
export interface CommonParams {
  startDate?: string;
  endDate?: string;
  timeZone: string;
  filters: Filter[];
}

/**
 * The dates reads accept (docs/decisions.md): no event is older than 1970, and DateTime64
 * holds instants up to the end of 2299.
 */
export const READ_DATE_MIN = '1970-01-01';
export const READ_DATE_MAX = '2299-12-31';

/** `YYYY-MM-DD` + 1 day. */
export function nextDay(date: string): string {
  const d = new Date(`${date}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + 1);
  return d.toISOString().slice(0, 10);
}

/**
 * The inclusive local-date range as constant instants: local midnight of the start date, and
 * local midnight after the end date (exclusive). Either is absent for an open range.
 */
export function rangeBounds(p: Params, common: CommonParams): { from?: string; to?: string } {
  const at = (date: string) =>
    `toDateTime64(${p.bind('String', `${date} 00:00:00`)}, 3, ${p.bind('String', common.timeZone)})`;
  return {
    from: common.startDate ? at(common.startDate) : undefined,
    to: common.endDate ? at(nextDay(common.endDate)) : undefined,
  };
}

/**
 * The order of events: time, then event id (as ClickHouse orders UUIDs), so "first" and "last"
 * are defined even when events share a millisecond. As one number (milliseconds, then the id's
 * 128 bits): argMin/argMax by it run 2–3 times faster than by the tuple `(timestamp, event_id)`,
 * and a per-session array of these sorts as fast as any array of numbers.
 */
export const eventOrderKey = (timestamp: string, eventId: string) =>
  `bitShiftLeft(toUInt256(toUnixTimestamp64Milli(${timestamp})), 128) + toUInt256(reinterpretAsUInt128(${eventId}))`;
export const EVENT_ORDER = eventOrderKey('timestamp', 'event_id');
/** The milliseconds of an `eventOrderKey`, as Int64. */
export const orderMs = (key: string) => `toInt64(bitShiftRight(${key}, 128))`;

/** Site and range as constant bounds on `timestamp` (so the sort key is used). */
export function rangeCondition(p: Params, siteId: number, common: CommonParams): string {
  const { from, to } = rangeBounds(p, common);
  const parts = [`site_id = ${p.bind('UInt32', siteId)}`];
  if (from) parts.push(`timestamp >= ${from}`);
  if (to) parts.push(`timestamp < ${to}`);
  return parts.join(' AND ');
}

/** One value test of a filter type on an expression; negative types are the negation of the positive. */
export function matchAny(p: Params, expr: string, type: FilterType, values: string[]): string {
  const list = type.includes('regex') ? '' : p.bind('Array(String)', values);
  // Forms that test dictionary-encoded columns once per distinct value: `IN` (a set; `has()`
  // would decode every row, three times slower) and plain functions of the column, no lambdas.
  const positive =
    type === 'equals' || type === 'not_equals'
      ? `${expr} IN ${list}`
      : type === 'contains' || type === 'not_contains'
        ? `multiSearchAnyCaseInsensitiveUTF8(${expr}, ${list})`
        : `match(${expr}, ${p.bind('String', values.map((v) => `(?:${v})`).join('|'))})`;
  return type.startsWith('not_') ? `NOT (${positive})` : positive;
}

/**
 * Filters as one AND-ed condition. `user_id` matches the anonymous or the identified id;
 * `entry_page`/`exit_page` are session-level: the session's first/last pageview path, over the
 * same site and range.
 */
export function filterConditions(p: Params, siteId: number, common: CommonParams): string[] {
  return common.filters.map((f) => {
    if (f.parameter === 'user_id') {
      const positiveType = f.type.replace(/^not_/, '') as FilterType;
      const either = `(${matchAny(p, 'user_id', positiveType, f.value)} OR ${matchAny(p, 'identified_user_id', positiveType, f.value)})`;
      return f.type.startsWith('not_') ? `NOT ${either}` : either;
    }
    if (f.parameter === 'entry_page' || f.parameter === 'exit_page') {
      const pick = f.parameter === 'entry_page' ? 'argMin' : 'argMax';
      return `session_id IN (
        SELECT session_id FROM events
        WHERE ${rangeCondition(p, siteId, common)} AND type = 'pageview'
        GROUP BY session_id
        HAVING ${matchAny(p, `${pick}(pathname, ${EVENT_ORDER})`, f.type, f.value)})`;
    }
    return matchAny(p, f.parameter, f.type, f.value);
  });
}

/** `WHERE` body: site, range and filters. */
export function whereClause(p: Params, siteId: number, common: CommonParams, extra: string[] = []): string {
  return [rangeCondition(p, siteId, common), ...filterConditions(p, siteId, common), ...extra].join(
    '\n  AND ',
  );
}
