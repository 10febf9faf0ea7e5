import { Readable } from 'node:stream';
import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeBounds } from '../builder';
import { memo } from './memo';
import type { SessionRollup, Settled } from './rollup';
import { type SESSION_ATTRIBUTES, valueHash } from './shared';

/**
 * Per-day summaries of the unfiltered page breakdowns (`metric_summaries`, migrations 0007 and
 * 0008).
 *
 * A day here is a `session_paths` partition: the sessions that began that UTC day (the
 * partition key's day, with the engine in UTC; in another zone, nothing is summarized), computed
 * from the partition's single part. The keyed breakdowns' summary holds every session of the
 * partition, with the first start and the last end among them (its span): in a range that
 * holds the span, those sessions have every event in the range, so their share of the answer
 * is the summary's, and the range's other sessions are those of the other partitions (read by
 * partition, without looking at a session of the summarized ones). The summaries of page
 * titles and hostnames, read from the events, hold the partition's sessions that lie wholly
 * inside the day (`coveredSessions`), for days wholly inside a range; the others are read from
 * their events. Either way both parts are disjoint sets of sessions, so their counts add up.
 */

export type KeyedParameter = 'pathname' | 'entry_page' | 'exit_page' | 'event_name';
/**
 * Answers with summaries: the keyed breakdowns, the session attributes (from `session_facts`),
 * page titles and hostnames (read from the events), the goal list's sessions and path-goal
 * conversions (`goals`: one value per goal's pattern), the session totals of the overview
 * and the sessions list's count (`sessions`: one value, the empty one, overview.ts
 * sessionTotalDays), the buckets' counts per UTC quarter hour (`quarters`, quarters.ts), and
 * the sessions of a day that the page titles' and hostnames' summaries leave out
 * (`uncovered_sessions:2`: one value per session id, marked when the session lies in its day and
 * the next, metric.ts), and the page titles' and hostnames' counts over those that do
 * (`page_title:next_day`, `hostname:next_day`).
 */
export type SummarizedParameter =
  | KeyedParameter
  | (typeof SESSION_ATTRIBUTES)[number]
  | 'page_title'
  | 'hostname'
  | 'goals'
  | 'sessions'
  | 'quarters'
  | 'uncovered_sessions:2'
  | `${'page_title' | 'hostname'}:next_day`
  | `journeys:${number}`
  | `funnel:${string}`;

/** A value's counts: sums over disjoint sets of sessions add up. */
export interface ValueCounts {
  v: string;
  n_sessions: number;
  n_events: number;
  bounces: number;
  top_ms: number;
  top_n: number;
}

/** Each result row's share of the session and event totals. */
export interface Parts {
  s_part: number;
  e_part: number;
}

export interface KeyedCounts {
  byValue: Map<string, ValueCounts>;
  /** Values stored apart, under another parameter (summarizedDays' `valuesUnder`), and not read back. */
  apart?: Map<string, ValueCounts>;
  all_sessions: number;
  all_events: number;
}

const ADDITIVE = ['n_sessions', 'n_events', 'bounces', 'top_ms', 'top_n'] as const;

export const emptyCounts = (): KeyedCounts => ({ byValue: new Map(), all_sessions: 0, all_events: 0 });

/** Adds a value's counts to those of `into` (to its values stored apart, with `apart`). */
export function addCounts(into: KeyedCounts, r: ValueCounts, apart = false): void {
  if (apart && !into.apart) into.apart = new Map();
  const values = (apart ? into.apart : undefined) ?? into.byValue;
  const known = values.get(r.v);
  if (!known)
    // A literal of one shape: filled in a loop, the objects of a broad funnel's visitors took
    // several times as long to make and to store.
    values.set(r.v, {
      v: r.v,
      n_sessions: Number(r.n_sessions),
      n_events: Number(r.n_events),
      bounces: Number(r.bounces),
      top_ms: Number(r.top_ms),
      top_n: Number(r.top_n),
    });
  else for (const c of ADDITIVE) known[c] += Number(r[c]);
}

export function mergeCounts(into: KeyedCounts, from: KeyedCounts): void {
  for (const r of from.byValue.values()) addCounts(into, r);
  into.all_sessions += from.all_sessions;
  into.all_events += from.all_events;
}

