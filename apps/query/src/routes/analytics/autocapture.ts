import { createRoute, z } from '@hono/zod-openapi';
import { AUTOCAPTURE_READ_TYPES, autocaptureEvents, autocaptureValues } from '@trackhouse/clickhouse';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, intParam, json, siteIdParam, withCommon } from '../../schemas';
import { paged, pageOf } from './schemas';

const autocaptureItemSchema = z
  .object({ value: z.string(), count: z.number(), sessionCount: z.number(), lastOccurred: z.string() })
  .openapi('AutocaptureItem');

export function autocaptureRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/events/autocapture',
      summary:
        'Autocaptured values ranked by events: button texts, copied texts, form names, field names, outbound URLs',
      request: {
        params: siteIdParam,
        query: withCommon({
          type: z.enum(AUTOCAPTURE_READ_TYPES),
          ...paged(10, 1000),
        }),
      },
      responses: {
        200: json(
          z.object({ data: z.object({ data: z.array(autocaptureItemSchema), totalCount: z.number() }) }),
          'A page of values and the number of distinct values',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const data = await autocaptureEvents(ctx.ch, site.siteId, toCommon(q), q.type, {
        ...pageOf(q),
      });
      return c.json({ data }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/events/autocapture/values',
      summary: 'Values goals and funnel steps on an autocaptured type can match, ranked by events',
      request: {
        params: siteIdParam,
        query: withCommon({ type: z.enum(AUTOCAPTURE_READ_TYPES), limit: intParam(500, 1, 1000) }),
      },
      responses: {
        200: json(
          z.object({ data: z.array(z.object({ value: z.string(), count: z.number() })) }),
          'The most frequent values, at most `limit`',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const data = await autocaptureValues(ctx.ch, site.siteId, toCommon(q), q.type, q.limit);
      return c.json({ data }, 200);
    },
  );

  return app;
}
