import type { ClickHouse } from '../../client';
import { type CommonParams, Params } from '../builder';
import {
  type CountRows,
  changingPartitions,
  keptPartitions,
  partitionCounts,
  type Rollup,
  SESSION_PATHS,
} from './increments';
import { keyInRange, keyMs, pathRows } from './paths';
import { fromRollup, type Settled } from './rollup';
import {
  addCounts,
  emptyCounts,
  inPartitions,
  type KeyedCounts,
  mergeCounts,
  summarizedDays,
  type ValueCounts,
} from './summaries';

/**
 * Unfiltered buckets from quarter hours (docs/decisions.md): a bucket of fifteen minutes or
 * more, in a zone whose offsets are whole quarter hours, is a run of whole UTC quarter hours.
 * Its distinct visitors are then those of its quarter hours in `visitor_quarters` (migration
 * 0011), the sessions of a settled day lying wholly in the range add up per quarter hour from
 * that day's summary (`quarters`, summaries.ts), and the other days' sessions are counted the
 * same way from their keys in range (liveQuarters).
 */

const QUARTER_S = 900;

/** A closed range's instants (epoch seconds: its start, and the instant after its end) and bucket starts. */
export interface BucketRange {
  from: number;
  to: number;
  starts: number[];
}

/** Buckets the quarter hours serve: those of fifteen minutes or longer. */
const QUARTERED = new Set(['fifteen_minutes', 'hour', 'day', 'week', 'month']);

/**
 * Most quarter hours a range may span to be read by quarter hour (those of 2,000 days, the most
 * day buckets an answer holds): the visitors' read maps each of them to its bucket once.
 */
const MAX_QUARTERS = 2000 * 96;

/**
 * Whether the buckets of a closed range are runs of whole quarter hours: the range's bounds and
 * every bucket's start fall on one (a week or month bucket may start before the range).
 */
export const quartersApply = (bucket: string, range: BucketRange | undefined): range is BucketRange =>
  range !== undefined &&
  QUARTERED.has(bucket) &&
  (range.to - range.from) / QUARTER_S <= MAX_QUARTERS &&
  [range.from, range.to, ...range.starts].every((s) => s % QUARTER_S === 0);

/**
 * The bucket (its start) holding each quarter hour of the range, by binary search over the
 * starts, which are sorted and aligned.
 */
export function bucketOfQuarter(range: BucketRange): (quarter: number) => number | undefined {
  return (quarter) => {
    const t = quarter * QUARTER_S;
    if (t < range.from || t >= range.to) return undefined;
    let lo = 0;
    let hi = range.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (range.starts[mid]! <= t) lo = mid;
      else hi = mid - 1;
    }
    return range.starts[lo];
  };
}

/**
 * Distinct visitors per bucket (start, epoch seconds) of a range's events, unfiltered: the keys
 * of `visitor_quarters` in the range's quarter hours, each quarter hour mapped to its bucket by
 * `bucketStart` (the same function the other counts use), computed once per quarter hour of the
 * range rather than per row.
 */
export async function bucketVisitors(
  ch: ClickHouse,
  siteId: number,
  range: BucketRange,
  bucketStart: (p: Params, time: string) => string,
): Promise<Map<number, number>> {
  const p = new Params();
  const q0 = p.bind('UInt32', range.from / QUARTER_S);
  const q1 = p.bind('UInt32', range.to / QUARTER_S);
  const rows = await ch.query<{ b: number; users: number }>(
    `WITH arrayMap(q -> toUnixTimestamp(${bucketStart(p, `toDateTime(q * ${QUARTER_S}, 'UTC')`)}), range(${q0}, ${q1})) AS bucket_of
     SELECT bucket_of[quarter - ${q0} + 1] AS b, uniqExact(user_key) AS users
     FROM visitor_quarters
     WHERE site_id = ${p.bind('UInt32', siteId)} AND quarter >= ${q0} AND quarter < ${q1}
     GROUP BY b`,
    p.values,
  );
  return new Map(rows.map((r) => [Number(r.b), Number(r.users)]));
}

const HOUR_S = 3600;
const DAY_S = 86_400;
/** How long after a UTC day's end its buckets' counts may be kept (hourBucketVisitors). */
const KEEP_AFTER_MS = 3_600_000;

