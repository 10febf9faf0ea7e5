import type { ClickHouse } from '../../client';
import { type CommonParams, nextDay, Params, rangeBounds, whereClause } from '../builder';
import { keptEach, memo } from './memo';
import {
  SESSION_TOTAL_AGGREGATES,
  SESSION_TOTAL_COLUMNS,
  type SessionTotals,
  sessionAverages,
  type TrafficSummary,
} from './overview';
import { keyInRange, keyMs, pathRows } from './paths';
import {
  type BucketRange,
  bucketOfQuarter,
  bucketVisitors,
  hourBuckets,
  hourBucketVisitors,
  keepBucketVisitors,
  liveQuarters,
  quarterDays,
  quartersApply,
} from './quarters';
import { readRollup, rollupApplies, rollupSessionRows, rollupSessionsApply, type Settled } from './rollup';
import { countedSessions, daysBetween, inSpans, isoFromSeconds, mergedSpans, type Span } from './shared';

export const BUCKETS = ['minute', 'five_minutes', 'fifteen_minutes', 'hour', 'day', 'week', 'month'] as const;
export type Bucket = (typeof BUCKETS)[number];

/** At most this many buckets per answer. */
export const MAX_BUCKETS = 2000;

/** Buckets finer than a day need both dates (an open range would be unbounded in buckets). */
export const isSubDay = (b: Bucket) =>
  b === 'minute' || b === 'five_minutes' || b === 'fifteen_minutes' || b === 'hour';

/** The start of the bucket holding instant `t`, aligned in time zone `tz` (weeks start on Monday). */
const BUCKET_START: Record<Bucket, (t: string, tz: string) => string> = {
  minute: (t, tz) => `toStartOfMinute(${t}, ${tz})`,
  five_minutes: (t, tz) => `toStartOfFiveMinutes(${t}, ${tz})`,
  fifteen_minutes: (t, tz) => `toStartOfFifteenMinutes(${t}, ${tz})`,
  hour: (t, tz) => `toStartOfHour(${t}, ${tz})`,
  day: (t, tz) => `toStartOfDay(${t}, ${tz})`,
  week: (t, tz) => `toDateTime(toMonday(${t}, ${tz}), ${tz})`,
  month: (t, tz) => `toDateTime(toStartOfMonth(${t}, ${tz}), ${tz})`,
};

/**
 * Seconds between the instants sampled to list a range's buckets: short enough that one lands in
 * every bucket however DST stretches or shrinks it (an hour is never shorter than 30 minutes in
 * any zone, a day never shorter than 23 hours, weeks and months are days long).
 */
const SAMPLE_STEP_S: Record<Bucket, number> = {
  minute: 60,
  five_minutes: 300,
  fifteen_minutes: 900,
  hour: 900,
  day: 3600,
  week: 86_400,
  month: 86_400,
};

/** Buckets a range of `days` days holds, give or take those DST adds or removes. */
const PER_DAY: Record<Bucket, number> = {
  minute: 1440,
  five_minutes: 288,
  fifteen_minutes: 96,
  hour: 24,
  day: 1,
  week: 1 / 7,
  month: 1 / 31,
};

export type BucketItem = { time: string } & TrafficSummary;

export type BucketedResult = { ok: true; data: BucketItem[] } | { ok: false };

interface EventRow {
  b: number;
  pageviews: number;
  users: number;
}

/**
 * SPEC 13 `overview-bucketed`: one item per bucket of the range, oldest first, empty buckets with
 * zeros. Pageviews and users count in the bucket of their event, a counted session in the bucket
 * where its first event in range lies. An open range starts with the bucket of the earliest
 * counted session and ends with the bucket holding now (or the latest event, if later). More
 * than MAX_BUCKETS buckets → `{ok: false}`.
 */
