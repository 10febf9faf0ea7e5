import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeBounds } from '../builder';
import { memo } from './memo';
import { daysBetween, rangeEnded } from './shared';

/**
 * Ranges at least this many days long count their visitors from `visitor_days`: a window's rows
 * are about one per visitor of 64 days, read whether the range is a day or a month, so a short
 * range's sessions are fewer to count. The bound is that reasoning, not a measured crossover
 * (docs/decisions.md).
 */
const MIN_DAYS = 7;

const DAY_MS = 86_400_000;

/**
 * Whether an unfiltered answer counts its distinct visitors with `rangeVisitors`: a closed range
 * long enough, with the rollups in use (without them every answer reads the events alone).
 */
export const visitorDaysApply = (ch: ClickHouse, common: CommonParams) =>
  ch.rollups !== false &&
  common.filters.length === 0 &&
  common.startDate !== undefined &&
  common.endDate !== undefined &&
  daysBetween(common.startDate, common.endDate) >= MIN_DAYS;

/**
 * The distinct visitors of a closed range's events, filters not applied (SPEC 13 `users`): those
 * of the UTC days wholly inside the range from `visitor_days` (migration 0009), one row per
 * visitor and window, whose day bits meet the range's, and those of the range's partial days at
 * either end from their events. A visitor of both is counted once (over the 64-bit keys,
 * `user_key`, which the events carry since 0013 as the sessions do). Exact for any closed range;
 * the days are those of the engine's calendar, as the range's bounds.
 *
 * The UTC day the range ends in counts as whole, from its bits, when none of its events lies
 * after the range's end (a range ending tonight, before tonight comes): its events are then all
 * in range. A range of up to 33 days reads one window; when its partition has a merged part (one
 * row per visitor: a merge keeps one row per key), that part's visitors are counted as rows, and
 * only the rest (the other parts' visitors, those of the partial days) as a distinct set, the
 * part's rows tested against it: |P ∪ S| = |P| − |P ∩ S| + |S|. A part merged away meanwhile
 * leaves nothing read as P and everything in S, so the count stays exact. The background
 * builder merges the windows' partitions (mergeVisitorDays). The count of a range of up to 33
 * days that has ended is kept by the parts it reads (keptVisitors), but on a cluster; that of one
 * still being written keeps its merged part's and first partial day's share (splitCount).
 */
export async function rangeVisitors(ch: ClickHouse, siteId: number, common: CommonParams): Promise<number> {
  const localDays = daysBetween(common.startDate!, common.endDate!);
  const oneWindow = localDays <= 33;
  if (!oneWindow || ch.cluster || !rangeEnded(common)) return countVisitors(ch, siteId, common, localDays);
  const { key, part } = await partsRead(ch, common);
  return keptVisitors.read(
    ch,
    JSON.stringify([siteId, common.startDate, common.endDate, common.timeZone, key]),
    () => countVisitors(ch, siteId, common, localDays, part),
  );
}

/**
 * The visitors of ranges that have ended everywhere (rangeVisitors), kept by the range and the
 * names of the parts its count reads: the active parts of its window's partition of
 * `visitor_days` and of the events' months from its start to a day after its end (partsRead).
 * Parts never change, and a late event, a merge or a deletion makes new ones, so a count is read
 * again exactly when what it reads has changed; read before the count, the names may miss a part
 * stored meanwhile, whose rows the count may hold, but such names are never all active again. A
 * range still being written gains parts at every insert, so its count would hardly be read again
 * under the same names: it is not kept. A comparison's previous range so counts its visitors once,
 * not at every overview (a quarter of the comparison's time at 10 M events, docs/benchmarks.md).
 */
const keptVisitors = memo<number>(256);

/**
 * The names of the parts an ended range's visitors are counted from (keptVisitors), and its
 * window's merged part as wholeDays finds it, in one lookup.
 */
async function partsRead(ch: ClickHouse, common: CommonParams): Promise<{ key: string[]; part: string }> {
  const p = new Params();
  const { from, to } = rangeBounds(p, common);
  const window = `toString(intDiv(${firstWholeDay(p, from!)}, 32))`;
  const inWindow = `table = 'visitor_days' AND partition_id = ${window}`;
  const [row] = await ch.query<{ key: string[]; part: string }>(
    `SELECT arraySort(groupArray(concat(table, '/', name))) AS key,
       ${mergedPart(inWindow)} AS part
     FROM system.parts
     WHERE database = currentDatabase() AND active
       AND (${inWindow} OR table = 'events' AND toUInt32OrZero(partition_id)
         BETWEEN toYYYYMM(${from}, 'UTC') AND toYYYYMM(${to} + INTERVAL 1 DAY, 'UTC'))`,
    p.values,
  );
  return { key: row?.key ?? [], part: row?.part ?? '' };
}