/**
 * A site's rows of some settled `parts` of a rollup grouped by partition day (`day`) and `by`:
 * a settled part holds one row per session, so no FINAL. For the builders of summaries.
 */
export const settledPartsQuery = (
  p: Params,
  table: SessionRollup,
  siteId: number,
  parts: string[],
  columns: string,
  by?: string,
) => `SELECT _partition_id AS day, ${columns} FROM ${table}
  WHERE site_id = ${p.bind('UInt32', siteId)} AND _part IN ${p.bind('Array(String)', parts)}
  GROUP BY day${by ? `, ${by}` : ''}`;

/** The day of a session's partition (its key, as the engine computes it: a number YYYYMMDD). */
export const PARTITION_DAY = 'toYYYYMMDD(UUIDv7ToDateTime(session_id))';

/**
 * Names the engine gives UTC. Summaries need partition days to be UTC days (the embedded engine's
 * zone, and a server's unless configured otherwise): a day is then a whole number of 86,400,000
 * milliseconds, tested in integers, three times faster than through a time zone's calendar.
 */
const UTC_NAMES = [
  'UTC',
  'Etc/UTC',
  'UCT',
  'Etc/UCT',
  'GMT',
  'Etc/GMT',
  'Universal',
  'Etc/Universal',
  'Zulu',
  'Etc/Zulu',
];

/** Whether the engine's zone `tz` is UTC under one of its names. */
export const isUtcZone = (tz: string) => UTC_NAMES.includes(tz);

const DAY_MS = 86_400_000;
const msDay = (ms: string) => `intDiv(${ms}, ${DAY_MS})`;
const SESSION_DAY = msDay('toUnixTimestamp64Milli(UUIDv7ToDateTime(session_id))');

/** A condition on rollup rows: the row's partition is one of `days` (YYYYMMDD), or with `not`, none. */
export function inPartitions(p: Params, days: number[], not = false): string {
  return `_partition_id ${not ? 'NOT IN' : 'IN'} ${p.bind('Array(String)', days.map(String))}`;
}

/** Days since 1970 of a YYYYMMDD partition day. */
export const epochDay = (day: number) =>
  Date.UTC(Math.floor(day / 10_000), (Math.floor(day / 100) % 100) - 1, day % 100) / DAY_MS;

/**
 * Whether a partition day (YYYYMMDD, a UTC day) ended an hour ago: old enough to be summarized
 * or built (a day still receiving events would be done again at every merge of its parts).
 */
export const endedAnHourAgo = (day: number, now = Date.now()) => epochDayEndedAnHourAgo(epochDay(day), now);

/** endedAnHourAgo of a UTC day given as days since 1970 (`visitor_hours`' partitions). */
export const epochDayEndedAnHourAgo = (day: number, now = Date.now()) => (day + 1) * DAY_MS + HOUR_MS <= now;

const HOUR_MS = 3_600_000;

/**
 * A condition on `session_paths` rows: the session belongs to one of the partitions `days`
 * (YYYYMMDD) and lies wholly inside that (UTC) day. Reads only the id and the two times, so it
 * works as a PREWHERE.
 */
export function coveredSessions(p: Params, days: number[]): string {
  return `(${SESSION_DAY} IN ${p.bind('Array(Int64)', days.map(epochDay))} AND ${sessionDays(0)})`;
}

/**
 * Whether a `session_paths` row's session begins in its partition's (UTC) day and ends `after`
 * days later.
 */
const sessionDays = (after: 0 | 1) =>
  `${msDay('toUnixTimestamp64Milli(session_start)')} = ${SESSION_DAY}
    AND ${msDay('toUnixTimestamp64Milli(session_end)')} = ${SESSION_DAY}${after ? ` + ${after}` : ''}`;

/**
 * A session of the next-day kind: it begins in its partition's (UTC) day and ends in the next,
 * as most sessions crossing midnight do. As a condition on `session_paths` rows.
 */
export const NEXT_DAY_SESSION = `(${sessionDays(1)})`;

/** A condition on `session_paths` rows: a next-day session of one of the partitions `days`. */
export function nextDaySessions(p: Params, days: number[]): string {
  return `(${SESSION_DAY} IN ${p.bind('Array(Int64)', days.map(epochDay))} AND ${NEXT_DAY_SESSION})`;
}

/** The partition (YYYYMMDD) of the UTC day after `day`'s. */
export const nextPartition = (day: number) =>
  Number(new Date((epochDay(day) + 1) * DAY_MS).toISOString().slice(0, 10).replaceAll('-', ''));

