import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeBounds } from '../builder';
import { daysBetween } from './shared';

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
 * either end from their events. A visitor of both is counted once (one distinct count over the
 * 64-bit keys, `user_key`, which the events carry since 0013 as the sessions do). Exact for any
 * closed range; the days are those of the engine's calendar, as the range's bounds.
 */
export async function rangeVisitors(ch: ClickHouse, siteId: number, common: CommonParams): Promise<number> {
  const p = new Params();
  const { from, to } = rangeBounds(p, common);
  if (!from || !to) throw new Error('rangeVisitors needs a closed range');
  const site = p.bind('UInt32', siteId);
  const dayMs = p.bind('Int64', DAY_MS);
  // The whole UTC days: from the first day starting at or after the range's start (none before
  // day 64, which the table leaves out) to the day the range's end falls in, excluded; the
  // range's other events (all of them when that leaves no day) are read themselves.
  const firstDay = `greatest(intDiv(toUnixTimestamp64Milli(${from}) + ${dayMs} - 1, ${dayMs}), 64)`;
  const endDay = `intDiv(toUnixTimestamp64Milli(${to}), ${dayMs})`;
  const dayStart = (day: string) => `fromUnixTimestamp64Milli(${day} * ${dayMs}, 'UTC')`;
  const [row] = await ch.query<{ users: number }>(
    `SELECT uniqExact(k) AS users FROM (
       SELECT user_key AS k FROM visitor_days
       WHERE site_id = ${site} AND ${firstDay} < ${endDay}
         AND ${windowDays(firstDay, endDay, daysBetween(common.startDate!, common.endDate!))}
       UNION ALL
       SELECT user_key AS k FROM events
       WHERE site_id = ${site} AND timestamp >= ${from} AND timestamp < ${to}
         AND (timestamp < ${dayStart(firstDay)} OR timestamp >= ${dayStart(endDay)}))`,
    p.values,
  );
  return Number(row?.users ?? 0);
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
