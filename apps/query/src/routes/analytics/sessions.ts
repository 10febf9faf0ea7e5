import { createRoute, z } from '@hono/zod-openapi';
import { getSession, listSessions } from '@trackhouse/clickhouse';
import { ApiError } from '@trackhouse/core';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, intParam, json, siteIdParam, withCommon } from '../../schemas';
import { eventSchema } from '../events';
import { paged, pageOf, sessionParams, trafficSessionSchema } from './schemas';

/** Deepest offset into one session's events. */
const MAX_EVENT_OFFSET = 100_000;

export function sessionRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/sessions',
      summary: 'Sessions of the range, newest start first',
      request: {
        params: siteIdParam,
        query: withCommon({
          ...paged(25, 100),
          user_id: z.string().min(1).max(255).optional(),
        }),
      },
      responses: {
        200: json(
          z.object({ data: z.array(trafficSessionSchema), totalCount: z.number() }),
          'A page of sessions and how many there are',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const result = await listSessions(ctx.ch, site.siteId, toCommon(q), {
        ...pageOf(q),
        ...(q.user_id === undefined ? {} : { userId: q.user_id }),
      });
      return c.json(result, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/sessions/{sessionId}',
      summary: 'One session and its events, oldest first (dates and filters not applied)',
      request: {
        params: sessionParams,
        query: withCommon({ limit: intParam(100, 1, 1000), offset: intParam(0, 0, MAX_EVENT_OFFSET) }),
      },
      responses: {
        200: json(
          z.object({
            data: z.object({
              session: trafficSessionSchema,
              events: z.array(eventSchema),
              hasMore: z.boolean(),
            }),
          }),
          'The session and a page of its events',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { siteId, sessionId } = c.req.valid('param');
      const { site } = await ctx.auth.site(c, siteId, 'read');
      const q = c.req.valid('query');
      const data = await getSession(ctx.ch, site.siteId, sessionId, { limit: q.limit, offset: q.offset });
      if (!data) throw new ApiError('SESSION_NOT_FOUND', 'Session not found');
      return c.json({ data }, 200);
    },
  );

  return app;
}