/** The instant a day since 1970 begins (UTC), bound. */
const dayAt = (p: Params, day: number) => `toDateTime64(${p.bind('Int64', day * 86_400)}, 3, 'UTC')`;

/**
 * A condition on events: their time lies inside one of `days` (partitions, YYYYMMDD, as UTC
 * days), as bounds on `timestamp` (the sort key), one pair per run of consecutive days.
 */
export function withinDays(p: Params, days: number[]): string {
  const sorted = [...new Set(days.map(epochDay))].sort((a, b) => a - b);
  const runs: [number, number][] = [];
  for (const d of sorted) {
    const last = runs.at(-1);
    if (last && last[1] === d) last[1] = d + 1;
    else runs.push([d, d + 1]);
  }
  return `(${runs.map(([a, b]) => `(timestamp >= ${dayAt(p, a)} AND timestamp < ${dayAt(p, b)})`).join(' OR ') || '0'})`;
}

/** The first and last instants of `days` (partitions, YYYYMMDD, as UTC days): from, and before. */
export function daysSpan(p: Params, days: number[]): { from: string; to: string } {
  const numbers = days.map(epochDay);
  return { from: dayAt(p, Math.min(...numbers)), to: dayAt(p, Math.max(...numbers) + 1) };
}

/**
 * Computes a breakdown's counts over the sessions of `days` a summary holds (every one for the
 * keyed breakdowns, the covered ones for the others) in the range asked for, per partition day;
 * undefined when it cannot.
 */
export type BuildCounts = (days: number[], parts: string[]) => Promise<Map<number, KeyedCounts> | undefined>;

/** A summarized day's counts, and the last end among the sessions it holds (as the engine writes it). */
export interface DayCounts {
  counts: KeyedCounts;
  spanEnd: string;
}

/** The summarized days of a range: their partitions, their counts added up, and each day's. */
export interface SummarizedDays {
  partitions: number[];
  counts: KeyedCounts;
  byDay: Map<number, DayCounts>;
  /** With `names`: the stored values by their hash (valueHash, as text). */
  names?: Map<string, string>;
}

/** Most days one read summarizes. */
const MAX_BUILT_DAYS = 7;

interface SummaryRow extends ValueCounts, Parts {
  partition: number;
  totals: number;
  /** Whether the span of the day's sessions lies inside the range asked for (totals rows). */
  inside: number;
}

/** Summaries of whole partitions, each usable where its span is (else of the covered sessions). */
const wholePartitions = (parameter: SummarizedParameter) =>
  parameter !== 'page_title' &&
  parameter !== 'hostname' &&
  parameter !== 'uncovered_sessions:2' &&
  !parameter.endsWith(':next_day');

/**
 * The summarized days of an unfiltered range for `parameter` and their counts added up, or
 * undefined when none apply (no settled day wholly inside the range, none whose sessions' span
 * lies inside it for the keyed breakdowns, or a cluster, where parts are per shard). A settled
 * day without a summary of its current part gets one now (computed by `build` and stored);
 * should storing it fail, its counts still serve this answer.
 *
 * `table` is the rollup whose parts `settled` lists (and the summaries are of). With `values`,
 * only those values are read, and a day counts as summarized only when its summary holds each
 * of them (`build` then returns a row for each, zeros included): a goal added later is built
 * for the days summarized before it. With `valuesUnder`, the values `build` returns apart
 * (`KeyedCounts.apart`) are stored under that parameter, in the same insert as the totals, and
 * left to the caller to read (a day's totals are then found without reading them); a day built
 * by this read whose rows could not be stored is then not summarized (the caller would not
 * find its values).
 */
export function summarizedDays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: SummarizedParameter,
  settled: Settled | undefined,
  /** Undefined: the days without a summary are left to the caller, none built. */
  build: BuildCounts | undefined,
  options: SummaryOptions = {},
): Promise<SummarizedDays | undefined> {
  if (!settled || settled.partitions.length === 0) return Promise.resolve(undefined);
  const key = JSON.stringify([
    siteId,
    parameter,
    common.startDate ?? null,
    common.endDate ?? null,
    common.timeZone,
    options.table ?? 'session_paths',
    options.values ?? null,
    options.valuesUnder ?? null,
    options.names === true,
    build !== undefined,
    summarizableParts(settled),
  ]);
  // Each caller gets its own copy: answers add to the counts they are given.
  return kept
    .read(
      ch,
      key,
      () => readSummarizedDays(ch, siteId, common, parameter, settled, build, options),
      (r) => r.complete,
    )
    .then((r) => r.days && copyDays(r.days));
}