export async function overviewBucketed(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  bucket: Bucket,
): Promise<BucketedResult> {
  if (exceedsBucketLimit(common, bucket)) return { ok: false };
  const closed = common.startDate !== undefined && common.endDate !== undefined;
  const range = closed ? await bucketStarts(ch, common, bucket) : undefined;
  let starts = range?.starts;
  if (starts && starts.length > MAX_BUCKETS) return { ok: false };

  // Measured at 10 M events (docs/benchmarks.md): day buckets 2× faster from the rollups, hour
  // buckets too now that the sessions spanning buckets (one in eight for hours) are taken apart
  // from their keys in `session_paths` rather than their events; buckets of whole quarter hours
  // from the summaries of settled days and the visitors' quarter hours (quarters.ts).
  // Filtered, the counted sessions from the rollup too (two thirds of the time of grouping the
  // events, docs/benchmarks.md).
  const { events, sessions } = rollupApplies(ch, common)
    ? quartersApply(bucket, range)
      ? await quarterBuckets(ch, siteId, common, bucket, range)
      : await readRollup(ch, (settled) => rollupBuckets(ch, siteId, common, bucket, settled))
    : rollupSessionsApply(ch)
      ? await readRollup(ch, (settled) => matchedBuckets(ch, siteId, common, bucket, settled))
      : await scannedBuckets(ch, siteId, common, bucket);

  if (!starts) {
    starts = await listBuckets(
      ch,
      common,
      bucket,
      [...events, ...sessions].map((r) => r.b),
    );
    if (starts.length > MAX_BUCKETS) return { ok: false };
  }
  const byEvents = new Map(events.map((r) => [r.b, r]));
  const bySessions = new Map(sessions.map((r) => [r.b, r]));
  return {
    ok: true,
    data: starts.map((b) => {
      const ev = byEvents.get(b);
      const se = bySessions.get(b) ?? { sessions: 0, session_pageviews: 0, bounces: 0, duration_ms: 0 };
      return {
        time: isoFromSeconds(b),
        pageviews: ev?.pageviews ?? 0,
        sessions: se.sessions,
        users: ev?.users ?? 0,
        ...sessionAverages(se),
      };
    }),
  };
}

/** Per bucket: pageviews and users of the events, and the totals of the sessions starting there. */
interface BucketCounts {
  events: EventRow[];
  sessions: (SessionTotals & { b: number })[];
}

/**
 * BucketCounts of a range with filters (or without rollups): pageviews and users per bucket of
 * the events in range that match the filters; the counted sessions, `rows` (per-session rows
 * with `s_start`, `s_pageviews`, `s_ms`, their values bound in the Params given), in the bucket
 * of their start.
 * The events are read on another read connection while the sessions' rows are found and read.
 */
async function countedBuckets(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  bucket: Bucket,
  rows: (p: Params) => string | Promise<string>,
): Promise<BucketCounts> {
  const e = new Params();
  const etz = e.bind('String', common.timeZone);
  const events = ch.query<EventRow>(
    `SELECT toUnixTimestamp(${BUCKET_START[bucket]('timestamp', etz)}) AS b,
       countIf(type = 'pageview') AS pageviews, uniqExact(user_key) AS users
     FROM events WHERE ${whereClause(e, siteId, common)}
     GROUP BY b`,
    e.values,
  );
  // Awaited below: a failure of the statement is taken there, not left unhandled here.
  events.catch(() => {});
  const p = new Params();
  const counted = await rows(p);
  const tz = p.bind('String', common.timeZone);
  const sessions = await ch.query<SessionTotals & { b: number }>(
    `SELECT toUnixTimestamp(${BUCKET_START[bucket]('s_start', tz)}) AS b, ${SESSION_TOTAL_AGGREGATES}
     FROM (${counted}) GROUP BY b`,
    p.values,
  );
  return { events: await events, sessions };
}

/** BucketCounts from the events alone: the counted sessions grouped from their events. */
function scannedBuckets(ch: ClickHouse, siteId: number, common: CommonParams, bucket: Bucket) {
  return countedBuckets(ch, siteId, common, bucket, (p) =>
    countedSessions(p, siteId, common, [...SESSION_TOTAL_COLUMNS, 'min(timestamp) AS s_start']),
  );
}

/**
 * BucketCounts of a filtered range with the counted sessions from the rollup (rollupSessionRows:
 * those the matching events select). Buckets of a day or longer count their visitors over the
 * sessions (spannedBuckets).
 */
async function matchedBuckets(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  bucket: Bucket,
  settled: Settled | undefined,
): Promise<BucketCounts> {
  if (!isSubDay(bucket)) return spannedBuckets(ch, siteId, common, bucket, settled);
  return countedBuckets(ch, siteId, common, bucket, (p) =>
    rollupSessionRows(ch, p, siteId, common, ['start', 'pageviews', 'ms'], settled),
  );
}

