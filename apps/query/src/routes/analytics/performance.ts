import { createRoute, z } from '@hono/zod-openapi';
import {
  PERFORMANCE_DIMENSIONS,
  performanceBucketed,
  performanceByDimension,
  performanceOverview,
  VITAL_PERCENTILES,
  WEB_VITALS,
} from '@trackhouse/clickhouse';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, json, siteIdParam, withCommon } from '../../schemas';
import { bucketedQuery, paged, pageOf, tooManyBuckets } from './schemas';

const rating = z.enum(['good', 'needs-improvement', 'poor']).nullable();

/** Per vital: the percentiles (null without samples), the samples and the rating of the p75. */
const vitalShape = Object.fromEntries(
  WEB_VITALS.flatMap((v) => [
    ...VITAL_PERCENTILES.map(([p]) => [`${v}_${p}`, z.number().nullable()] as const),
    [`${v}_samples`, z.number()] as const,
    [`${v}_rating`, rating] as const,
  ]),
);

const thresholdsSchema = z
  .object(Object.fromEntries(WEB_VITALS.map((v) => [v, z.tuple([z.number(), z.number()])])))
  .openapi({
    description: 'Per vital [good, poor]: up to the first is good, up to the second needs improvement',
  });

const performanceOverviewSchema = z
  .object({ ...vitalShape, total_performance_events: z.number(), thresholds: thresholdsSchema })
  .openapi('PerformanceOverview');

const performanceBucketSchema = z
  .object({ time: z.string(), event_count: z.number(), ...vitalShape })
  .openapi('PerformanceBucket');

const performanceDimensionSchema = z
  .object({
    value: z.string(),
    event_count: z.number(),
    ...vitalShape,
    ...Object.fromEntries(WEB_VITALS.map((v) => [`${v}_avg`, z.number().nullable()])),
    ...Object.fromEntries(PERFORMANCE_DIMENSIONS.map((d) => [d, z.string().optional()])),
  })
  .openapi('PerformanceDimensionItem');

export function performanceRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/performance/overview',
      summary: 'Web vitals: p50, p75, p90 and p99 of each, its samples and the rating of its p75',
      request: { params: siteIdParam, query: withCommon({}) },
      responses: {
        200: json(z.object({ data: performanceOverviewSchema }), 'The vitals of the range'),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const data = await performanceOverview(ctx.ch, site.siteId, toCommon(c.req.valid('query')));
      return c.json({ data }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/performance/time-series',
      summary: 'Web vitals per bucket, aligned in the time zone, empty buckets included',
      request: {
        params: siteIdParam,
        query: bucketedQuery({}),
      },
      responses: {
        200: json(z.object({ data: z.array(performanceBucketSchema) }), 'One item per bucket, oldest first'),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const result = await performanceBucketed(ctx.ch, site.siteId, toCommon(q), q.bucket);
      if (!result.ok) {
        throw tooManyBuckets();
      }
      return c.json({ data: result.data }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/performance/by-dimension',
      summary: 'Web vitals per value of one dimension, ranked by performance events',
      request: {
        params: siteIdParam,
        query: withCommon({
          dimension: z.enum(PERFORMANCE_DIMENSIONS),
          ...paged(10, 1000),
        }),
      },
      responses: {
        200: json(
          z.object({
            data: z.object({ data: z.array(performanceDimensionSchema), totalCount: z.number() }),
          }),
          'A page of values and the number of distinct values',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const data = await performanceByDimension(ctx.ch, site.siteId, toCommon(q), q.dimension, {
        ...pageOf(q),
      });
      return c.json({ data }, 200);
    },
  );

  return app;
}
