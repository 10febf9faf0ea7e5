import { createRoute, z } from '@hono/zod-openapi';
import { METRIC_PARAMETERS, metric } from '@trackhouse/clickhouse';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, intParam, json, siteIdParam, withCommon } from '../../schemas';
import { MAX_PAGE, metricItemSchema } from './schemas';

export function metricRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/metric',
      summary: 'Values of one parameter ranked by sessions (custom events for event_name)',
      request: {
        params: siteIdParam,
        query: withCommon({
          parameter: z.enum(METRIC_PARAMETERS),
          limit: intParam(10, 1, 1000),
          page: intParam(1, 1, MAX_PAGE),
        }),
      },
      responses: {
        200: json(
          z.object({ data: z.object({ data: z.array(metricItemSchema), totalCount: z.number() }) }),
          'A page of values and the number of distinct values',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const data = await metric(ctx.ch, site.siteId, toCommon(q), q.parameter, {
        limit: q.limit,
        offset: (q.page - 1) * q.limit,
      });
      return c.json({ data }, 200);
    },
  );

  return app;
}
