import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeBounds, whereClause } from '../builder';
import { addDays, daysBetween, ratio } from './shared';

export type RetentionMode = 'day' | 'week';

export interface RetentionCohort {
  /** Visitors first seen in the cohort's period. */
  size: number;
  /** Per period after the cohort's (0 = its own): visitors of the cohort active then; null past the range. */
  counts: (number | null)[];
  /** `counts` as a percentage of `size`. */
  percentages: (number | null)[];
}

export interface Retention {
  /** Keyed by the period's first local date (`YYYY-MM-DD`; weeks start on Monday), newest first. */
  cohorts: Record<string, RetentionCohort>;
  /** The last period index any cohort can have (periods in the range − 1). */
  maxPeriods: number;
}

/** The Monday starting the week of `date`. */
function monday(date: string): string {
  const weekday = (new Date(`${date}T00:00:00Z`).getUTCDay() + 6) % 7;
  return addDays(date, -weekday);
}

/** Periods up to which a visitor's active periods fit one 64-bit mask. */
const MASK_PERIODS = 64;

/** Per cohort (its period's index in the range) and later period: the cohort's visitors active then. */
type ActiveRow = { cohort: number; period: number; visitors: number };

/** The index in the range (from `first`) of the local day or week of `time` (by default, each event's). */
function periodIndex(
  p: Params,
  common: CommonParams,
  mode: RetentionMode,
  first: string,
  time = 'timestamp',
): string {
  const tz = p.bind('String', common.timeZone);
  const local = mode === 'day' ? `toDate(${time}, ${tz})` : `toMonday(${time}, ${tz})`;
  return `intDiv(dateDiff('day', ${p.bind('Date', first)}, ${local}), ${mode === 'day' ? 1 : 7})`;
}

const QUARTER_MS = 900_000;

/**
 * The range as UTC quarter hours (from, and the one after the last), when it is a run of whole
 * ones after 1970 (`visitor_quarters` holds no earlier event): in a zone whose offsets are whole
 * quarter hours (every zone's since 1972), so are its local days and weeks.
 */
async function rangeQuarters(ch: ClickHouse, common: CommonParams): Promise<[number, number] | undefined> {
  const p = new Params();
  const { from, to } = rangeBounds(p, common);
  const [row] = await ch.query<{ f: number; t: number }>(
    `SELECT toUnixTimestamp64Milli(${from}) AS f, toUnixTimestamp64Milli(${to}) AS t`,
    p.values,
  );
  const [f, t] = [Number(row?.f), Number(row?.t)];
  return f >= 0 && f % QUARTER_MS === 0 && t % QUARTER_MS === 0
    ? [f / QUARTER_MS, t / QUARTER_MS]
    : undefined;
}

/**
 * activeByMask over the visitors' quarter hours (`visitor_quarters`, migration 0011) instead of
 * their events, unfiltered: a visitor is active in a period exactly when it has a quarter hour
 * in it, the rows are fewer than the events (2.7 M against 10 M at 10 M events), and each quarter
 * hour's period is computed once, not per row.
 */
function activeQuarters(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  mode: RetentionMode,
  first: string,
  [q0, q1]: [number, number],
): Promise<ActiveRow[]> {
  const p = new Params();
  const from = p.bind('UInt32', q0);
  const periods = `arrayMap(q -> toUInt8(${periodIndex(p, common, mode, first, `toDateTime(q * 900, 'UTC')`)}),
    range(${from}, ${p.bind('UInt32', q1)}))`;
  return ch.query<ActiveRow>(
    `WITH ${periods} AS r_period_of
     SELECT r_active[1] AS cohort, r_at - r_active[1] AS period, count() AS visitors
     FROM (
       SELECT bitPositionsToArray(groupBitOr(bitShiftLeft(toUInt64(1), r_period_of[quarter - ${from} + 1]))) AS r_active
       FROM visitor_quarters
       WHERE site_id = ${p.bind('UInt32', siteId)} AND quarter >= ${from} AND quarter < ${p.bind('UInt32', q1)}
       GROUP BY user_key)
     ARRAY JOIN r_active AS r_at
     GROUP BY cohort, period`,
    p.values,
  );
}

