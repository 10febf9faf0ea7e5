import { toIso } from '@trackhouse/core';
import type { ClickHouse } from '../../client';
import { type CommonParams, Params, whereClause } from '../builder';
import { type Bucket, bucketSecondsOf, exceedsBucketLimit, overBuckets } from './buckets';
import { rankedPage, ratio } from './shared';

/**
 * Rows of one event type, read from `events_by_name` (sorted by site, type, name and time, so only
 * that type's rows are read), in range and matching every filter.
 */
export function fromEventsOfType(
  p: Params,
  siteId: number,
  common: CommonParams,
  type: string,
  extra: string[] = [],
) {
  return `FROM events_by_name
  WHERE ${whereClause(p, siteId, common, [`type = ${p.bind('String', type)}`, ...extra])}`;
}

/** One error name: its events and the distinct sessions they happened in. */
export interface ErrorNameItem {
  value: string;
  errorName: string;
  count: number;
  sessionCount: number;
  percentage: number;
}

/**
 * Error names (`event_name` of `error` events) in range matching the filters, ranked by events
 * (ties by name, byte order), one page of them and how many names there are. `percentage` is the
 * name's sessions over the sum of every name's sessions.
 */
export async function errorNames(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  page: { limit: number; offset: number },
): Promise<{ data: ErrorNameItem[]; totalCount: number }> {
  const run = (limit: number, offset: number) => {
    const p = new Params();
    return ch.query<{ v: string; n: number; s: number; n_values: number; all_sessions: number }>(
      `SELECT v, n, s, count() OVER () AS n_values, sum(s) OVER () AS all_sessions FROM (
         SELECT event_name AS v, count() AS n, uniqExact(session_id) AS s
         ${fromEventsOfType(p, siteId, common, 'error', ["event_name != ''"])}
         GROUP BY event_name)
       ORDER BY n DESC, v ASC
       LIMIT ${p.bind('UInt32', limit)} OFFSET ${p.bind('UInt32', offset)}`,
      p.values,
    );
  };
  const { rows, totals } = await rankedPage(run, page);
  return {
    totalCount: totals?.n_values ?? 0,
    data: rows.map((r) => ({
      value: r.v,
      errorName: r.v,
      count: r.n,
      sessionCount: r.s,
      percentage: ratio(r.s * 100, r.all_sessions),
    })),
  };
}

/** One error event, with what the browser client records about the error. */
export interface ErrorEventItem {
  event_id: string;
  timestamp: string;
  session_id: string;
  user_id: string;
  identified_user_id: string;
  pathname: string;
  hostname: string;
  page_title: string;
  referrer: string;
  browser: string;
  browser_version: string;
  operating_system: string;
  operating_system_version: string;
  device_type: string;
  country: string;
  region: string;
  city: string;
  message: string;
  stack: string | null;
  fileName: string | null;
  lineNumber: number | null;
  columnNumber: number | null;
  properties: string;
}

const PLAIN_FIELDS = [
  'user_id',
  'identified_user_id',
  'pathname',
  'hostname',
  'page_title',
  'referrer',
  'browser',
  'browser_version',
  'operating_system',
  'operating_system_version',
  'device_type',
  'country',
  'region',
  'city',
  'properties',
] as const;

/** The first of `keys` the event has, as text; NULL when it has none. */
const firstText = (p: Params, keys: string[]) =>
  `multiIf(${keys
    .map((k) => {
      const key = p.bind('String', k);
      return `mapContains(props, ${key}), props[${key}]`;
    })
    .join(', ')}, NULL)`;
/** The first of `keys` whose value is a whole number; NULL when none is. */
const firstInteger = (p: Params, keys: string[]) =>
  `coalesce(${keys.map((k) => `toInt64OrNull(props[${p.bind('String', k)}])`).join(', ')})`;

/**
 * Where the error properties are read from: the browser client's names first (`filename`,
 * `line_number`, `column_number`), then those of `ErrorEvent` (`lineno`, `colno`) and of other
 * clients (`fileName`, `lineNumber`, `columnNumber`).
 */
const errorFields = (p: Params) =>
  [
    `props[${p.bind('String', 'message')}] AS e_message`,
    `${firstText(p, ['stack'])} AS e_stack`,
    `${firstText(p, ['filename', 'fileName'])} AS e_file`,
    `${firstInteger(p, ['line_number', 'lineno', 'lineNumber'])} AS e_line`,
    `${firstInteger(p, ['column_number', 'colno', 'columnNumber'])} AS e_column`,
  ].join(', ');

type ErrorEventRow = Pick<ErrorEventItem, (typeof PLAIN_FIELDS)[number]> & {
  e_id: string;
  e_ts: string;
  e_session: string;
  e_message: string;
  e_stack: string | null;
  e_file: string | null;
  e_line: number | string | null;
  e_column: number | string | null;
};

const intOrNull = (v: number | string | null) => (v === null ? null : Number(v));

/**
 * The error events of one name in range matching the filters, newest first (ties by event id,
 * descending), one page of them and how many there are.
 */
export async function errorEvents(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  name: string,
  page: { limit: number; offset: number },
): Promise<{ data: ErrorEventItem[]; totalCount: number }> {
  const from = (p: Params) =>
    fromEventsOfType(p, siteId, common, 'error', [`event_name = ${p.bind('String', name)}`]);
  const p = new Params();
  const c = new Params();
  const [rows, [count]] = await Promise.all([
    ch.query<ErrorEventRow>(
      `SELECT toString(event_id) AS e_id, toString(timestamp) AS e_ts, toString(session_id) AS e_session,
         ${PLAIN_FIELDS.join(', ')}, ${errorFields(p)}
       ${from(p)}
       ORDER BY timestamp DESC, event_id DESC
       LIMIT ${p.bind('UInt32', page.limit)} OFFSET ${p.bind('UInt32', page.offset)}`,
      p.values,
    ),
    ch.query<{ n: number }>(`SELECT count() AS n ${from(c)}`, c.values),
  ]);
  return {
    totalCount: count?.n ?? 0,
    data: rows.map((r) => {
      const { e_id, e_ts, e_session, e_message, e_stack, e_file, e_line, e_column, ...plain } = r;
      return {
        event_id: e_id,
        timestamp: toIso(e_ts),
        session_id: e_session,
        ...plain,
        message: e_message,
        stack: e_stack,
        fileName: e_file,
        lineNumber: intOrNull(e_line),
        columnNumber: intOrNull(e_column),
      };
    }),
  };
}

export type ErrorBucketedResult = { ok: true; data: { time: string; error_count: number }[] } | { ok: false };

/**
 * The error events of one name per bucket of the range, oldest first, empty buckets with 0,
 * aligned as `overview-bucketed`. An open range starts with the bucket of the earliest of those
 * events. More than MAX_BUCKETS buckets → `{ok: false}`.
 */
export async function errorBucketed(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  name: string,
  bucket: Bucket,
): Promise<ErrorBucketedResult> {
  if (exceedsBucketLimit(common, bucket)) return { ok: false };
  const p = new Params();
  const rows = await ch.query<{ b: number; n: number }>(
    `SELECT ${bucketSecondsOf(p, common, bucket)} AS b, count() AS n
     ${fromEventsOfType(p, siteId, common, 'error', [`event_name = ${p.bind('String', name)}`])}
     GROUP BY b`,
    p.values,
  );
  const buckets = await overBuckets(ch, common, bucket, rows);
  if (!buckets) return { ok: false };
  return { ok: true, data: buckets.map(({ time, row }) => ({ time, error_count: row?.n ?? 0 })) };
}