/**
 * A bucket (its start) and its hours in range: the instants they span (epoch seconds, `to`
 * excluded), and per UTC day they lie in (days since 1970, one or two) their bits in it.
 */
export interface HourBucket {
  start: number;
  from: number;
  to: number;
  segments: [day: number, hours: number][];
}

/**
 * The buckets of a closed range as runs of whole UTC hours within one UTC day or across one UTC
 * midnight (an hour or a day in a zone whose offsets are whole hours), clipped to the range;
 * undefined when they are not (a week, a month, a zone half an hour off).
 */
export function hourBuckets(range: BucketRange): HourBucket[] | undefined {
  if (![range.from, range.to, ...range.starts].every((s) => s % HOUR_S === 0)) return undefined;
  const buckets: HourBucket[] = [];
  for (let i = 0; i < range.starts.length; i++) {
    const from = Math.max(range.starts[i]!, range.from);
    const to = Math.min(range.starts[i + 1] ?? range.to, range.to);
    if (from >= to) continue;
    const first = Math.floor(from / DAY_S);
    const last = Math.floor((to - 1) / DAY_S);
    if (last - first > 1) return undefined;
    const segments: [number, number][] = [];
    for (let day = first; day <= last; day++) {
      let hours = 0;
      for (let t = Math.max(from, day * DAY_S); t < Math.min(to, (day + 1) * DAY_S); t += HOUR_S)
        hours |= 1 << ((t - day * DAY_S) / HOUR_S);
      segments.push([day, hours >>> 0]);
    }
    buckets.push({ start: range.starts[i]!, from, to, segments });
  }
  return buckets;
}

/** A bucket's visitors as stored in `bucket_visitors` (migration 0018). */
export interface BucketVisitorsRow {
  site_id: number;
  start: number;
  end: number;
  parts: string;
  users: number;
}

/**
 * Distinct visitors per bucket (start, epoch seconds) of hourBuckets, from `visitor_hours`
 * (migration 0017): one row per visitor and UTC day with its hours as bits, each visitor once in
 * a day's rows (settled parts as they are, the rest merged: readRollup gives `settled`). A
 * bucket within one day has as visitors the rows of its day whose bits meet its hours: rows
 * counted, no key hashed (the rows grouped by their bits first, a few thousand a day). One
 * across a UTC midnight has those of both days less the visitors of both (|A ∪ B| = |A| + |B| −
 * |A ∩ B|, one side's keys a set the other's rows are tested against): dearer than a distinct
 * count over the quarter hours. A bucket's count is a number of its days' parts: once they are
 * settled and ended over an hour ago it is kept (`bucket_visitors`, 0018) and read again while
 * they are the same, so a read counts only the buckets of days still changing (today's);
 * `fresh` are the counts to keep. Not on
 * a cluster for buckets across a midnight (a visitor's two days may lie on two shards).
 */
export async function hourBucketVisitors(
  ch: ClickHouse,
  siteId: number,
  buckets: HourBucket[],
  settled: Settled | undefined,
): Promise<{ visitors: Map<number, number>; fresh: BucketVisitorsRow[] }> {
  const partOf = new Map((settled?.partitions ?? []).map((d, i) => [d, settled!.parts[i]!]));
  // Days ended over an hour ago: a day still receiving events, in one part between two
  // inserts, would be counted and kept again after each of them.
  const keptBefore = Date.now() - KEEP_AFTER_MS;
  // Each bucket's settled parts (undefined while a day of it may change) and its stored key.
  const keyed = buckets.map((b) => {
    const parts = b.segments.map(([day]) => partOf.get(String(day)));
    const settledDays =
      b.segments.every(([day]) => (day + 1) * DAY_S * 1000 <= keptBefore) &&
      parts.every((x) => x !== undefined);
    return settledDays ? { b, parts: parts.join(' '), key: `${b.from} ${b.to} ${parts.join(' ')}` } : { b };
  });
  const stored = new Map<string, number>();
  const starts = keyed.flatMap((k) => (k.key === undefined ? [] : [k.b.from]));
  if (starts.length > 0) {
    const rows = await ch.query<{ k: string; users: number }>(
      `SELECT concat(toString(start), ' ', toString(end), ' ', parts) AS k, max(users) AS users
       FROM bucket_visitors
       WHERE site_id = {site:UInt32} AND start IN {starts:Array(UInt32)}
       GROUP BY start, end, parts`,
      { site: siteId, starts },
    );
    for (const r of rows) stored.set(r.k, Number(r.users));
  }
  const counted = await countHourBuckets(
    ch,
    siteId,
    keyed.flatMap((k) => (k.key !== undefined && stored.has(k.key) ? [] : [k.b])),
    settled,
  );
  const visitors = new Map<number, number>();
  const fresh: BucketVisitorsRow[] = [];
  for (const { b, parts, key } of keyed) {
    const kept = key === undefined ? undefined : stored.get(key);
    const n = kept ?? counted.get(b.start) ?? 0;
    if (parts !== undefined && kept === undefined)
      fresh.push({ site_id: siteId, start: b.from, end: b.to, parts, users: n });
    if (n > 0) visitors.set(b.start, n);
  }
  return { visitors, fresh };
}