interface SummaryOptions {
  table?: SessionRollup;
  values?: string[];
  valuesUnder?: string;
  names?: boolean;
}

/**
 * The summarized days recently read (memo.ts), by everything they depend on: the site, the
 * parameter, the range, the options, and the settled parts of the days old enough to be
 * summarized. A summary is of one part and never changes while the part lasts (the service
 * writes a day's summary once per part, the same rows each time); a late event, a merge or a
 * delete gives the day another part, and the read another key. A day that becomes old enough
 * adds its part to the key too. Only a read that left nothing to build is kept, so a kept answer
 * is the one the stored summaries give. At 10 M events the lookup is 20-40 ms of an unfiltered
 * answer (docs/benchmarks.md); 256 ranges, each the counts of some hundreds of values.
 */
const kept = memo<Summarized>(256);

/**
 * The settled parts of the days a read may summarize (those that ended an hour ago), as
 * `day:part`: those of today's partition, which change with every write, leave the key alone.
 */
function summarizableParts(settled: Settled): string[] {
  const now = Date.now();
  return settled.partitions.flatMap((d, i) =>
    /^\d{8}$/.test(d) && endedAnHourAgo(Number(d), now) ? [`${d}:${settled.parts[i]}`] : [],
  );
}

/** A read of summarized days, and whether it left nothing for a later read to build. */
interface Summarized {
  days: SummarizedDays | undefined;
  complete: boolean;
}

const copyCounts = (c: KeyedCounts): KeyedCounts => ({
  byValue: new Map([...c.byValue].map(([v, r]) => [v, { ...r }])),
  ...(c.apart ? { apart: new Map([...c.apart].map(([v, r]) => [v, { ...r }])) } : {}),
  all_sessions: c.all_sessions,
  all_events: c.all_events,
});

const copyDays = (d: SummarizedDays): SummarizedDays => ({
  partitions: [...d.partitions],
  counts: copyCounts(d.counts),
  byDay: new Map([...d.byDay].map(([day, c]) => [day, { counts: copyCounts(c.counts), spanEnd: c.spanEnd }])),
  ...(d.names ? { names: new Map(d.names) } : {}),
});