/**
 * rangeVisitors counted (`part`: the window's merged part, looked up beforehand; else looked up
 * beside the range's whole days).
 */
async function countVisitors(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  localDays: number,
  part?: string,
): Promise<number> {
  const days = await wholeDays(ch, siteId, common, localDays <= 33, part);
  const p = new Params();
  const { from, to } = rangeBounds(p, common);
  if (!from || !to) throw new Error('rangeVisitors needs a closed range');
  const site = p.bind('UInt32', siteId);
  // The range's events outside its whole days (all of them when it has none).
  const dayStart = (day: number) => `fromUnixTimestamp64Milli(${p.bind('Int64', day * DAY_MS)}, 'UTC')`;
  const partial = `SELECT user_key AS k FROM events
    WHERE site_id = ${site} AND timestamp >= ${from} AND timestamp < ${to}${
      days.first < days.end
        ? ` AND (timestamp < ${dayStart(days.first)} OR timestamp >= ${dayStart(days.end)})`
        : ''
    }`;
  if (days.first >= days.end) {
    const [row] = await ch.query<{ users: number }>(
      `SELECT uniqExact(k) AS users FROM (${partial})`,
      p.values,
    );
    return Number(row?.users ?? 0);
  }
  const rows = `site_id = ${site} AND ${windowDays(
    p.bind('Int64', days.first),
    p.bind('Int64', days.end),
    localDays,
  )}`;
  // The keys beside the merged part's: the other parts' rows of the days, the partial days'.
  const rest = (part: string, events = partial) =>
    `SELECT user_key AS k FROM visitor_days WHERE ${rows} AND _part != ${part} UNION ALL ${events}`;
  const merged = days.part === '' ? undefined : p.bind('String', days.part);
  // |P ∪ R| = |P| − |P ∩ R| + |R|: the merged part's rows P (one per visitor) counted as rows.
  const united = (part: string, others: string) =>
    `SELECT count() - countIf(user_key IN (${others})) + (SELECT uniqExact(k) FROM (${others})) AS users
     FROM visitor_days WHERE ${rows} AND _part = ${part}`;
  if (merged !== undefined && days.head !== undefined) {
    const events = (since: string, until: string) =>
      `SELECT user_key AS k FROM events WHERE site_id = ${site} AND timestamp >= ${since} AND timestamp < ${until}`;
    const { others, toMs, ...keyDays } = days;
    const counted = await splitCount(ch, p, {
      key: JSON.stringify([siteId, common.startDate, common.endDate, common.timeZone, keyDays, localDays]),
      part: days.part,
      quiet: others === 0 && days.end * DAY_MS >= (toMs ?? Number.POSITIVE_INFINITY),
      settled: united(merged, events(from, dayStart(days.first))),
      head: events(from, dayStart(days.first)),
      fresh: rest(merged, events(dayStart(days.end), to)),
      merged: `SELECT user_key FROM visitor_days WHERE ${rows} AND _part = ${merged}`,
    });
    if (counted !== undefined) return counted;
  }
  const [row] = await ch.query<{ users: number }>(
    merged === undefined
      ? `SELECT uniqExact(k) AS users FROM (SELECT user_key AS k FROM visitor_days WHERE ${rows} UNION ALL ${partial})`
      : united(merged, rest(merged)),
    p.values,
  );
  return Number(row?.users ?? 0);
}

/**
 * A range's visitors (countVisitors) as what changes seldom and what changes at every insert:
 * `settled`, the visitors of the window's merged part P (its rows in the range's days) and of the
 * partial day at the range's start (`head`: events with no later insert, as long as the events'
 * parts holding its span are the same), kept by the range, P's name and those parts' names
 * (`key`); and the visitors of `fresh` (the window's other parts, written since P was merged,
 * and the partial day at the range's end) in neither, testing only their keys against P (its sort
 * key skips the granules without one) and the head. The two add up to |P ∪ head ∪ fresh|; with
 * nothing in `fresh` (`quiet`: P alone in its partition, no partial day at the end) the first is
 * the count, and a kept one needs no read. P merged away before a read of it would leave its rows
 * unread, or in `fresh` and counted twice, so it is looked up after each: gone, the count is left
 * undefined (and made again in one statement, whose form stays exact through such a merge), and
 * nothing kept.
 */