/** Keeps counts of hourBucketVisitors (`fresh`); a failure only leaves them to be counted again. */
export async function keepBucketVisitors(ch: ClickHouse, fresh: BucketVisitorsRow[]): Promise<void> {
  if (fresh.length === 0) return;
  await ch.writer.insert({ table: 'bucket_visitors', values: fresh, format: 'JSONEachRow' });
}

/**
 * The visitors of some buckets of hourBuckets from the rows of their days (hourBucketVisitors).
 * A day still changing (today's: in several parts while written, or in one part between two
 * writes, changingPartitions) between days that are not is counted apart and kept between reads
 * (keptDayCounts); the other days together.
 */
async function countHourBuckets(
  ch: ClickHouse,
  siteId: number,
  buckets: HourBucket[],
  settled: Settled | undefined,
): Promise<Map<number, number>> {
  if (buckets.length === 0) return new Map();
  const days = [...new Set(buckets.flatMap((b) => b.segments.map(([day]) => day)))];
  const d0 = Math.min(...days);
  const width = Math.max(...days) - d0 + 1;
  // Per day: the hours of each bucket in it; of the bucket going on into the next day (tails),
  // and of the one begun the day before (heads).
  const hoursOf: number[][] = Array.from({ length: width }, () => []);
  const tails = new Array<number>(width).fill(0);
  const heads = new Array<number>(width).fill(0);
  for (const { segments } of buckets) {
    for (const [day, hours] of segments) hoursOf[day - d0]!.push(hours);
    if (segments.length === 2) {
      tails[segments[0]![0] - d0] = segments[0]![1];
      heads[segments[1]![0] - d0] = segments[1]![1];
    }
  }
  const changing = changingPartitions(settled, Number);
  const merging = (day: number) => changing.has(String(day));
  const apart = days.filter((d) => merging(d) && !merging(d - 1) && !merging(d + 1));
  const kept = apart.map((day) =>
    keptDayCounts(ch, siteId, settled!, day, changing.get(String(day))!, { d0, hoursOf, tails, heads }),
  );
  // The other days, and the buckets across a midnight neither side of which is kept apart.
  const near = (d: number) => apart.includes(d);
  const rest = restHourCounts(
    ch,
    siteId,
    settled,
    days.filter((d) => !near(d)),
    d0,
    hoursOf,
    tails.map((t, i) => (near(d0 + i) || near(d0 + i + 1) ? 0 : t)),
    heads.map((h, i) => (near(d0 + i) || near(d0 + i - 1) ? 0 : h)),
  );
  const users = new Map<string, number>();
  const shared = new Map<number, number>();
  for (const counts of await Promise.all([rest, ...kept]))
    for (const { v, n_sessions } of counts.byValue.values()) {
      const [kind, day, hours] = v.split(' ');
      if (kind === 'both') shared.set(Number(day), (shared.get(Number(day)) ?? 0) + n_sessions);
      else users.set(`${day} ${hours}`, (users.get(`${day} ${hours}`) ?? 0) + n_sessions);
    }
  return new Map(
    buckets.map(({ start, segments }) => [
      start,
      segments.reduce((sum, [day, hours]) => sum + (users.get(`${day} ${hours}`) ?? 0), 0) -
        (segments.length === 2 ? (shared.get(segments[0]![0]) ?? 0) : 0),
    ]),
  );
}

