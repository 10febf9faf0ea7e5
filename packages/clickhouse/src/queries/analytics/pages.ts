import { randomUUID } from 'node:crypto';
import type { ClickHouse } from '../../client';
import { type CommonParams, matchAny, Params, rangeBounds } from '../builder';
import { memo } from './memo';
import { keyHash, listedSessionsLimit, type PageNames, pathHash, readPageNames } from './paths';
import { type Settled, settledParts } from './rollup';
import { rowFilterCondition, rowFiltersApply, UNSURE_ROW, unsureApply } from './row-filters';
import { ADJACENT_EQUAL, addDays, inSpans, mergedSpans, NEXT_GAPS, type Span } from './shared';
import {
  addCounts,
  emptyCounts,
  endedAnHourAgo,
  isUtcZone,
  type KeyedCounts,
  sessionSpans,
  type ValueCounts,
} from './summaries';

/**
 * The filtered page breakdowns of settled days from `session_pages_by_country` (migrations 0016
 * and 0025: the rows of a build sorted by their first event's country, so that a country filter
 * reads its countries' granules only).
 *
 * Filtered, a page breakdown counts the sessions with an event in range matching every filter,
 * each with its matching pageviews (pathname, page title) or its entry or exit page (SPEC 13).
 * Read from `session_paths`, that is every counted session's keys sorted and each pageview's time
 * to the next key found, at every read: at 10 M events 29 % of a month's sessions under the
 * bench's two filters, 900 ms. `session_pages_by_country` holds that work done once per settled
 * day, one row per session beside the columns the row filters test (row-filters.ts), with the
 * path and title pairs of its pageviews: for a session lying wholly inside the range whose address
 * and browser attributes agree on every event, a pageview matches exactly when its path passes
 * the path filters, so its counts are its row's.
 *
 * A read takes the days whose build is of their current parts and whose sessions all lie in the
 * range (the build's span inside it), and from them every session but the tied ones (two keys in
 * one millisecond: their order is read from their events; or keys that do not count the
 * session's pageviews as its `session_facts` row does) and, where a filter is on an address
 * or browser attribute, the unsure ones (row-filters.ts). The range's other sessions, those of
 * the other days and these exceptions, are read as before, among the matching events only those
 * of their sessions grouped. A settled day without a build gets one (seven a read at most).
 * The filtered session totals read the same days' sessions from their rows (rollup.ts).
 */

/** The page breakdowns `session_pages_by_country` holds. */
export type PageParameter = 'pathname' | 'entry_page' | 'exit_page' | 'page_title';

/** The bits of a path's milliseconds in `page_counts`, below its number of pageviews (0016). */
const COUNT_SHIFT = 40;

/** Most distinct paths a path filter may pass for an answer to read the built rows. */
const MAX_MATCHING_PATHS = 10_000;

/** Most days one read builds (the background builder builds the rest ahead of the reads, warm.ts). */
const MAX_BUILT_DAYS = 7;

/**
 * The layout of the builds this code writes and reads (0021: titles as hashes with their counts,
 * named by the build; 0022: the unsure sessions flagged; 0025: the rows in
 * `session_pages_by_country`, where layout 2's are in `session_pages`; 0026: each row's visitor;
 * 0027: each row's paths as bits); a build of another is never read, its day built anew.
 */
const LAYOUT = 5;

/** The paths of a day that get a bit of their own in `path_bits` (0027); bit 63 stands for the others. */
const BIT_PATHS = 63;

/** The bits of a title's pageviews in `title_hash_counts`, below the title's hash (0021). */
const TITLE_COUNT_BITS = 16;
const TITLE_COUNT_LIMIT = 2 ** TITLE_COUNT_BITS - 1;

/**
 * Whether a filtered page breakdown reads its settled days from the built rows: filters the rows
 * can test (an entry or exit page filter needs `session_facts` columns the table does not copy),
 * on one server (parts are per shard on a cluster).
 */
export const sessionPagesApply = (ch: ClickHouse, common: CommonParams) =>
  !ch.cluster &&
  rowFiltersApply(ch, common) &&
  common.filters.every((f) => f.parameter !== 'entry_page' && f.parameter !== 'exit_page');

/** The days a read takes from the built rows: partitions (YYYYMMDD) and the build of each. */
export interface PageDays {
  partitions: number[];
  builds: string[];
  /** Per build, the path hashes of its rows' bits 0-62 (`bit_paths`, 0027). */
  bitPaths: bigint[][];
}