/**
 * BucketCounts of a filtered range whose buckets are a day or longer, the visitors counted over
 * the counted sessions rather than the matching events (two to three times as many rows): a
 * session has one visitor, and one whose events in range lie in one bucket has its matching
 * events there, so its visitor counts in the bucket of its start. The visitors of the sessions
 * with events in two buckets come from the matching events of the spans that hold every such
 * session (spanningWindows: an hour or less around each midnight on the bench's data); any
 * other matching event there counts its visitor in its bucket, which its session does too. The
 * pageviews are the matching pageview events, counted meanwhile on another read connection.
 */
async function spannedBuckets(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  bucket: Bucket,
  settled: Settled | undefined,
): Promise<BucketCounts> {
  const e = new Params();
  const pageviews = ch.query<{ b: number; pageviews: number }>(
    `SELECT ${bucketSecondsOf(e, common, bucket)} AS b, count() AS pageviews
     FROM events WHERE ${whereClause(e, siteId, common, ["type = 'pageview'"])}
     GROUP BY b`,
    e.values,
  );
  pageviews.catch(() => {});
  const windows = spanningWindows(ch, siteId, common, bucket, settled);
  windows.catch(() => {});
  const p = new Params();
  const { rows, at } = await bucketedSessions(ch, p, siteId, common, bucket, settled);
  const near = await windows;
  const spanning =
    near.length === 0
      ? ''
      : `UNION ALL
         SELECT ${at('timestamp')} AS b, user_key AS k, 1 AS v, 0 AS started, 0 AS s_pv, 0 AS ms
         FROM events WHERE ${whereClause(p, siteId, common, [`(${inSpans(p, near)})`])}`;
  const sessions = await ch.query<SessionTotals & { b: number; users: number }>(
    `SELECT b, uniqExactIf(k, v) AS users, sum(started) AS sessions, sum(s_pv) AS session_pageviews,
       countIf(started = 1 AND s_pv = 1) AS bounces, sum(ms) AS duration_ms
     FROM (
       SELECT ${at('s_start')} AS b, s_user_key AS k, b = ${at('s_end')} AS v, 1 AS started,
         s_pageviews AS s_pv, s_ms AS ms
       FROM (${rows})
       ${spanning})
     GROUP BY b`,
    p.values,
  );
  // Every bucket with a matching event has a row here: its session's, or a spanning one's.
  const viewed = new Map((await pageviews).map((r) => [r.b, r.pageviews]));
  const events = sessions.map((r) => ({ b: r.b, pageviews: viewed.get(r.b) ?? 0, users: r.users }));
  return { events, sessions };
}

/**
 * The counted sessions of a range (rollupSessionRows) with their visitor, start, end, pageviews
 * and duration, and `at`, the start (epoch seconds) of the bucket holding an instant, both bound
 * in `p`.
 */
async function bucketedSessions(
  ch: ClickHouse,
  p: Params,
  siteId: number,
  common: CommonParams,
  bucket: Bucket,
  settled: Settled | undefined,
): Promise<{ rows: string; at: (t: string) => string }> {
  const rows = await rollupSessionRows(
    ch,
    p,
    siteId,
    common,
    ['start', 'end', 'pageviews', 'ms', 'user_key'],
    settled,
  );
  const tz = p.bind('String', common.timeZone);
  return { rows, at: (t) => `toUnixTimestamp(${BUCKET_START[bucket](t, tz)})` };
}

/**
 * Spans of time that hold every event of the sessions overlapping the range whose events lie in
 * two buckets or more (a superset: the spans of every such session of the parts read), merged
 * where they overlap. A settled part's spans are kept per part (memo.ts: they never change
 * while it lasts), the other partitions' merged at every read (FINAL: a session's rows are only
 * whole once merged).
 */