/**
 * Visitor counts as KeyedCounts (the count in `n_sessions`): `hours <day> <bits>`, the visitors
 * of a day with an hour among the bits, and `both <day>`, those of a bucket across that day's
 * midnight on both sides.
 */
const visitorCount = (v: string, n: number | string): ValueCounts => ({
  v,
  n_sessions: Number(n),
  n_events: 0,
  bounces: 0,
  top_ms: 0,
  top_n: 0,
});

/** countHourBuckets' counts of `days` (none kept apart) and of the buckets across their midnights. */
async function restHourCounts(
  ch: ClickHouse,
  siteId: number,
  settled: Settled | undefined,
  days: number[],
  d0: number,
  hoursOf: number[][],
  tails: number[],
  heads: number[],
): Promise<KeyedCounts> {
  const counts = emptyCounts();
  if (days.length === 0) return counts;
  const p = new Params();
  const first = p.bind('UInt32', d0);
  const site = p.bind('UInt32', siteId);
  const inDays = p.bind('Array(UInt32)', days);
  const rows = (columns: string) =>
    fromRollup(p, `site_id = ${site} AND day IN ${inDays}`, () => columns, settled, 'visitor_hours');
  const counted = ch.query<{ d: number; h: number; users: number }>(
    `SELECT d, h, sum(n) AS users FROM (
       SELECT day AS d, hours AS bits, count() AS n FROM (${rows('day, hours')}) GROUP BY d, bits)
     ARRAY JOIN arrayFilter(h -> bitAnd(bits, h) != 0, ${p.bind('Array(Array(UInt32))', hoursOf)}[d - ${first} + 1]) AS h
     GROUP BY d, h`,
    p.values,
  );
  counted.catch(() => {});
  // The visitors of both days of each bucket across a midnight, by its first day.
  const at = (values: number[]) => `${p.bind('Array(UInt32)', values)}[day - ${first} + 1]`;
  const bits = (values: number[]) => values.reduce((n, v) => n + popCount(v), 0);
  // The side with fewer hours as the set; the other's rows, a day later or earlier, tested
  // against it; each count by the bucket's first day.
  const [probe, set, shift, firstDay] =
    bits(tails) <= bits(heads) ? [heads, tails, '- 1', 'day - 1'] : [tails, heads, '+ 1', 'day'];
  const both = tails.some((t) => t !== 0)
    ? await ch.query<{ d: number; n: number }>(
        `SELECT ${firstDay} AS d, count() AS n FROM (${rows('day, user_key, hours')})
         WHERE bitAnd(hours, ${at(probe)}) != 0
           AND (day ${shift}, user_key) IN (
             SELECT day, user_key FROM (${rows('day, user_key, hours')}) WHERE bitAnd(hours, ${at(set)}) != 0)
         GROUP BY d`,
        p.values,
      )
    : [];
  for (const r of await counted) addCounts(counts, visitorCount(`hours ${r.d} ${r.h}`, r.users));
  for (const r of both) addCounts(counts, visitorCount(`both ${r.d}`, r.n));
  return counts;
}

const VISITOR_HOURS: Rollup = { table: 'visitor_hours', entity: '(day, user_key)' };

/**
 * countHourBuckets' counts of one day still changing, in `parts`, whose neighbours are not (they
 * are settled or hold nothing): its visitors per bucket hours, and, as its own visitors' counts,
 * those of the buckets across its two midnights found on both sides (the neighbours' rows are
 * fixed by the key: their part's name). Kept between reads (partitionCounts).
 */