/** A settled day of both rollups: its partition and the part of each. */
interface SettledDay {
  day: number;
  facts: string;
  paths: string;
}

/** The days of both rollups each alone in one part, near the range (a day either side). */
function settledDays(common: CommonParams, facts: Settled, paths: Settled): SettledDay[] {
  const factsPart = new Map(facts.partitions.map((d, i) => [d, facts.parts[i]!]));
  const day = (date: string | undefined, shift: number) =>
    date === undefined ? undefined : Number(addDays(date, shift).replaceAll('-', ''));
  const first = day(common.startDate, -1);
  const last = day(common.endDate, 1);
  return paths.partitions.flatMap((d, i) => {
    const facts = factsPart.get(d);
    const n = Number(d);
    if (
      !facts ||
      !/^\d{8}$/.test(d) ||
      (first !== undefined && n < first) ||
      (last !== undefined && n > last)
    )
      return [];
    return [{ day: n, facts, paths: paths.parts[i]! }];
  });
}

const buildKey = (d: SettledDay) => `${d.day}/${d.facts}/${d.paths}`;

/** The engine's time zone, asked once per client (it does not change while it runs). */
const zones = new WeakMap<ClickHouse, Promise<string>>();
function engineZone(ch: ClickHouse): Promise<string> {
  let zone = zones.get(ch);
  if (!zone) {
    zone = ch.query<{ tz: string }>('SELECT timezone() AS tz').then((r) => r[0]?.tz ?? '');
    zones.set(ch, zone);
    zone.catch(() => zones.delete(ch));
  }
  return zone;
}

/**
 * The stored builds of the settled days' current parts, with whether each one's span lies inside
 * the range; and the days without one worth building for it: those that ended an hour ago and
 * whose sessions all lie in the range.
 */
async function storedBuilds(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  days: SettledDay[],
): Promise<{
  built: Map<number, { build: string; inside: boolean; bitPaths: bigint[] }>;
  unbuilt: number[];
}> {
  const p = new Params();
  const { from, to } = rangeBounds(p, common);
  const inside = (start: string, end: string) =>
    [from && `${start} >= ${from}`, to && `${end} < ${to}`].filter(Boolean).join(' AND ') || '1';
  const site = p.bind('UInt32', siteId);
  // The bits' paths as text: the embedded engine gives 64-bit numbers as JSON numbers.
  const rows = await ch.query<{ partition: number; build: string; inside: number; bits: string[] }>(
    `SELECT partition, any(build_id) AS build, any(${inside('span_start', 'span_end')}) AS inside,
       any(arrayMap(h -> toString(h), bit_paths)) AS bits
     FROM session_pages_builds
     WHERE site_id = ${site}
       AND concat(toString(partition), '/', facts_part, '/', paths_part) IN ${p.bind('Array(String)', days.map(buildKey))}
       AND layout = ${LAYOUT}
     GROUP BY partition`,
    p.values,
  );
  const built = new Map(
    rows.map((r) => [
      Number(r.partition),
      { build: String(r.build), inside: Number(r.inside) === 1, bitPaths: r.bits.map((h) => BigInt(h)) },
    ]),
  );
  // As for the summaries, partition days must be UTC days (the engine in UTC): a day is built
  // once it ended an hour ago (a day still receiving events would be built again at every
  // merge), and only where its sessions all lie in the range.
  if (!isUtcZone(await engineZone(ch))) return { built, unbuilt: [] };
  const missing = days.filter((d) => !built.has(d.day) && endedAnHourAgo(d.day));
  if (missing.length === 0) return { built, unbuilt: [] };
  const spans = await sessionSpans(
    ch,
    siteId,
    common,
    missing.map((d) => ({ day: d.day, part: d.paths })),
    'session_paths',
  );
  return { built, unbuilt: missing.filter((d) => spans.get(d.day)?.inside).map((d) => d.day) };
}

/**
 * `path_bits` (0027) of a row whose path hashes are `paths`, its build's bit paths `top`: bit i
 * for `top`'s i-th path, bit 63 for any path not in it. The expression, and not a number
 * computed here, so that a test can give its own rows their bits.
 */
export const pathBits = (paths: string, top: string) =>
  `arrayReduce('groupBitOr', arrayMap(x -> toUInt64(if(has(${top}, x),
     bitShiftLeft(toUInt64(1), toUInt8(indexOf(${top}, x) - 1)), bitShiftLeft(toUInt64(1), 63))), ${paths}))`;

