import { createRoute, z } from '@hono/zod-openapi';
import { METRIC_PARAMETERS, metric } from '@trackhouse/clickhouse';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, json, siteIdParam, withCommon } from '../../schemas';
import { metricItemSchema, paged, pageOf } from './schemas';

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
          ...paged(10, 1000),
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
        ...pageOf(q),
      });
      return c.json({ data }, 200);
    },
  );

  return app;
}