async function readSummarizedDays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  parameter: SummarizedParameter,
  settled: Settled,
  build: BuildCounts | undefined,
  { table = 'session_paths', values, valuesUnder, names }: SummaryOptions,
): Promise<Summarized> {
  const candidates = settled.partitions.filter((d) => /^\d{8}$/.test(d));
  const partOf = new Map(settled.partitions.map((d, i) => [d, settled.parts[i]!]));
  // The candidate days inside the range, as the engine's calendar has them.
  const inRange = (q: Params) => {
    const { from, to } = rangeBounds(q, common);
    const dayStart = `parseDateTime(d, '%Y%m%d')`;
    // The next midnight in the engine's zone, whatever the length of the day.
    const dayEnd = `toStartOfDay(addHours(${dayStart}, 36))`;
    const conditions = [
      from && `${dayStart} >= ${from}`,
      to && `${dayEnd} <= ${to}`,
      // A day still receiving events would be summarized again at every merge of its parts.
      `${dayEnd} <= now() - INTERVAL 1 HOUR`,
    ].filter(Boolean);
    return `arrayFilter(d -> ${conditions.join(' AND ')}, ${q.bind('Array(String)', candidates)})`;
  };

  const whole = wholePartitions(parameter);
  const q = new Params();
  const bounds = rangeBounds(q, common);
  const inside = [bounds.from && `span_start >= ${bounds.from}`, bounds.to && `span_end < ${bounds.to}`]
    .filter(Boolean)
    .join(' AND ');
  // The range's days come with the stored rows (on each day's totals row, the engine computing
  // them once), which saves a query of their own where any are stored (about 6 ms an answer).
  const rangeDays = inRange(q);
  const stored = await ch.query<
    SummaryRow & { tz: string; range_days: string[]; last_end: string; h?: string }
  >(
    `SELECT partition, totals, value AS v, n_sessions, n_events, bounces, top_ms, top_n, s_part, e_part,${
      names ? ` toString(${valueHash('value')}) AS h,` : ''
    }
       toString(span_end) AS last_end,
       ${whole && inside ? inside : '1'} AS inside, timezone() AS tz, if(totals = 1, ${rangeDays}, []) AS range_days
     FROM metric_summaries FINAL
     WHERE site_id = ${q.bind('UInt32', siteId)} AND parameter = ${q.bind('String', parameter)}
       AND source_part IN arrayMap(d -> ${q.bind(
         'Array(String)',
         candidates.map((d) => partOf.get(d)!),
       )}[indexOf(${q.bind('Array(String)', candidates)}, d)], ${rangeDays})${
         values ? ` AND (totals = 1 OR value IN ${q.bind('Array(String)', values)})` : ''
       }`,
    q.values,
  );
  let range: { tz: string; range_days: string[] } | undefined = stored.find((r) => Number(r.totals) === 1);
  if (!range) {
    const p = new Params();
    [range] = await ch.query<{ tz: string; range_days: string[] }>(
      `SELECT timezone() AS tz, ${inRange(p)} AS range_days`,
      p.values,
    );
  }
  const days = (range?.range_days ?? []).map((d) => ({ day: Number(d), part: partOf.get(d)! }));
  if (days.length === 0 || !range || !UTC_NAMES.includes(range.tz))
    return { days: undefined, complete: true };

  const counts = emptyCounts();
  const summarized = new Set<number>();
  const byDay = new Map<number, DayCounts>();
  // A day whose sessions reach out of the range is read from them (and keeps its summary).
  const outside = new Set<number>();
  const needed = values && new Set(values).size;
  const held = new Map<number, number>();
  for (const r of stored)
    if (Number(r.totals) !== 1) held.set(Number(r.partition), (held.get(Number(r.partition)) ?? 0) + 1);
  for (const r of stored) {
    if (Number(r.totals) !== 1) continue;
    if (Number(r.inside) !== 1) {
      outside.add(Number(r.partition));
      continue;
    }
    if (needed !== undefined && (held.get(Number(r.partition)) ?? 0) < needed) continue;
    summarized.add(Number(r.partition));
    counts.all_sessions += Number(r.s_part);
    counts.all_events += Number(r.e_part);
    byDay.set(Number(r.partition), {
      counts: { byValue: new Map(), all_sessions: Number(r.s_part), all_events: Number(r.e_part) },
      spanEnd: r.last_end,
    });
  }
  for (const r of stored) {
    if (Number(r.totals) === 1 || !summarized.has(Number(r.partition))) continue;
    addCounts(counts, r);
    addCounts(byDay.get(Number(r.partition))!.counts, r);
  }
  // Days without a summary, a week of them at most, in one pass: their sessions (those the
  // summary holds) have every event inside the range asked for, so that range's bounds keep all
  // of them, as the day's own would. The others are read from their sessions this time: a
  // first read costs about what it did without summaries, and the next ones build the rest.
  const open = days.filter((d) => !summarized.has(d.day) && !outside.has(d.day));
  const unsummarized = build ? open : [];
  const spans = whole ? await sessionSpans(ch, siteId, common, unsummarized, table) : undefined;
  const buildable = unsummarized.filter((d) => spans?.get(d.day)?.inside !== false);
  const missing = buildable.slice(0, MAX_BUILT_DAYS);
  // Whether a later read of this range would find what this one does (the memo keeps only such):
  // no day left for it to build, none whose build could not be stored.
  let complete = build ? buildable.length <= MAX_BUILT_DAYS : open.length === 0;
  const built =
    build && missing.length > 0
      ? await build(
          missing.map((d) => d.day),
          missing.map((d) => d.part),
        )
      : undefined;
  if (built) {
    const summaries = missing.map(({ day, part }) => ({
      day,
      part,
      counts: built.get(day) ?? emptyCounts(),
      span: spans?.get(day) ?? utcDay(day),
    }));
    const stored = await store(ch, siteId, parameter, summaries, valuesUnder).then(
      () => true,
      () => false,
    );
    complete &&= stored;
    for (const { day, counts: c, span } of stored || !valuesUnder ? summaries : []) {
      mergeCounts(counts, c);
      summarized.add(day);
      byDay.set(day, { counts: c, spanEnd: span.end });
    }
  }
  if (built === undefined && missing.length > 0) complete = false;
  if (summarized.size === 0) return { days: undefined, complete };
  const hashes = names
    ? new Map(
        stored.flatMap((r) => (Number(r.totals) !== 1 && r.h !== undefined ? [[r.h, r.v] as const] : [])),
      )
    : undefined;
  return {
    days: { partitions: [...summarized], counts, byDay, ...(hashes ? { names: hashes } : {}) },
    complete,
  };
}