/**
 * The condition on a row of the builds of `days` that its session holds one of the `passing`
 * path hashes: a bit of its build's passing bit paths (one number per build, a constant where
 * all builds give the same), or bit 63 and a passing path in its `paths`, tested only in the
 * builds a passing path lies outside the bit paths of (a build of fewer than 63 paths has every
 * path of its day among them). The `paths` array is then read only for those; with the bench's
 * path filter, never (docs/benchmarks.md).
 */
export function builtPathTest(p: Params, days: PageDays, passing: bigint[]): string {
  const set = new Set(passing);
  const masks = days.bitPaths.map((top) =>
    top.reduce((mask, h, i) => (set.has(h) ? mask | (1n << BigInt(i)) : mask), 0n),
  );
  const outside = days.partitions.filter((_, i) => {
    const top = new Set(days.bitPaths[i]);
    return top.size === BIT_PATHS && [...set].some((h) => !top.has(h));
  });
  const mask = masks.every((m) => m === masks[0])
    ? p.bind('UInt64', masks[0] ?? 0n)
    : `transform(partition, ${p.bind('Array(UInt32)', days.partitions)}, ${p.bind('Array(UInt64)', masks)}, toUInt64(0))`;
  const rest =
    outside.length === 0
      ? ''
      : ` OR (bitTest(path_bits, 63) AND partition IN ${p.bind('Array(UInt32)', outside)}
          AND arrayExists(x -> x IN ${p.bind('Array(UInt64)', passing)}, paths))`;
  return `(bitAnd(path_bits, ${mask}) != 0${rest})`;
}

/**
 * Builds one settled day of a site: its sessions' rows from the day's two parts, then the row
 * naming the build (its span and sessions counted from the rows stored).
 */
