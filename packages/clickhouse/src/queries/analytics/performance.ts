import type { ClickHouse } from '../../client';
import { WEB_VITALS, type WebVital } from '../../rows';
import { type CommonParams, Params } from '../builder';
import { type Bucket, bucketSecondsOf, exceedsBucketLimit, overBuckets } from './buckets';
import { fromEventsOfType } from './errors';
import { rankedPage, VISITOR_ATTRIBUTES } from './shared';

/** The percentiles every answer gives per vital. */
export const VITAL_PERCENTILES = [
  ['p50', 0.5],
  ['p75', 0.75],
  ['p90', 0.9],
  ['p99', 0.99],
] as const;

/**
 * The web-vitals library's thresholds: a value up to the first is good, up to the second needs
 * improvement, above it is poor. Milliseconds, except CLS (a unitless score).
 */
export const WEB_VITAL_THRESHOLDS: Record<WebVital, readonly [good: number, poor: number]> = {
  lcp: [2500, 4000],
  cls: [0.1, 0.25],
  inp: [200, 500],
  fcp: [1800, 3000],
  ttfb: [800, 1800],
};

export type WebVitalRating = 'good' | 'needs-improvement' | 'poor';

export function rateVital(vital: WebVital, value: number): WebVitalRating {
  const [good, poor] = WEB_VITAL_THRESHOLDS[vital];
  return value <= good ? 'good' : value <= poor ? 'needs-improvement' : 'poor';
}

/**
 * Per vital: `<vital>_p50` … `<vital>_p99` (null without samples), `<vital>_samples` (events that
 * measured it) and `<vital>_rating` (of the p75; null without samples).
 */
export type VitalStats = Record<string, number | string | null>;

/**
 * Percentiles are ClickHouse's `quantilesExactInclusive` over the non-NULL values: sorted values
 * x₁ ≤ … ≤ xₙ, h = (n − 1)·q + 1, the value is x⌊h⌋ + (h − ⌊h⌋)·(x⌊h⌋₊₁ − x⌊h⌋) (x₁ for q = 0,
 * xₙ for q = 1): linear interpolation between the closest ranks, as numpy's default.
 */
const VITAL_AGGREGATES = WEB_VITALS.map(
  (v) =>
    `count(${v}) AS ${v}_n, quantilesExactInclusive(${VITAL_PERCENTILES.map(([, q]) => q).join(', ')})(${v}) AS ${v}_q`,
).join(',\n  ');

type VitalRow = { [K in WebVital as `${K}_n`]: number } & { [K in WebVital as `${K}_q`]: (number | null)[] };

function vitalStats(r: VitalRow | undefined): VitalStats {
  const out: VitalStats = {};
  for (const v of WEB_VITALS) {
    const n = r?.[`${v}_n`] ?? 0;
    const q = r?.[`${v}_q`] ?? [];
    VITAL_PERCENTILES.forEach(([name], i) => {
      out[`${v}_${name}`] = n === 0 ? null : Number(q[i]);
    });
    out[`${v}_samples`] = n;
    out[`${v}_rating`] = n === 0 ? null : rateVital(v, Number(q[1]));
  }
  return out;
}

/**
 * The vitals of the `performance` events in range matching the filters (filters select the
 * performance events themselves): percentiles, samples and the rating of each p75, how many
 * events there are, and the thresholds ratings use.
 */
export async function performanceOverview(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
): Promise<Record<string, number | string | null | typeof WEB_VITAL_THRESHOLDS>> {
  const p = new Params();
  const [row] = await ch.query<VitalRow & { events: number }>(
    `SELECT count() AS events, ${VITAL_AGGREGATES} ${fromEventsOfType(p, siteId, common, 'performance')}`,
    p.values,
  );
  return { ...vitalStats(row), total_performance_events: row?.events ?? 0, thresholds: WEB_VITAL_THRESHOLDS };
}

export type PerformanceBucketedResult =
  | { ok: true; data: (VitalStats & { time: string; event_count: number })[] }
  | { ok: false };

/**
 * The overview's vitals per bucket of the range, oldest first, aligned as `overview-bucketed`
 * (empty buckets: no samples). An open range starts with the bucket of the earliest performance
 * event. More than MAX_BUCKETS buckets → `{ok: false}`.
 */
export async function performanceBucketed(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  bucket: Bucket,
): Promise<PerformanceBucketedResult> {
  if (exceedsBucketLimit(common, bucket)) return { ok: false };
  const p = new Params();
  const rows = await ch.query<VitalRow & { b: number; events: number }>(
    `SELECT ${bucketSecondsOf(p, common, bucket)} AS b, count() AS events, ${VITAL_AGGREGATES}
     ${fromEventsOfType(p, siteId, common, 'performance')}
     GROUP BY b`,
    p.values,
  );
  const buckets = await overBuckets(ch, common, bucket, rows);
  if (!buckets) return { ok: false };
  return {
    ok: true,
    data: buckets.map(({ time, row }) => ({ time, event_count: row?.events ?? 0, ...vitalStats(row) })),
  };
}

/** Event columns the vitals can be broken down by. */
export const PERFORMANCE_DIMENSIONS = ['pathname', 'hostname', ...VISITOR_ATTRIBUTES] as const;
export type PerformanceDimension = (typeof PERFORMANCE_DIMENSIONS)[number];

export type PerformanceDimensionItem = VitalStats & { value: string; event_count: number };

/**
 * The vitals per value of one dimension (its value on each performance event; empty values left
 * out), ranked by performance events (ties by value, byte order), with the mean of each vital
 * (`<vital>_avg`, null without samples); one page and the number of distinct values. Each item
 * also carries its value under the dimension's own name.
 */
export async function performanceByDimension(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  dimension: PerformanceDimension,
  page: { limit: number; offset: number },
): Promise<{ data: PerformanceDimensionItem[]; totalCount: number }> {
  const run = (limit: number, offset: number) => {
    const p = new Params();
    const averages = WEB_VITALS.map((v) => `avg(${v}) AS ${v}_avg`).join(', ');
    return ch.query<
      VitalRow & Record<string, number | null> & { v: string; events: number; n_values: number }
    >(
      `SELECT *, count() OVER () AS n_values FROM (
         SELECT ${dimension} AS v, count() AS events, ${VITAL_AGGREGATES}, ${averages}
         ${fromEventsOfType(p, siteId, common, 'performance', [`${dimension} != ''`])}
         GROUP BY ${dimension})
       ORDER BY events DESC, v ASC
       LIMIT ${p.bind('UInt32', limit)} OFFSET ${p.bind('UInt32', offset)}`,
      p.values,
    );
  };
  const { rows, totals } = await rankedPage(run, page);
  return {
    totalCount: totals?.n_values ?? 0,
    data: rows.map((r) => {
      const item: PerformanceDimensionItem = { value: r.v, [dimension]: r.v, event_count: r.events };
      const stats = vitalStats(r);
      for (const v of WEB_VITALS) {
        item[`${v}_avg`] = r[`${v}_n`] === 0 ? null : Number(r[`${v}_avg`]);
        for (const [name] of VITAL_PERCENTILES) item[`${v}_${name}`] = stats[`${v}_${name}`] ?? null;
        item[`${v}_samples`] = stats[`${v}_samples`] ?? 0;
        item[`${v}_rating`] = stats[`${v}_rating`] ?? null;
      }
      return item;
    }),
  };
}
