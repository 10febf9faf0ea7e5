import { createRoute, z } from '@hono/zod-openapi';
import { JOURNEY_STEPS, journeys } from '@trackhouse/clickhouse';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, intParam, json, siteIdParam, withCommon } from '../../schemas';

const journeySchema = z
  .object({ path: z.array(z.string()), count: z.number(), percentage: z.number() })
  .openapi('Journey');

export function journeyRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/journeys',
      summary: 'The most common sequences of pages within sessions',
      request: {
        params: siteIdParam,
        query: withCommon({
          steps: intParam(JOURNEY_STEPS, 2, 10),
          limit: intParam(100, 1, 500),
          start_page: z
            .string()
            .max(2048)
            .startsWith('/', 'must start with /')
            .optional()
            .openapi({ description: 'a page pattern as goals take it: journeys start at its first visit' }),
        }),
      },
      responses: {
        200: json(z.object({ journeys: z.array(journeySchema) }), 'Journeys, most sessions first'),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const data = await journeys(ctx.ch, site.siteId, toCommon(q), {
        steps: q.steps,
        limit: q.limit,
        ...(q.start_page === undefined ? {} : { startPage: q.start_page }),
      });
      return c.json({ journeys: data }, 200);
    },
  );

  return app;
}