async function buildDay(ch: ClickHouse, siteId: number, d: SettledDay): Promise<void> {
  const build = randomUUID();
  // The day's paths that get a bit of their own: those most of its sessions hold, their bits in
  // one fixed order (of their hashes' decimal text, the alias sorting), so that days of the same
  // paths give a filter the same mask (as text: the embedded engine gives 64-bit numbers as JSON
  // numbers).
  const top = await ch.query<{ h: string }>(
    `SELECT toString(h) AS h FROM (
       SELECT h FROM (
         SELECT arrayJoin(paths) AS h, count() AS n FROM session_facts
         WHERE site_id = {site:UInt32} AND _part = {facts:String} GROUP BY h)
       ORDER BY n DESC, h ASC LIMIT ${BIT_PATHS})
     ORDER BY h`,
    { site: siteId, facts: d.facts },
  );
  const values = {
    site: siteId,
    day: d.day,
    build,
    facts: d.facts,
    paths: d.paths,
    top: top.map((r) => BigInt(r.h)),
  };
  const hash = keyHash('x');
  await ch.command(
    `INSERT INTO session_pages_by_country (site_id, partition, build_id, session_id, session_start, session_end,
       user_key, first_event, paths, path_bits, constants_low, constants_high, pageviews, tied, unsure, page_hashes,
       page_counts, title_paths, titles, title_hash_counts, entry_hash, entry_gap, exit_hash, exit_gap)
     SELECT f.site_id, {day:UInt32}, {build:UUID}, f.session_id, f.session_start, f.session_end, f.user_key,
       (f.first_event.country, f.first_event.region, f.first_event.city, f.first_event.browser,
        f.first_event.browser_version, f.first_event.operating_system, f.first_event.operating_system_version,
        f.first_event.device_type, f.first_event.language),
       f.paths, ${pathBits('f.paths', '{top:Array(UInt64)}')}, f.constants_low, f.constants_high,
       f.pvs, s.tied OR s.overflows OR ti.title_overflows OR s.pvs != f.pvs, ${UNSURE_ROW},
       s.page_hashes, s.page_counts,
       ti.title_paths, ti.titles, ti.title_hash_counts,
       s.entry_hash, s.entry_gap, s.exit_hash, s.exit_gap
     FROM (SELECT site_id, session_id, session_start, session_end, user_key, first_event, paths, constants_low,
             constants_high, length(pageview_ids) AS pvs
           FROM session_facts WHERE site_id = {site:UInt32} AND _part = {facts:String}) AS f
     INNER JOIN (
       SELECT session_id, pvs, tied, arrayDistinct(hs) AS page_hashes,
         arrayMap(h -> toUInt64(arrayCount(y -> y = h, hs)), page_hashes) AS pvs_at,
         arrayMap(h -> toUInt64(arraySum(arrayMap((y, g) -> if(y = h AND g >= 0, g, 0), hs, gaps))), page_hashes) AS ms_at,
         arrayMap((c, m) -> bitShiftLeft(c, ${COUNT_SHIFT}) + m, pvs_at, ms_at) AS page_counts,
         arrayExists((c, m) -> c >= ${2 ** (64 - COUNT_SHIFT)} OR m >= ${2 ** COUNT_SHIFT}, pvs_at, ms_at) AS overflows,
         if(pvs = 0, 0, hs[1]) AS entry_hash, if(pvs = 0, -1, gaps[1]) AS entry_gap,
         if(pvs = 0, 0, hs[-1]) AS exit_hash, if(pvs = 0, -1, gaps[-1]) AS exit_gap
       FROM (
         SELECT session_id, length(pk) AS pvs,
           ${ADJACENT_EQUAL('ms')} AS tied,
           arrayMap(x -> ${hash}, pk) AS hs,
           arrayFilter((g, f) -> f = 1, ${NEXT_GAPS('ms')}, fl) AS gaps
         FROM (
           SELECT session_id, arraySort(arrayConcat(page_keys, event_keys, other_keys)) AS all,
             arraySort((f, x) -> x, arrayConcat(arrayMap(x -> toUInt8(1), page_keys),
               arrayMap(x -> toUInt8(0), event_keys), arrayMap(x -> toUInt8(0), other_keys)),
               arrayConcat(page_keys, event_keys, other_keys)) AS fl,
             arrayMap(x -> toInt64(bitShiftRight(x, 80)), all) AS ms, arraySort(page_keys) AS pk
           FROM session_paths WHERE site_id = {site:UInt32} AND _part = {paths:String}))) AS s
     USING session_id
     LEFT JOIN (
       SELECT session_id, groupArray(h) AS title_paths, groupArray(t) AS titles,
         groupArray(bitShiftLeft(${pathHash('t')}, ${TITLE_COUNT_BITS}) + least(n, ${TITLE_COUNT_LIMIT})) AS title_hash_counts,
         max(n) > ${TITLE_COUNT_LIMIT} AS title_overflows
       FROM (
         SELECT session_id, ${pathHash('pathname')} AS h, toString(page_title) AS t, count() AS n
         FROM events
         WHERE site_id = {site:UInt32} AND type = 'pageview'
           AND timestamp >= (SELECT min(session_start) FROM session_paths WHERE site_id = {site:UInt32} AND _part = {paths:String})
           AND timestamp <= (SELECT max(session_end) FROM session_paths WHERE site_id = {site:UInt32} AND _part = {paths:String})
           AND toYYYYMMDD(UUIDv7ToDateTime(session_id)) = {day:UInt32}
         GROUP BY session_id, h, t)
       GROUP BY session_id) AS ti
     USING session_id`,
    values,
  );
  await ch.command(
    `INSERT INTO session_pages_builds (site_id, partition, facts_part, paths_part, build_id, span_start, span_end,
       sessions, title_names, layout, bit_paths)
     SELECT {site:UInt32}, {day:UInt32}, {facts:String}, {paths:String}, {build:UUID},
       if(count() = 0, toDateTime64(0, 3, 'UTC'), min(session_start)), if(count() = 0, toDateTime64(0, 3, 'UTC'), max(session_end)), count(),
       arraySort(groupUniqArrayArray(titles)), ${LAYOUT}, {top:Array(UInt64)}
     FROM session_pages_by_country WHERE site_id = {site:UInt32} AND partition = {day:UInt32} AND build_id = {build:UUID}`,
    values,
  );
}

/**
 * Builds the settled days of a site near `common`'s range (a day either side) that have no build
 * of their current parts and whose sessions lie in it, all of them: for the background builder,
 * so that reads find them built. Returns how many it built.
 */