function keptDayCounts(
  ch: ClickHouse,
  siteId: number,
  settled: Settled,
  day: number,
  parts: string[],
  bits: { d0: number; hoursOf: number[][]; tails: number[]; heads: number[] },
): Promise<KeyedCounts> {
  const at = (values: number[], d: number) => values[d - bits.d0] ?? 0;
  const hours = bits.hoursOf[day - bits.d0] ?? [];
  // The bits of the buckets across the midnight before the day and after it, on either side.
  const before = [at(bits.tails, day - 1), at(bits.heads, day)];
  const after = [at(bits.tails, day), at(bits.heads, day + 1)];
  const partOf = (d: number) => settled.parts[settled.partitions.indexOf(String(d))] ?? '';
  const key = JSON.stringify([
    'visitors',
    siteId,
    day,
    hours,
    before,
    after,
    partOf(day - 1),
    partOf(day + 1),
  ]);
  const count: CountRows = async (restrict) => {
    const p = new Params();
    const site = p.bind('UInt32', siteId);
    const rowsOf = (d: number, final: boolean) =>
      fromRollup(
        p,
        `site_id = ${site} AND day = ${p.bind('UInt32', d)}${final ? ` AND ${restrict(p)}` : ''}`,
        () => 'day, user_key, hours',
        final ? undefined : settled,
        'visitor_hours',
      );
    // Each visitor of the day once per count it is in, as a text naming the count.
    const across = (own: number, other: number, d: number, name: string) =>
      own === 0 || other === 0
        ? []
        : [
            `if(bitAnd(hours, ${p.bind('UInt32', own)}) != 0 AND (${p.bind('UInt32', d)}, user_key) IN (
               SELECT day, user_key FROM (${rowsOf(d, false)}) WHERE bitAnd(hours, ${p.bind('UInt32', other)}) != 0),
               [${p.bind('String', name)}], [])`,
          ];
    const named = [
      `arrayMap(h -> concat(${p.bind('String', `hours ${day} `)}, toString(h)),
         arrayFilter(h -> bitAnd(hours, h) != 0, ${p.bind('Array(UInt32)', hours)}))`,
      ...across(before[1]!, before[0]!, day - 1, `both ${day - 1}`),
      ...across(after[0]!, after[1]!, day + 1, `both ${day}`),
    ];
    const rows = await ch.query<{ v: string; n: number }>(
      `SELECT arrayJoin(arrayConcat(${named.join(', ')})) AS v, count() AS n
       FROM (${rowsOf(day, true)}) GROUP BY v`,
      p.values,
    );
    const counts = emptyCounts();
    for (const r of rows) addCounts(counts, visitorCount(r.v, r.n));
    return counts;
  };
  return partitionCounts(ch, VISITOR_HOURS, siteId, String(day), parts, key, count);
}

function popCount(v: number): number {
  let n = 0;
  for (let x = v >>> 0; x !== 0; x &= x - 1) n++;
  return n;
}

/**
 * The settled days of an unfiltered range whose sessions lie wholly in it, summarized per UTC
 * quarter hour (the `quarters` summaries of `session_paths`, whole partitions): for each quarter
 * hour, the sessions starting in it (`n_sessions`) with their pageviews (`n_events`), bounces and
 * durations in milliseconds (`top_ms`), and the pageviews in it (`top_n`). Undefined when none
 * apply. Call within readRollup(…, 'session_paths'), which gives `settled`.
 */
export function quarterDays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
): ReturnType<typeof summarizedDays> {
  return summarizedDays(
    ch,
    siteId,
    common,
    'quarters',
    settled,
    async (days, parts) => {
      const p = new Params();
      const rows = await ch.query<ValueCounts & { day: string }>(
        quarterCounts(
          `SELECT _partition_id AS day, page_keys, event_keys, other_keys FROM session_paths
           WHERE site_id = ${p.bind('UInt32', siteId)} AND _part IN ${p.bind('Array(String)', parts)}`,
          () => '1',
          true,
        ),
        p.values,
      );
      const byDay = new Map<number, KeyedCounts>(
        days.map((day) => [day, { byValue: new Map(), all_sessions: 0, all_events: 0 }]),
      );
      for (const r of rows) {
        const counts = byDay.get(Number(r.day));
        if (!counts) continue;
        addCounts(counts, r);
        counts.all_sessions += Number(r.n_sessions);
        counts.all_events += Number(r.top_n);
      }
      return byDay;
    },
    { table: 'session_paths' },
  );
}

