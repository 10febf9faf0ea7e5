import type { ClickHouse } from '../../client';
import { type CommonParams, Params, whereClause } from '../builder';
import { userKey } from './rollup';
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

/**
 * Cohorts of visitors (anonymous `user_id`) by the local day or week of their first event in
 * the range, and for each later period how many of them had an event in it (visitors told apart
 * by the number their 16 hex digits spell, as the rollup does). Events are those in
 * range matching every filter (as SPEC 13 counts users). One pass groups the events by visitor
 * and period; a second groups visitors by cohort and period. Both dates are required.
 */
export async function retention(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams & { startDate: string; endDate: string },
  mode: RetentionMode,
): Promise<Retention> {
  const p = new Params();
  const tz = p.bind('String', common.timeZone);
  const period = mode === 'day' ? `toDate(timestamp, ${tz})` : `toMonday(timestamp, ${tz})`;
  const days = mode === 'day' ? 1 : 7;
  const rows = await ch.query<{ cohort: string; period: number; visitors: number }>(
    `SELECT toString(first) AS cohort, intDiv(dateDiff('day', first, at), ${days}) AS period, count() AS visitors
     FROM (
       SELECT r_user, min(at_period) AS first, groupArray(at_period) AS periods
       FROM (
         SELECT ${userKey('user_id')} AS r_user, ${period} AS at_period FROM events
         WHERE ${whereClause(p, siteId, common)}
         GROUP BY r_user, at_period)
       GROUP BY r_user)
     ARRAY JOIN periods AS at
     GROUP BY cohort, period`,
    p.values,
  );

  const first = mode === 'day' ? common.startDate : monday(common.startDate);
  const last = mode === 'day' ? common.endDate : monday(common.endDate);
  const periods = Math.round((daysBetween(first, last) - 1) / days) + 1;
  const byCohort = new Map<string, Map<number, number>>();
  for (const r of rows) {
    const counts = byCohort.get(r.cohort) ?? new Map<number, number>();
    counts.set(Number(r.period), Number(r.visitors));
    byCohort.set(r.cohort, counts);
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