export async function buildSessionPages(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  signal?: AbortSignal,
): Promise<number> {
  if (ch.cluster || ch.rollups === false) return 0;
  const days = settledDays(
    common,
    await settledParts(ch, 'session_facts'),
    await settledParts(ch, 'session_paths'),
  );
  if (days.length === 0) return 0;
  const { unbuilt } = await storedBuilds(ch, siteId, common, days);
  const byDay = new Map(days.map((d) => [d.day, d]));
  for (const day of unbuilt) {
    signal?.throwIfAborted();
    await buildDay(ch, siteId, byDay.get(day)!);
  }
  return unbuilt.length;
}

/**
 * The range's days read from the built rows: those built of their current parts whose sessions
 * all lie in the range, after building (seven at most) the settled ones without a build.
 * Undefined when none apply.
 */
export async function pageDays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
  table: 'session_facts' | 'session_paths',
): Promise<PageDays | undefined> {
  if (!settled || settled.partitions.length === 0) return undefined;
  const [facts, paths] =
    table === 'session_paths'
      ? [await settledParts(ch, 'session_facts'), settled]
      : [settled, await settledParts(ch, 'session_paths')];
  const days = settledDays(common, facts, paths);
  if (days.length === 0) return undefined;
  const key = JSON.stringify([
    siteId,
    common.startDate ?? null,
    common.endDate ?? null,
    common.timeZone,
    days.map(buildKey),
    days.filter((d) => endedAnHourAgo(d.day)).map((d) => d.day),
  ]);
  const found = await keptDays.read(
    ch,
    key,
    () => readPageDays(ch, siteId, common, days),
    (r) => r.complete,
  );
  return (
    found.days && {
      partitions: [...found.days.partitions],
      builds: [...found.days.builds],
      bitPaths: [...found.days.bitPaths],
    }
  );
}

/**
 * The range's days read from the built rows (memo.ts), by the site, the range and the days'
 * parts, and which of them are old enough to be built: a build is of its day's two parts and
 * never changes while they last. Kept only when the read found nothing to build (a day built
 * by it, or whose build failed, is looked up again by the next read). The lookup of the builds
 * and of the spans of the days that are not (those whose sessions reach out of the range) is
 * 30-40 ms of a filtered page breakdown at 10 M events (docs/benchmarks.md).
 */
const keptDays = memo<{ days: PageDays | undefined; complete: boolean }>(256);

async function readPageDays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  days: SettledDay[],
): Promise<{ days: PageDays | undefined; complete: boolean }> {
  let { built, unbuilt } = await storedBuilds(ch, siteId, common, days);
  const complete = unbuilt.length === 0;
  if (unbuilt.length > 0) {
    const byDay = new Map(days.map((d) => [d.day, d]));
    // One at a time: the builds share the engine's one write connection. A build that fails
    // leaves the day to be read as before (its rows, without the row naming them, are never
    // read), and the next read or the background builder tries again.
    for (const day of unbuilt.slice(0, MAX_BUILT_DAYS)) {
      await buildDay(ch, siteId, byDay.get(day)!).catch(() => {});
    }
    ({ built } = await storedBuilds(ch, siteId, common, days));
  }
  const usable = [...built.entries()].filter(([, b]) => b.inside);
  if (usable.length === 0) return { days: undefined, complete };
  return {
    days: {
      partitions: usable.map(([day]) => day),
      builds: usable.map(([, b]) => b.build),
      bitPaths: usable.map(([, b]) => b.bitPaths),
    },
    complete,
  };
}

/**
 * The titles of the builds read, by the hash `title_hash_counts` holds of each; null when two of
 * them share one (their counts could not be told apart: the answer then reads as before).
 */
async function titleNames(ch: ClickHouse, siteId: number, days: PageDays): Promise<PageNames | null> {
  const p = new Params();
  const rows = await ch.query<{ h: number | string; t: string }>(
    `SELECT DISTINCT ${pathHash('t')} AS h, t
     FROM session_pages_builds ARRAY JOIN title_names AS t
     WHERE site_id = ${p.bind('UInt32', siteId)} AND partition IN ${p.bind('Array(UInt32)', days.partitions)}
       AND build_id IN ${p.bind('Array(UUID)', days.builds)}`,
    p.values,
  );
  const names = new Map<number, string>();
  for (const r of rows) {
    // 48-bit hashes: exact as numbers, however the engine sends 64-bit integers.
    const h = Number(r.h);
    if (names.has(h)) return null;
    names.set(h, r.t);
  }
  return (h) => names.get(Number(h)) ?? '';
}

