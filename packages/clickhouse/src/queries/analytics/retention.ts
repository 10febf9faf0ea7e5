import type { ClickHouse } from '../../client';
import { type CommonParams, Params, whereClause } from '../builder';
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

/** The index in the range (from `first`) of the local day or week of each event. */
function periodIndex(p: Params, common: CommonParams, mode: RetentionMode, first: string): string {
  const tz = p.bind('String', common.timeZone);
  const local = mode === 'day' ? `toDate(timestamp, ${tz})` : `toMonday(timestamp, ${tz})`;
  return `intDiv(dateDiff('day', ${p.bind('Date', first)}, ${local}), ${mode === 'day' ? 1 : 7})`;
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
  const rows = await (periods <= MASK_PERIODS
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