interface Span {
  start: string;
  end: string;
  inside?: boolean;
}

/** The first and last instants of a UTC day (YYYYMMDD), as the engine writes them. */
function utcDay(day: number): Span {
  const start = epochDay(day) * DAY_MS;
  const text = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
  return { start: text(start), end: text(start + DAY_MS - 1) };
}

/**
 * The first start and last end among each day's sessions of the site (days without one have
 * none), and whether they lie inside the range asked for.
 */
export async function sessionSpans(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  days: { day: number; part: string }[],
  table: SessionRollup,
): Promise<Map<number, Span>> {
  if (days.length === 0) return new Map();
  const p = new Params();
  const { from, to } = rangeBounds(p, common);
  const inside = [from && `min(session_start) >= ${from}`, to && `max(session_end) < ${to}`].filter(Boolean);
  const rows = await ch.query<{ day: string; start: string; end: string; inside: number }>(
    `SELECT _partition_id AS day, toString(min(session_start)) AS start, toString(max(session_end)) AS end,
       ${inside.length > 0 ? inside.join(' AND ') : '1'} AS inside
     FROM ${table}
     WHERE site_id = ${p.bind('UInt32', siteId)} AND _part IN ${p.bind(
       'Array(String)',
       days.map((d) => d.part),
     )}
     GROUP BY day`,
    p.values,
  );
  return new Map(
    rows.map((r) => [Number(r.day), { start: r.start, end: r.end, inside: Number(r.inside) === 1 }]),
  );
}

/** Rows made between two turns of the event loop: a broad funnel's week is 10^5 visitor rows. */
export const ROWS_PER_TURN = 2_000;

/** Lets the event loop turn (the process's requests run) before going on. */
export const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Summaries as rows (each value's counts, those apart under `valuesUnder`, and a totals row per
 * day), in one insert: all or nothing. The rows are made and encoded a few thousand at a time,
 * the event loop free between them: in one go, a week of a broad funnel's visitors held the
 * process (its requests, and a standalone server's ingest) for up to 6 s.
 */
async function store(
  ch: ClickHouse,
  siteId: number,
  parameter: SummarizedParameter,
  summaries: { day: number; part: string; counts: KeyedCounts; span: Span }[],
  valuesUnder: string = parameter,
): Promise<void> {
  async function* rows() {
    let made = 0;
    for (const { day, part, counts, span } of summaries) {
      // One shape for every row (a literal, not spread copies): the engine's JSON rows are
      // encoded one by one, and copies of objects of varying shape cost tens of times more.
      const row = (
        under: string,
        totals: 0 | 1,
        c: Omit<ValueCounts, 'v'>,
        value: string,
        s: number,
        e: number,
      ) => ({
        site_id: siteId,
        parameter: under,
        partition: day,
        source_part: part,
        totals,
        value,
        n_sessions: c.n_sessions,
        n_events: c.n_events,
        bounces: c.bounces,
        top_ms: c.top_ms,
        top_n: c.top_n,
        s_part: s,
        e_part: e,
        span_start: span.start,
        span_end: span.end,
      });
      for (const [under, values] of [
        [parameter, counts.byValue],
        [valuesUnder, counts.apart],
      ] as const) {
        for (const c of values?.values() ?? []) {
          yield row(under, 0, c, c.v, 0, 0);
          if (++made % ROWS_PER_TURN === 0) await nextTurn();
        }
      }
      yield row(parameter, 1, ZERO_COUNTS, '', counts.all_sessions, counts.all_events);
    }
  }
  await ch.writer.insert({ table: 'metric_summaries', values: Readable.from(rows()), format: 'JSONEachRow' });
}

const ZERO_COUNTS = { n_sessions: 0, n_events: 0, bounces: 0, top_ms: 0, top_n: 0 };