/**
 * The sessions of the days read from the built rows that are counted from their rows, and how
 * the range's other sessions are read: `counted`, a condition on the built rows, keeps the
 * sure rows whose session has an event matching every filter; `passing`, the 48-bit hashes of
 * the paths that pass every path filter (none without one: every path passes); `restrict`, a
 * condition on rollup rows, keeps the other sessions (the other days' and the exceptions);
 * `matching`, a condition on events, keeps their sessions' events, and names the windows of
 * time those lie in, so that a read of the events skips the built days' granules (the range's
 * first and last day, mostly). Undefined when the exceptions are too many to list or a path
 * filter passes too many paths (the answer then reads every session as before).
 */
export interface SessionPageRows {
  counted: (p: Params) => string;
  passing: number[] | undefined;
  restrict: (p: Params) => string;
  matching: (p: Params) => string;
}

/**
 * Most windows of time a SessionPageRows `matching` condition names: past it, the nearest are
 * joined (the engine tests each against every granule's range of the sort key).
 */
const MAX_WINDOWS = 32;

const spanMs = (at: string) => Date.parse(`${at.replace(' ', 'T')}Z`);

/**
 * Windows covering every one of `spans`, overlapping ones joined (mergedSpans), and past
 * MAX_WINDOWS those with the shortest gaps between them too (a window may then cover time no
 * span does).
 */
export function coveringWindows(spans: Span[]): Span[] {
  const joined = mergedSpans(spans);
  if (joined.length <= MAX_WINDOWS) return joined;
  // The gaps kept: the widest MAX_WINDOWS - 1 (ties by place, so the result is one).
  const gaps = joined
    .slice(1)
    .map((w, i) => ({ i, gap: spanMs(w[0]) - spanMs(joined[i]![1]) }))
    .sort((a, b) => b.gap - a.gap || a.i - b.i)
    .slice(0, MAX_WINDOWS - 1)
    .map((g) => g.i)
    .sort((a, b) => a - b);
  let start = 0;
  return [...gaps, joined.length - 1].map((end) => {
    const w: Span = [joined[start]![0], joined[end]![1]];
    start = end + 1;
    return w;
  });
}

/**
 * The exceptions of some builds (their tied sessions, and with filters on address or browser
 * attributes the unsure ones too), by the builds: a build's rows never change (memo.ts).
 */
const keptExceptions = memo<{ ids: string[]; starts: string[]; ends: string[]; n: number }[]>(256);

/**
 * The first start and last end of the sessions of each partition of `session_facts` that is not
 * among `days`' and has a session overlapping the range: every event in range of those sessions
 * lies in one of them (an unmerged row's span holds the events it was made of, and a row with
 * an event in range overlaps it). The built days' partitions are left out before any row is
 * read; the others of the site are read whole (their two times), as the crossing sessions'
 * lookup reads them.
 */
async function otherSpans(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  days: PageDays,
): Promise<Span[]> {
  const p = new Params();
  const { from, to } = rangeBounds(p, common);
  const rows = await ch.query<{ start: string; end: string }>(
    `SELECT toString(min(session_start)) AS start, toString(max(session_end)) AS end
     FROM session_facts
     WHERE site_id = ${p.bind('UInt32', siteId)} AND _partition_id NOT IN ${p.bind('Array(String)', days.partitions.map(String))}
       ${from ? `AND session_end >= ${from}` : ''} ${to ? `AND session_start < ${to}` : ''}
     GROUP BY _partition_id`,
    p.values,
  );
  return rows.map((r) => [r.start, r.end]);
}

/**
 * The hashes (cityHash64) of the site's paths that pass every path filter of `common`, tested
 * once per distinct path of the site: undefined without a path filter, null past
 * MAX_MATCHING_PATHS (the answer then reads as before). Read as text: the embedded engine gives
 * 64-bit numbers as JSON numbers.
 */
export async function passingPaths(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
): Promise<bigint[] | null | undefined> {
  const pathFilters = common.filters.filter((f) => f.parameter === 'pathname');
  if (pathFilters.length === 0) return undefined;
  const q = new Params();
  const [found] = await ch.query<{ hashes: string[]; n: number }>(
    `SELECT groupArray(${MAX_MATCHING_PATHS})(toString(cityHash64(pathname))) AS hashes, count() AS n
     FROM site_paths WHERE site_id = ${q.bind('UInt32', siteId)}
       AND ${pathFilters.map((f) => `(${matchAny(q, 'pathname', f.type, f.value)})`).join(' AND ')}`,
    q.values,
  );
  if (!found || Number(found.n) > MAX_MATCHING_PATHS) return null;
  return found.hashes.map((h) => BigInt(h));
}