async function spanningWindows(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  bucket: Bucket,
  settled: Settled | undefined,
): Promise<Span[]> {
  const p = new Params();
  const tz = p.bind('String', common.timeZone);
  const at = (t: string) => BUCKET_START[bucket](t, tz);
  const site = `site_id = ${p.bind('UInt32', siteId)}`;
  const spans = `toString(min(session_start)) AS w_from, toString(max(session_end)) AS w_to`;
  const spanned = `${at('session_start')} != ${at('session_end')}`;
  const { from, to } = rangeBounds(p, common);
  const overlapping = [...(from ? [`session_end >= ${from}`] : []), ...(to ? [`session_start < ${to}`] : [])];
  const merged = (exclude: string) =>
    `SELECT '' AS part, ${spans} FROM session_facts FINAL
     WHERE ${[site, spanned, ...overlapping, exclude].join(' AND ')}
     GROUP BY ${at('session_start')}`;
  if (!settled) return mergedSpans((await ch.query<PartSpan>(merged('1'), p.values)).map(spanOf));
  // Each settled part's spans kept, those not kept read in one statement with the merged ones.
  const {
    values: parts,
    missing,
    supply,
  } = keptEach(
    keptSpans,
    ch,
    settled.parts,
    (part) => JSON.stringify([siteId, common.timeZone, bucket, part]),
    (rows: PartSpan[], part) => rows.filter((r) => r.part === part).map(spanOf),
  );
  // Awaited below: a failure of the statement is taken there, not left unhandled here.
  parts.catch(() => {});
  const unsettled = `_partition_id NOT IN ${p.bind('Array(String)', settled.partitions)}`;
  const rows = ch.query<PartSpan>(
    missing.length === 0
      ? merged(unsettled)
      : `SELECT _part AS part, ${spans} FROM session_facts
         WHERE ${site} AND ${spanned} AND _part IN ${p.bind('Array(String)', missing)}
         GROUP BY part, ${at('session_start')}
       UNION ALL
       ${merged(unsettled)}`,
    p.values,
  );
  supply(rows);
  const unsettledSpans = (await rows).filter((r) => r.part === '');
  return mergedSpans([...unsettledSpans.map(spanOf), ...(await parts).flat()]);
}

type PartSpan = { part: string; w_from: string; w_to: string };

const spanOf = (r: PartSpan): Span => [r.w_from, r.w_to];

/**
 * The spans of the sessions spanning buckets of a settled part (spanningWindows), by the site,
 * the zone, the bucket and the part's name.
 */
const keptSpans = memo<Span[]>(8192);

/**
 * BucketCounts of an unfiltered range from the session rollups (rollup.ts), in one read of the
 * counted sessions: a session counts in the bucket of its start; its pageviews and visitor count
 * there too when it ends in the same bucket. Only the sessions spanning buckets are taken apart,
 * into their keys in `session_paths` (visitors are told apart by their 64-bit keys, rollup.ts).
 */
async function rollupBuckets(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  bucket: Bucket,
  settled: Settled | undefined,
): Promise<BucketCounts> {
  const p = new Params();
  const { rows, at } = await bucketedSessions(ch, p, siteId, common, bucket, settled);
  // The sessions spanning buckets, from their keys in `session_paths` (every event is one, with
  // its time): the buckets they have events in, and their pageviews in each.
  const spanning = (settledPaths: Settled | undefined) => {
    const inRange = keyInRange(p, common);
    const bucketsOf = (keys: string) =>
      `arrayMap(x -> ${at(`fromUnixTimestamp64Milli(toInt64(${keyMs('x')}), 'UTC')`)}, arrayFilter(x -> ${inRange('x')}, ${keys}))`;
    const keyed = pathRows(
      p,
      siteId,
      common,
      () => 'user_key, page_keys, event_keys, other_keys',
      settledPaths,
      `${at('session_start')} != ${at('session_end')}`,
    );
    return `SELECT b, k, countEqual(c_pages, b) AS pv FROM (
        SELECT user_key AS k, ${bucketsOf('page_keys')} AS c_pages,
          arrayConcat(c_pages, ${bucketsOf('arrayConcat(event_keys, other_keys)')}) AS c_all
        FROM (${keyed})
        WHERE length(c_all) > 0 AND arrayMin(c_all) != arrayMax(c_all))
      ARRAY JOIN arrayDistinct(c_all) AS b`;
  };
  // Per bucket, the events' pageviews and visitors (`e_`: a session's own when it lies in one
  // bucket, else its keys') beside the totals of the sessions starting there.
  const counted = await readRollup(
    ch,
    (settledPaths) =>
      ch.query<EventRow & SessionTotals>(
        `SELECT b, sum(e_pv) AS pageviews, uniqExactIf(k, e_visitor) AS users,
           sum(started) AS sessions, sum(s_pv) AS session_pageviews,
           countIf(started = 1 AND s_pv = 1) AS bounces, sum(s_ms) AS duration_ms
         FROM (
           SELECT b, k, if(one_bucket, pv, 0) AS e_pv, one_bucket AS e_visitor, 1 AS started, pv AS s_pv, ms AS s_ms
           FROM (SELECT ${at('s_start')} AS b, ${at('s_start')} = ${at('s_end')} AS one_bucket,
                   s_user_key AS k, s_pageviews AS pv, s_ms AS ms
                 FROM (${rows}))
           UNION ALL
           SELECT b, k, pv AS e_pv, 1 AS e_visitor, 0 AS started, 0 AS s_pv, 0 AS s_ms
           FROM (${spanning(settledPaths)}))
         GROUP BY b`,
        p.values,
      ),
    'session_paths',
  );
  return { events: counted, sessions: counted };
}