/**
 * One pass grouping the events by visitor, each visitor's active periods as the bits of one
 * number: the lowest bit set is the cohort.
 */
function activeByMask(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  mode: RetentionMode,
  first: string,
): Promise<ActiveRow[]> {
  const p = new Params();
  const bit = `bitShiftLeft(toUInt64(1), ${periodIndex(p, common, mode, first)})`;
  return ch.query<ActiveRow>(
    `SELECT r_active[1] AS cohort, r_at - r_active[1] AS period, count() AS visitors
     FROM (
       SELECT bitPositionsToArray(groupBitOr(${bit})) AS r_active FROM events
       WHERE ${whereClause(p, siteId, common)}
       GROUP BY user_key)
     ARRAY JOIN r_active AS r_at
     GROUP BY cohort, period`,
    p.values,
  );
}

/** activeByMask for longer ranges: visitors' periods grouped, then visitors. */
function activeByPeriod(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  mode: RetentionMode,
  first: string,
): Promise<ActiveRow[]> {
  const p = new Params();
  return ch.query<ActiveRow>(
    `SELECT r_first AS cohort, r_at - r_first AS period, count() AS visitors
     FROM (
       SELECT r_user, min(r_period) AS r_first, groupArray(r_period) AS r_periods
       FROM (
         SELECT user_key AS r_user, ${periodIndex(p, common, mode, first)} AS r_period FROM events
         WHERE ${whereClause(p, siteId, common)}
         GROUP BY r_user, r_period)
       GROUP BY r_user)
     ARRAY JOIN r_periods AS r_at
     GROUP BY cohort, period`,
    p.values,
  );
}

/**
 * Cohorts of visitors (anonymous `user_id`) by the local day or week of their first event in
 * the range, and for each later period how many of them had an event in it (visitors told apart
 * by the number their 16 hex digits spell, as the rollup does). Events are those in
 * range matching every filter (as SPEC 13 counts users). One pass groups the events by visitor
 * (their active periods as bits while the range has at most 64), a second groups visitors by
 * cohort and period. Both dates are required.
 */
export async function retention(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams & { startDate: string; endDate: string },
  mode: RetentionMode,
): Promise<Retention> {
  const days = mode === 'day' ? 1 : 7;
  const first = mode === 'day' ? common.startDate : monday(common.startDate);
  const last = mode === 'day' ? common.endDate : monday(common.endDate);
  const periods = Math.round((daysBetween(first, last) - 1) / days) + 1;
  const quarters =
    periods <= MASK_PERIODS && ch.rollups !== false && common.filters.length === 0
      ? await rangeQuarters(ch, common)
      : undefined;
  const rows = await (quarters
    ? activeQuarters(ch, siteId, common, mode, first, quarters)
    : periods <= MASK_PERIODS
      ? activeByMask(ch, siteId, common, mode, first)
      : activeByPeriod(ch, siteId, common, mode, first));

  const byCohort = new Map<string, Map<number, number>>();
  for (const r of rows) {
    const cohort = addDays(first, Number(r.cohort) * days);
    const counts = byCohort.get(cohort) ?? new Map<number, number>();
    counts.set(Number(r.period), Number(r.visitors));
    byCohort.set(cohort, counts);
  }
  const cohorts: Record<string, RetentionCohort> = {};
  for (const cohort of [...byCohort.keys()].sort().reverse()) {
    const counts = byCohort.get(cohort)!;
    const size = counts.get(0) ?? 0;
    const index = Math.round((daysBetween(first, cohort) - 1) / days);
    const within = Array.from({ length: periods }, (_, j) =>
      index + j < periods ? (counts.get(j) ?? 0) : null,
    );
    cohorts[cohort] = {
      size,
      counts: within,
      percentages: within.map((n) => (n === null ? null : ratio(n * 100, size))),
    };
  }
  return { cohorts, maxPeriods: periods - 1 };
}