/** The rows of `days` (pageDays) as SessionPageRows says, for a filtered answer. */
export async function sessionPageRows(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  days: PageDays,
): Promise<SessionPageRows | undefined> {
  const rows = (p: Params, sure: boolean) => {
    const where = [
      `site_id = ${p.bind('UInt32', siteId)}`,
      `partition IN ${p.bind('Array(UInt32)', days.partitions)}`,
      `build_id IN ${p.bind('Array(UUID)', days.builds)}`,
    ];
    const exception = unsureApply(ch, common) ? '(tied = 1 OR unsure = 1)' : 'tied = 1';
    return `${where.join(' AND ')} AND ${sure ? `NOT ${exception}` : exception}`;
  };
  const e = new Params();
  const limit = listedSessionsLimit(ch);
  // The paths that pass every path filter (passingPaths), bound as constant sets: the engine
  // tests an array element against a constant with a hash set, against a subquery's array one by
  // one (filtered pathnames 280-330 against 395-510 ms at 10 M events). The rows' paths are
  // tested by their bits (builtPathTest). Past MAX_MATCHING_PATHS, the answer reads as before.
  // Found beside the exceptions.
  const listedLimit = Math.max(1, Math.floor(limit));
  const [[listed], full, spans] = await Promise.all([
    keptExceptions.read(
      ch,
      JSON.stringify([siteId, days.partitions, days.builds, unsureApply(ch, common), limit]),
      () =>
        ch.query<{ ids: string[]; starts: string[]; ends: string[]; n: number }>(
          `SELECT groupArray(${listedLimit})(session_id) AS ids,
             groupArray(${listedLimit})(toString(session_start)) AS starts,
             groupArray(${listedLimit})(toString(session_end)) AS ends, count() AS n
           FROM session_pages_by_country WHERE ${rows(e, false)}`,
          e.values,
        ),
    ),
    passingPaths(ch, siteId, common),
    otherSpans(ch, siteId, common, days),
  ]);
  if (!listed || Number(listed.n) > limit) return undefined;
  if (full === null) return undefined;
  const ids = [...listed.ids].sort();
  // The times the other sessions' events lie in: the exceptions' spans (wholly inside the range,
  // as their builds' are) and the other partitions' (otherSpans).
  const windows = coveringWindows([
    ...listed.ids.map((_, i): Span => [listed.starts[i]!, listed.ends[i]!]),
    ...spans,
  ]);
  const builtDays = days.partitions.map(String);
  return {
    counted: (p) =>
      `${rows(p, true)} AND ${rowFilterCondition(p, 'session_pages_by_country', siteId, common, full && builtPathTest(p, days, full))(false)}`,
    passing: full?.map((h) => Number(h >> 16n)),
    restrict: (p) =>
      `(_partition_id NOT IN ${p.bind('Array(String)', builtDays)} OR session_id IN ${p.bind('Array(UUID)', ids)})`,
    matching: (p) =>
      `(toYYYYMMDD(UUIDv7ToDateTime(session_id)) NOT IN ${p.bind('Array(UInt32)', days.partitions)}
        OR session_id IN ${p.bind('Array(UUID)', ids)}) AND (${inSpans(p, windows)})`,
  };
}

/**
 * A filtered page breakdown's counts over the sessions of the days read from the built rows
 * (`counts`, read meanwhile: on another read connection, the other sessions' read plans while
 * this one runs), with `restrict` and `matching` of SessionPageRows for the range's other
 * sessions. `settled` is the snapshot of `table`'s parts the answer reads those against.
 * Undefined when no day applies or SessionPageRows is, or the titles read cannot be told apart.
 */
export async function sessionPageCounts(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: PageParameter,
  settled: Settled | undefined,
  table: 'session_facts' | 'session_paths',
  pageNames: () => Promise<PageNames> = () => readPageNames(ch, siteId),
): Promise<
  | { counts: Promise<KeyedCounts>; restrict: (p: Params) => string; matching: (p: Params) => string }
  | undefined
