import { createRoute, z } from '@hono/zod-openapi';
import {
  decodeCursor,
  encodeCursor,
  eventNames,
  eventProperties,
  listEvents,
  MAX_LIST_ROWS,
  outboundLinks,
} from '@trackhouse/clickhouse';
import { ApiError, storable } from '@trackhouse/core';
import { toCommon } from '../common';
import { type QueryContext, router } from '../context';
import { isoInstant } from '../params';
import { errors, intParam, json, siteIdParam, withCommon } from '../schemas';

/** `limit` of the aggregated lists: at most MAX_LIST_ROWS rows, the most frequent first. */
const limit = intParam(MAX_LIST_ROWS, 1, MAX_LIST_ROWS).openapi({
  description: `The most rows to answer, the most frequent first (at most ${MAX_LIST_ROWS})`,
});

export const eventSchema = z
  .object({
    timestamp: z.string(),
    type: z.string(),
    event_name: z.string(),
    properties: z.string(),
    session_id: z.string(),
    user_id: z.string(),
    identified_user_id: z.string(),
    pathname: z.string(),
    querystring: z.string(),
    hostname: z.string(),
    page_title: z.string(),
    referrer: z.string(),
    browser: z.string(),
    browser_version: z.string(),
    operating_system: z.string(),
    operating_system_version: z.string(),
    language: z.string(),
    country: z.string(),
    region: z.string(),
    city: z.string(),
    lat: z.number(),
    lon: z.number(),
    screen_width: z.number(),
    screen_height: z.number(),
    device_type: z.string(),
    channel: z.string(),
    event_id: z.string(),
  })
  .openapi('Event');

export function eventRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/events',
      summary: 'Pageviews, custom events and outbound clicks, newest first, with exact cursor paging',
      request: {
        params: siteIdParam,
        query: withCommon({
          page_size: intParam(50, 1, 1000),
          before_timestamp: isoInstant.optional(),
          cursor: z.string().max(200).optional(),
        }),
      },
      responses: {
        200: json(
          z.object({
            data: z.array(eventSchema),
            cursor: z.object({
              hasMore: z.boolean(),
              oldestTimestamp: z.string().nullable(),
              next: z.string().nullable(),
            }),
          }),
          'A page of events',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const cursor = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
      if (q.cursor !== undefined && !cursor) {
        throw new ApiError('INVALID_PARAMS', 'Invalid parameters', {
          fieldErrors: { cursor: ['not a cursor of this API'] },
          formErrors: [],
        });
      }
      const page = await listEvents(ctx.ch, site.siteId, toCommon(q), {
        pageSize: q.page_size,
        cursor,
        beforeTimestamp: q.before_timestamp ? new Date(q.before_timestamp).toISOString() : undefined,
      });
      return c.json(
        {
          data: page.events,
          cursor: {
            hasMore: page.hasMore,
            oldestTimestamp: page.events.at(-1)?.timestamp ?? null,
            next: page.next ? encodeCursor(page.next) : null,
          },
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/events/names',
      summary: 'Custom event names by count',
      request: { params: siteIdParam, query: withCommon({ limit }) },
      responses: {
        200: json(
          z.object({ data: z.array(z.object({ eventName: z.string(), count: z.number() })) }),
          'Names',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      return c.json({ data: await eventNames(ctx.ch, site.siteId, toCommon(q), q.limit) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/events/properties',
      summary: 'Top-level properties of one custom event, by count',
      request: {
        params: siteIdParam,
        // As stored: NUL and lone surrogates became U+FFFD.
        query: withCommon({ event_name: z.string().min(1).max(256).overwrite(storable), limit }),
      },
      responses: {
        200: json(
          z.object({
            data: z.array(
              z.object({ propertyKey: z.string(), propertyValue: z.string(), count: z.number() }),
            ),
          }),
          'Properties',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      return c.json(
        { data: await eventProperties(ctx.ch, site.siteId, toCommon(q), q.event_name, q.limit) },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/events/outbound',
      summary: 'Outbound link clicks by count',
      request: { params: siteIdParam, query: withCommon({ limit }) },
      responses: {
        200: json(
          z.object({
            data: z.array(z.object({ url: z.string(), count: z.number(), lastClicked: z.string() })),
          }),
          'Links',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      return c.json({ data: await outboundLinks(ctx.ch, site.siteId, toCommon(q), q.limit) }, 200);
    },
  );

  return app;
}
