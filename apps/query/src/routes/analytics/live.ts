import { createRoute, z } from '@hono/zod-openapi';
import { liveUserCount } from '@trackhouse/clickhouse';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, intParam, json, siteIdParam, withCommon } from '../../schemas';

export function liveRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/live-user-count',
      summary: 'Distinct users with an event in the last minutes (dates ignored, filters applied)',
      request: { params: siteIdParam, query: withCommon({ minutes: intParam(5, 1, 60) }) },
      responses: { 200: json(z.object({ count: z.number() }), 'Users seen lately'), ...errors },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      return c.json({ count: await liveUserCount(ctx.ch, site.siteId, toCommon(q), q.minutes) }, 200);
    },
  );

  return app;
}