> {
  const days = await pageDays(ch, siteId, common, settled, table);
  if (!days) return undefined;
  const titles = parameter === 'page_title' ? titleNames(ch, siteId, days) : undefined;
  titles?.catch(() => {});
  const pageRows = await sessionPageRows(ch, siteId, common, days);
  if (!pageRows) return undefined;
  const titleOf = await titles;
  if (titleOf === null) return undefined;
  const p = new Params();
  const counted = pageRows.counted(p);
  // Of a row's pageviews, those whose path passes the path filters (every one without a path
  // filter). A path's hash and counts are filtered as pairs, tested once: the filtered
  // pathnames' statement took 2-18 % less than with the two arrays filtered each against the set
  // at 100 M events, four comparisons alternated, the same rows (docs/benchmarks.md).
  const set = pageRows.passing && p.bind('Array(UInt64)', pageRows.passing);
  const pairs = 'arrayZip(page_hashes, page_counts)';
  const pagesPassing = set ? `arrayFilter(z -> z.1 IN ${set}, ${pairs})` : pairs;
  const titlesPassing = set
    ? `arrayFilter((y, x) -> x IN ${set}, title_hash_counts, title_paths)`
    : 'title_hash_counts';
  const [at, gap] = parameter === 'entry_page' ? ['entry_hash', 'entry_gap'] : ['exit_hash', 'exit_gap'];
  const sql =
    parameter === 'pathname'
      ? `SELECT h, countIf(i > 0) AS n_sessions, sum(c) AS n_events,
           countIf(i > 0 AND pageviews = 1) AS bounces, sum(ms) AS top_ms,
           sum(c - toUInt64(i > 0 AND exit_gap < 0 AND h = exit_hash)) AS top_n, countIf(i <= 1) AS s_part,
           sum(c) AS e_part
         FROM (
           SELECT pageviews, exit_hash, exit_gap, z.1 AS h, bitShiftRight(z.2, ${COUNT_SHIFT}) AS c,
             bitAnd(z.2, ${2 ** COUNT_SHIFT - 1}) AS ms, i
           FROM (SELECT pageviews, exit_hash, exit_gap, ${pagesPassing} AS m_zs
             FROM session_pages_by_country WHERE ${counted})
           LEFT ARRAY JOIN m_zs AS z, arrayEnumerate(m_zs) AS i)
         GROUP BY h`
      : parameter === 'page_title'
        ? `SELECT h, countIf(k = 1) AS n_sessions, sum(c) AS n_events, countIf(k = 1 AND pageviews = 1) AS bounces,
             0 AS top_ms, 0 AS top_n, countIf(i <= 1) AS s_part, sum(c) AS e_part
           FROM (
             SELECT pageviews, h, bitAnd(hc, ${TITLE_COUNT_LIMIT}) AS c, i, k
             FROM (SELECT pageviews, ${titlesPassing} AS m_hcs,
                 arrayMap(x -> bitShiftRight(x, ${TITLE_COUNT_BITS}), m_hcs) AS m_hs
               FROM session_pages_by_country WHERE ${counted})
             LEFT ARRAY JOIN m_hs AS h, m_hcs AS hc, arrayEnumerate(m_hs) AS i, arrayEnumerateUniq(m_hs) AS k)
           GROUP BY h`
        : `SELECT ${at} AS h, count() AS n_sessions,
             sum(pageviews) AS n_events, countIf(pageviews = 1) AS bounces, sumIf(${gap}, ${gap} >= 0) AS top_ms,
             countIf(${gap} >= 0) AS top_n, count() AS s_part, sum(pageviews) AS e_part
           FROM session_pages_by_country WHERE ${counted}
           GROUP BY h`;
  // Paths come back by hash, named from the site's pages read meanwhile: named in the statement
  // (`transform` of every row before grouping) they cost it 29 ms more at 10 M events, filtered
  // (docs/benchmarks.md). Titles come back by hash too, named from the builds' titles.
  const names = titleOf ? Promise.resolve(titleOf) : pageNames();
  names.catch(() => {});
  type Grouped = Omit<ValueCounts, 'v'> & { h: number | string; s_part: number; e_part: number };
  const counts = ch.query<Grouped>(sql, p.values).then(async (grouped) => {
    const nameOf = await names;
    const into = emptyCounts();
    for (const { h, ...g } of grouped) {
      const r = { ...g, v: nameOf(h) };
      addCounts(into, r);
      into.all_sessions += Number(r.s_part);
      into.all_events += Number(r.e_part);
    }
    return into;
  });
  counts.catch(() => {});
  return { counts, restrict: pageRows.restrict, matching: pageRows.matching };
}
