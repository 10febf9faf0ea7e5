import { createRoute, z } from '@hono/zod-openapi';
import { errorBucketed, errorEvents, errorNames } from '@trackhouse/clickhouse';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, json, siteIdParam, withCommon } from '../../schemas';
import { bucketedQuery, paged, pageOf, tooManyBuckets } from './schemas';

/** The error name asked for (an event name is 1..256 characters at ingest). */
const errorMessage = z
  .string()
  .min(1)
  .max(256)
  .openapi({ description: 'The error name (the event name of the error events)' });

const errorNameSchema = z
  .object({
    value: z.string(),
    errorName: z.string(),
    count: z.number(),
    sessionCount: z.number(),
    percentage: z.number(),
  })
  .openapi('ErrorName');

const errorEventSchema = z
  .object({
    event_id: z.string(),
    timestamp: z.string(),
    session_id: z.string(),
    user_id: z.string(),
    identified_user_id: z.string(),
    pathname: z.string(),
    hostname: z.string(),
    page_title: z.string(),
    referrer: z.string(),
    browser: z.string(),
    browser_version: z.string(),
    operating_system: z.string(),
    operating_system_version: z.string(),
    device_type: z.string(),
    country: z.string(),
    region: z.string(),
    city: z.string(),
    message: z.string(),
    stack: z.string().nullable(),
    fileName: z.string().nullable(),
    lineNumber: z.number().nullable(),
    columnNumber: z.number().nullable(),
    properties: z.string(),
  })
  .openapi('ErrorEvent');

export function errorRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/errors/names',
      summary: 'Error names ranked by occurrences, with the sessions they happened in',
      request: {
        params: siteIdParam,
        query: withCommon(paged(10, 1000)),
      },
      responses: {
        200: json(
          z.object({ data: z.object({ data: z.array(errorNameSchema), totalCount: z.number() }) }),
          'A page of error names and the number of distinct names',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const data = await errorNames(ctx.ch, site.siteId, toCommon(q), {
        ...pageOf(q),
      });
      return c.json({ data }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/errors/events',
      summary: 'The error events of one name, newest first',
      request: {
        params: siteIdParam,
        query: withCommon({
          errorMessage,
          ...paged(20, 100),
        }),
      },
      responses: {
        200: json(
          z.object({ data: z.object({ data: z.array(errorEventSchema), totalCount: z.number() }) }),
          'A page of error events and how many there are',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const data = await errorEvents(ctx.ch, site.siteId, toCommon(q), q.errorMessage, {
        ...pageOf(q),
      });
      return c.json({ data }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/errors/time-series',
      summary: 'Occurrences of one error name per bucket, aligned in the time zone, empty buckets included',
      request: {
        params: siteIdParam,
        query: bucketedQuery({ errorMessage }),
      },
      responses: {
        200: json(
          z.object({ data: z.array(z.object({ time: z.string(), error_count: z.number() })) }),
          'One item per bucket, oldest first',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const result = await errorBucketed(ctx.ch, site.siteId, toCommon(q), q.errorMessage, q.bucket);
      if (!result.ok) {
        throw tooManyBuckets();
      }
      return c.json({ data: result.data }, 200);
    },
  );

  return app;
}