/**
 * Per UTC quarter hour (`v`, as text), over the sessions of `source` (rows of `session_paths`
 * with its key arrays, and `day` when `byDay`): the sessions whose first event in range lies in
 * it (`n_sessions`) with their pageviews in range (`n_events`), bounces and durations in range in
 * milliseconds (`top_ms`), and the pageviews in range that lie in it (`top_n`). A key is in range
 * when `inRange(key)` holds; a session with none is left out. Keys carry their event's time, so
 * a session crossing the range's ends is counted over its events in range as SPEC 13 says.
 */
function quarterCounts(source: string, inRange: (key: string) => string, byDay: boolean): string {
  const day = byDay ? 'day, ' : '';
  const msOf = (keys: string) =>
    `arrayMap(x -> toInt64(${keyMs('x')}), arrayFilter(x -> ${inRange('x')}, ${keys}))`;
  const quarter = (ms: string) => `intDiv(${ms}, ${QUARTER_S * 1000})`;
  // A subquery level per step (an alias is expanded into each of its uses when planned); each
  // session as one tuple under its start's quarter hour and one per pageview under its own.
  return `SELECT ${day}toString(tupleElement(t, 1)) AS v, sum(tupleElement(t, 2)) AS n_sessions,
      sum(tupleElement(t, 3)) AS n_events, sum(tupleElement(t, 4)) AS bounces,
      sum(tupleElement(t, 5)) AS top_ms, sum(tupleElement(t, 6)) AS top_n
    FROM (
      SELECT ${day}arrayJoin(arrayConcat(
          [(${quarter('arrayMin(all_ms)')}, toUInt64(1), toUInt64(length(pv_ms)), toUInt64(length(pv_ms) = 1),
            arrayMax(all_ms) - arrayMin(all_ms), toUInt64(0))],
          arrayMap(m -> (${quarter('m')}, toUInt64(0), toUInt64(0), toUInt64(0), toInt64(0), toUInt64(1)), pv_ms))) AS t
      FROM (
        SELECT ${day}pv_ms, arrayConcat(pv_ms, other_ms) AS all_ms FROM (
          SELECT ${day}${msOf('page_keys')} AS pv_ms, ${msOf('arrayConcat(event_keys, other_keys)')} AS other_ms
          FROM (${source}))
        WHERE length(all_ms) > 0))
    GROUP BY ${day}v`;
}

/**
 * The quarter-hour counts (quarterCounts) of the range's sessions outside the summarized
 * partitions (`summarized`, YYYYMMDD), from their keys in `session_paths`: those of the days
 * still receiving events and of days reaching out of the range. A partition still changing
 * (today's, keptPartitions) is counted apart and kept between reads, brought up to date from
 * its added parts (partitionCounts). Call within readRollup(…, 'session_paths'), which gives
 * `settled`.
 */
export async function liveQuarters(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
  summarized: number[],
): Promise<KeyedCounts> {
  const count =
    (rowsOf: Settled | undefined): CountRows =>
    async (restrict) => {
      const p = new Params();
      const rows = pathRows(
        p,
        siteId,
        common,
        () => 'page_keys, event_keys, other_keys',
        rowsOf,
        undefined,
        restrict,
      );
      const counts = emptyCounts();
      for (const r of await ch.query<ValueCounts>(
        quarterCounts(rows, keyInRange(p, common), false),
        p.values,
      ))
        addCounts(counts, r);
      return counts;
    };
  const merging = keptPartitions(settled, common).filter(([day]) => !summarized.includes(Number(day)));
  const apart = merging.map(([day]) => Number(day));
  const rest = count(settled)(
    (p) =>
      [
        ...(summarized.length > 0 ? [inPartitions(p, summarized, true)] : []),
        ...(apart.length > 0 ? [inPartitions(p, apart, true)] : []),
      ].join(' AND ') || '1',
  );
  const kept = merging.map(([day, parts]) =>
    partitionCounts(
      ch,
      SESSION_PATHS,
      siteId,
      day,
      parts,
      JSON.stringify(['quarters', siteId, common.startDate, common.endDate, common.timeZone, day]),
      count(undefined),
    ),
  );
  const all = await Promise.all([rest, ...kept]);
  const counts = emptyCounts();
  for (const c of all) mergeCounts(counts, c);
  return counts;
}