/**
 * BucketCounts of an unfiltered range whose buckets are runs of whole quarter hours
 * (quartersApply), added up per quarter hour: the settled days whose sessions lie in the range
 * from their summaries, the other days' sessions from their keys in `session_paths`, and every
 * bucket's visitors from `visitor_hours` where the buckets are whole UTC hours within a UTC
 * day or across one midnight (hours and days in most zones), else from `visitor_quarters`
 * (quarters.ts).
 */
async function quarterBuckets(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  bucket: Bucket,
  range: BucketRange,
): Promise<BucketCounts> {
  // The visitors' read is sent first: it runs beside the sessions' reads (on the embedded
  // engine too, on another read connection, docs/decisions.md). Its failure is taken where it
  // is awaited (a handler attached now keeps it from counting as unhandled if another fails
  // first).
  // Buckets of whole UTC hours within a UTC day or across one midnight count their visitors as
  // rows of `visitor_hours` (those across a midnight not on a cluster); others from the quarter
  // hours. The counts of settled days' buckets are kept for the next reads.
  const hours = hourBuckets(range);
  const visitors =
    hours && !(ch.cluster && hours.some((b) => b.segments.length === 2))
      ? readRollup(ch, (settled) => hourBucketVisitors(ch, siteId, hours, settled), 'visitor_hours').then(
          async ({ visitors, fresh }) => {
            await keepBucketVisitors(ch, fresh).catch(() => {});
            return visitors;
          },
        )
      : bucketVisitors(ch, siteId, range, (p, t) =>
          BUCKET_START[bucket](t, p.bind('String', common.timeZone)),
        );
  visitors.catch(() => {});
  const quarters = await readRollup(
    ch,
    async (settled) => {
      const days = await quarterDays(ch, siteId, common, settled);
      const live = await liveQuarters(ch, siteId, common, settled, days?.partitions ?? []);
      return [...(days?.counts.byValue.values() ?? []), ...live.byValue.values()];
    },
    'session_paths',
  );
  const users = await visitors;
  const rows = new Map<number, EventRow & SessionTotals & { b: number }>();
  const rowOf = (b: number) => {
    let row = rows.get(b);
    if (!row) {
      row = { b, pageviews: 0, users: 0, sessions: 0, session_pageviews: 0, bounces: 0, duration_ms: 0 };
      rows.set(b, row);
    }
    return row;
  };
  const bucketOf = bucketOfQuarter(range);
  for (const c of quarters) {
    const b = bucketOf(Number(c.v));
    // Summarized days' sessions lie in the range and the others' keys were taken in it.
    if (b === undefined) throw new Error(`quarter ${c.v} is outside the range`);
    const row = rowOf(b);
    row.sessions += c.n_sessions;
    row.session_pageviews += c.n_events;
    row.bounces += c.bounces;
    row.duration_ms += c.top_ms;
    row.pageviews += c.top_n;
  }
  for (const [b, n] of users) rowOf(b).users = n;
  const all = [...rows.values()];
  return { events: all, sessions: all };
}

/**
 * The starts (epoch seconds) of the buckets between two instants, both included: instants
 * sampled across the span, each mapped to its bucket by the same function the counts use. The
 * instants are the range's local midnights; an open side takes the buckets `seen` (epoch
 * seconds of the answer's rows): an open start the earliest of them, an open end now or the
 * latest of them, if later. An open start with nothing seen has no buckets. At most
 * MAX_BUCKETS + 1 are returned.
 */
async function listBuckets(
  ch: ClickHouse,
  common: CommonParams,
  bucket: Bucket,
  seen: number[] = [],
): Promise<number[]> {
  return (await bucketStarts(ch, common, bucket, seen)).starts;
}

/**
 * listBuckets, with the instants (epoch seconds) the buckets are listed between: the first, and
 * the one after the last.
 */
