import { createRoute, z } from '@hono/zod-openapi';
import { comparedOverviews, overview, overviewBucketed, previousRange } from '@trackhouse/clickhouse';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, json, siteIdParam, withCommon } from '../../schemas';
import { bucketedQuery, tooManyBuckets, trafficBucketSchema, trafficSummarySchema } from './schemas';

export function overviewRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/overview',
      summary: 'Sessions, pageviews, users, pages per session, bounce rate and session duration',
      request: {
        params: siteIdParam,
        query: withCommon({ compare: z.enum(['previous']).optional() }).refine(
          (q) => q.compare === undefined || (q.start_date !== undefined && q.end_date !== undefined),
          { message: 'compare=previous needs start_date and end_date', path: ['compare'] },
        ),
      },
      responses: {
        200: json(
          z.object({ data: trafficSummarySchema, previous: trafficSummarySchema.optional() }),
          'The range, and the range of equal length before it with compare=previous',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const common = toCommon(q);
      if (q.compare === undefined || !common.startDate || !common.endDate) {
        return c.json({ data: await overview(ctx.ch, site.siteId, common) }, 200);
      }
      const before = previousRange(common.startDate, common.endDate);
      const [data, previous] = await comparedOverviews(ctx.ch, site.siteId, common, { ...common, ...before });
      return c.json({ data, previous }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/overview-bucketed',
      summary: 'The overview per bucket of the range, aligned in the time zone, empty buckets included',
      request: {
        params: siteIdParam,
        query: bucketedQuery({}),
      },
      responses: {
        200: json(z.object({ data: z.array(trafficBucketSchema) }), 'One item per bucket, oldest first'),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const result = await overviewBucketed(ctx.ch, site.siteId, toCommon(q), q.bucket);
      if (!result.ok) {
        throw tooManyBuckets();
      }
      return c.json({ data: result.data }, 200);
    },
  );

  return app;
}