async function splitCount(
  ch: ClickHouse,
  p: Params,
  q: {
    key: string;
    part: string;
    quiet: boolean;
    settled: string;
    head: string;
    fresh: string;
    merged: string;
  },
): Promise<number | undefined> {
  const alive = async () => {
    const [row] = await ch.query<{ n: number }>(
      `SELECT count() AS n FROM system.parts
       WHERE database = currentDatabase() AND table = 'visitor_days' AND active AND name = {part:String}`,
      { part: q.part },
    );
    return Number(row?.n) === 1;
  };
  const kept = keptSettled.read(
    ch,
    q.key,
    async () => {
      const [row] = await ch.query<{ users: number }>(q.settled, p.values);
      return (await alive()) ? Number(row?.users ?? 0) : undefined;
    },
    (n) => n !== undefined,
  );
  if (q.quiet) return kept;
  kept.catch(() => {});
  const [row] = await ch.query<{ users: number }>(
    `SELECT uniqExact(k) AS users FROM (${q.fresh})
     WHERE k NOT IN (${q.merged} AND user_key IN (SELECT k FROM (${q.fresh})))
       AND k NOT IN (SELECT k FROM (${q.head}) WHERE k IN (SELECT k FROM (${q.fresh})))`,
    p.values,
  );
  const settled = await kept;
  return settled !== undefined && (await alive()) ? settled + Number(row?.users ?? 0) : undefined;
}

/**
 * The visitors of a range's merged part and starting partial day (splitCount's `settled`), by the
 * site, the range, its whole days, the part's name and the names of the events' parts holding
 * the partial day: 256 ranges per engine.
 */
const keptSettled = memo<number | undefined>(256);

/**
 * The whole UTC days of a range (days since 1970, `first` to `end` excluded), from the first day
 * starting at or after the range's start (none before day 64, which `visitor_days` leaves out)
 * to the day its end falls in, that day included when `oneWindow` (a range of up to 33 days: one
 * window holds its days) and no event of that day lies after the range's end; and, but on a
 * cluster, the largest merged part (level above 0) of that window's partition when it holds at
 * least nine in ten of its rows ('' otherwise: the other parts' rows, counted as a distinct set,
 * would cost more than counting them all so), with the names of the events' parts holding the
 * range's events before its first whole day (`head`, splitCount's key). Two small reads side by
 * side (one, when `part` was looked up before: no `head` then); the days as the engine's
 * calendar has the range's bounds.
 */
async function wholeDays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  oneWindow: boolean,
  part?: string,
): Promise<{ first: number; end: number; part: string; head?: string[]; others?: number; toMs?: number }> {
  const p = new Params();
  const { from, to } = rangeBounds(p, common);
  if (!from || !to) throw new Error('rangeVisitors needs a closed range');
  const dayMs = p.bind('Int64', DAY_MS);
  const first = firstWholeDay(p, from);
  const last = `intDiv(toUnixTimestamp64Milli(${to}), ${dayMs})`;
  const whole = oneWindow
    ? `${first} < ${last} AND ${last} - intDiv(${first}, 32) * 32 < 64
       AND (SELECT count() = 0 FROM events WHERE site_id = ${p.bind('UInt32', siteId)}
         AND timestamp >= ${to} AND timestamp < fromUnixTimestamp64Milli((${last} + 1) * ${dayMs}, 'UTC'))`
    : 'false';
  // The window's parts are looked up beside the days, on another read connection, and with them
  // the events' parts holding the range's events before its first whole day.
  const window = `toString(intDiv(${first}, 32))`;
  const inWindow = `table = 'visitor_days' AND partition_id = ${window}`;
  const [[row], [merged]] = await Promise.all([
    ch.query<{ first: number; end: number; to_ms: number }>(
      `SELECT ${first} AS first, ${last} + (${whole}) AS end, toUnixTimestamp64Milli(${to}) AS to_ms`,
      p.values,
    ),
    part !== undefined || !oneWindow || ch.cluster
      ? [{ part: part ?? '', head: undefined, others: undefined }]
      : ch.query<{ part: string; head: string[]; others: number }>(
          `SELECT ${mergedPart(inWindow)} AS part, arraySort(groupArrayIf(name, table = 'events')) AS head,
             countIf(${inWindow}) - 1 AS others
           FROM system.parts
           WHERE database = currentDatabase() AND active
             AND (${inWindow} OR table = 'events'
               AND toUnixTimestamp(max_time) >= intDiv(toUnixTimestamp64Milli(${from}), 1000)
               AND toUnixTimestamp(min_time) < ${first} * 86400)`,
          p.values,
        ),
  ]);
  if (!row) throw new Error('rangeVisitors: no bounds');
  return {
    first: Number(row.first),
    end: Number(row.end),
    part: merged?.part ?? '',
    ...(merged?.head ? { head: merged.head, others: Number(merged.others), toMs: Number(row.to_ms) } : {}),
  };
}

/** The first day (since 1970) starting at or after `from`, not before day 64. */
function firstWholeDay(p: Params, from: string): string {
  const dayMs = p.bind('Int64', DAY_MS);
  return `greatest(intDiv(toUnixTimestamp64Milli(${from}) + ${dayMs} - 1, ${dayMs}), 64)`;
}