async function bucketStarts(
  ch: ClickHouse,
  common: CommonParams,
  bucket: Bucket,
  seen: number[] = [],
): Promise<BucketRange> {
  if (common.startDate === undefined || common.endDate === undefined)
    return sampledBuckets(ch, common, bucket, seen);
  // A closed range's buckets are the zone's calendar alone: the same at every read.
  const key = JSON.stringify([common.startDate, common.endDate, common.timeZone, bucket]);
  const range = await keptBuckets.read(ch, key, () => sampledBuckets(ch, common, bucket));
  return { ...range, starts: [...range.starts] };
}

/**
 * The buckets of closed ranges (memo.ts), by the dates, the zone and the bucket: a statement's
 * fixed cost, 8-15 ms at the start of every bucketed answer at 10 M events (docs/benchmarks.md).
 */
const keptBuckets = memo<BucketRange>(256);

async function sampledBuckets(
  ch: ClickHouse,
  common: CommonParams,
  bucket: Bucket,
  seen: number[] = [],
): Promise<BucketRange> {
  if (common.startDate === undefined && seen.length === 0) return { from: 0, to: 0, starts: [] };
  const open = {
    first: common.startDate === undefined ? Math.min(...seen) : undefined,
    last: common.endDate === undefined ? Math.max(Math.floor(Date.now() / 1000), ...seen) : undefined,
  };
  const p = new Params();
  const tz = p.bind('String', common.timeZone);
  const midnight = (date: string) =>
    `toUInt32(toUnixTimestamp(toDateTime(${p.bind('String', `${date} 00:00:00`)}, ${tz})))`;
  const from = common.startDate ? midnight(common.startDate) : p.bind('UInt32', open.first ?? 0);
  const to = common.endDate ? `(${midnight(nextDay(common.endDate))} - 1)` : p.bind('UInt32', open.last ?? 0);
  const rows = await ch.query<{ b: number; r_from: number; r_to: number }>(
    `SELECT DISTINCT toUnixTimestamp(${BUCKET_START[bucket]("toDateTime(x, 'UTC')", tz)}) AS b,
       ${from} AS r_from, toUInt32(${to}) + 1 AS r_to
     FROM (SELECT arrayJoin(arrayConcat(range(${from}, toUInt32(${to}), ${p.bind('UInt32', SAMPLE_STEP_S[bucket])}), [toUInt32(${to})])) AS x)
     WHERE x >= ${from}
     ORDER BY b
     LIMIT ${p.bind('UInt32', MAX_BUCKETS + 1)}`,
    p.values,
  );
  return {
    from: Number(rows[0]?.r_from ?? 0),
    to: Number(rows[0]?.r_to ?? 0),
    starts: rows.map((r) => Number(r.b)),
  };
}

/**
 * Rows keyed by the start of their bucket (`b`, epoch seconds) spread over every bucket of the
 * range, oldest first, aligned as `overview-bucketed` aligns them (`row` undefined where a
 * bucket has none; an open side as `listBuckets` takes it). Undefined when the range holds
 * more than MAX_BUCKETS buckets.
 */
export async function overBuckets<R extends { b: number }>(
  ch: ClickHouse,
  common: CommonParams,
  bucket: Bucket,
  rows: R[],
): Promise<{ time: string; row: R | undefined }[] | undefined> {
  const starts = await listBuckets(
    ch,
    common,
    bucket,
    rows.map((r) => r.b),
  );
  if (starts.length > MAX_BUCKETS) return undefined;
  const byBucket = new Map(rows.map((r) => [r.b, r]));
  return starts.map((b) => ({ time: isoFromSeconds(b), row: byBucket.get(b) }));
}

/** A closed range certainly holding more than MAX_BUCKETS buckets (checked before any read). */
export function exceedsBucketLimit(common: CommonParams, bucket: Bucket): boolean {
  if (common.startDate === undefined || common.endDate === undefined) return false;
  return daysBetween(common.startDate, common.endDate) * PER_DAY[bucket] > MAX_BUCKETS + 100;
}

/** `toUnixTimestamp` of the start of the bucket holding `timestamp`, in the range's time zone. */
export function bucketSecondsOf(p: Params, common: CommonParams, bucket: Bucket): string {
  return `toUnixTimestamp(${BUCKET_START[bucket]('timestamp', p.bind('String', common.timeZone))})`;
}