/**
 * Over `system.parts` rows, the name of the largest merged part (level above 0) of those meeting
 * `of` when it holds at least nine in ten of their rows, else ''.
 */
const mergedPart = (of: string) =>
  `if(maxIf(rows, ${of} AND level > 0) * 10 >= sumIf(rows, ${of}) * 9, argMaxIf(name, rows, ${of} AND level > 0), '')`;

/**
 * Merges each partition of `visitor_days` that holds a window of the last `days` UTC days and
 * has more than one part into one (rangeVisitors then counts its rows as they are). Returns how
 * many it merged. Not on a cluster (parts are per shard there; every count is distinct).
 */
export async function mergeVisitorDays(ch: ClickHouse, days: number, now = new Date()): Promise<number> {
  const today = Math.floor(now.getTime() / DAY_MS);
  return mergeSplitPartitions(ch, 'visitor_days', Math.max(Math.floor((today - days) / 32) - 1, 0));
}

/**
 * Merges each partition of `visitor_hours` of the last `days` UTC days before today that has
 * more than one part into one (read without FINAL then): the engine does so an hour after a
 * day's last insert, this sooner after a backfill or late events. Returns how many it merged.
 * Not on a cluster (parts are per shard there; every read merges).
 */
export async function mergeVisitorHours(ch: ClickHouse, days: number, now = new Date()): Promise<number> {
  const today = Math.floor(now.getTime() / DAY_MS);
  return mergeSplitPartitions(ch, 'visitor_hours', Math.max(today - days, 0), today);
}

/**
 * OPTIMIZE … FINAL of each partition of `table` (partition ids that are numbers, from `first`
 * and below `below`) in more than one part; how many. Nothing on a cluster.
 */
async function mergeSplitPartitions(
  ch: ClickHouse,
  table: 'visitor_days' | 'visitor_hours',
  first: number,
  below = 2 ** 32 - 1,
): Promise<number> {
  if (ch.cluster) return 0;
  const split = await ch.query<{ partition: string }>(
    `SELECT partition_id AS partition FROM system.parts
     WHERE database = currentDatabase() AND table = {table:String} AND active
       AND toUInt32OrZero(partition_id) >= {first:UInt32} AND toUInt32OrZero(partition_id) < {below:UInt32}
     GROUP BY partition_id HAVING count() > 1`,
    { table, first, below },
  );
  for (const { partition } of split) {
    // The engine takes no parameter in a partition clause: the id, a number, is written inline.
    if (!/^\d+$/.test(partition)) continue;
    await ch.command(`OPTIMIZE TABLE ${table} PARTITION ID '${partition}' FINAL`);
  }
  return split.length;
}

/**
 * A condition on `visitor_days` rows: the row's bits meet the days from `firstDay` to `endDay`
 * (excluded; SQL expressions of days since 1970, `firstDay < endDay`), the whole UTC days of a
 * range of `localDays` calendar days. Windows start every 32 days and span 64, so every other
 * one, from the first day's, tiles the days; a row's bits of the range's days in its window are
 * `n` of them from bit `lo`. A range of up to 33 local days is shorter than 34 × 24 hours (the
 * offset changes inside a month add a few hours, never a day: since 1970 the zones that moved
 * across the date line skipped a day), so it holds at most 33 whole UTC days, all inside the
 * first day's window: one window whose bits are a constant, which the engine computes once,
 * where the general form computes them for every row (40 against 66 ms over the 30-day bench
 * range at 10 M events, docs/benchmarks.md).
 */
function windowDays(firstDay: string, endDay: string, localDays: number): string {
  const shifted = (n: string, lo: string) =>
    `bitShiftLeft(bitNot(bitShiftLeft(bitNot(toUInt64(0)), ${n})), ${lo})`;
  if (localDays <= 33) {
    const block = `intDiv(${firstDay}, 32)`;
    // `greatest`: the bits are computed before the rows are tested, also when no day is whole.
    return `block = ${block} AND bitAnd(days, ${shifted(
      `greatest(${endDay} - ${firstDay}, 0)`,
      `(${firstDay} - ${block} * 32)`,
    )}) != 0`;
  }
  const base = 'toInt64(block) * 32';
  const lo = `(greatest(${firstDay}, ${base}) - ${base})`;
  const n = `(least(${endDay}, ${base} + 64) - greatest(${firstDay}, ${base}))`;
  return `block >= intDiv(${firstDay}, 32) AND ${base} < ${endDay}
    AND (block - intDiv(${firstDay}, 32)) % 2 = 0
    AND bitAnd(days, if(${n} >= 64, bitNot(toUInt64(0)), ${shifted(n, lo)})) != 0`;
}
