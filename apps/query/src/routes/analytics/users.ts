import { createRoute, z } from '@hono/zod-openapi';
import { getUser, listUsers, USER_SORTS } from '@trackhouse/clickhouse';
import { ApiError } from '@trackhouse/core';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, intParam, json, siteIdParam, withCommon } from '../../schemas';
import { listedUserSchema, MAX_PAGE, trafficUserSchema, userParams } from './schemas';

export function userRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/users',
      summary: 'Visitors (anonymous ids) of the range, counted over their events in range',
      request: {
        params: siteIdParam,
        query: withCommon({
          page: intParam(1, 1, MAX_PAGE),
          limit: intParam(25, 1, 100),
          sort: z.enum(USER_SORTS).default('last_seen'),
          order: z.enum(['asc', 'desc']).default('desc'),
        }),
      },
      responses: {
        200: json(
          z.object({ data: z.array(listedUserSchema), totalCount: z.number() }),
          'A page of users and how many there are',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const result = await listUsers(ctx.ch, site.siteId, toCommon(q), {
        limit: q.limit,
        offset: (q.page - 1) * q.limit,
        sort: q.sort,
        order: q.order,
      });
      return c.json(result, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/users/{userId}',
      summary: 'One user over all time, by anonymous or identified id',
      request: { params: userParams, query: withCommon({}) },
      responses: { 200: json(z.object({ data: trafficUserSchema }), 'The user'), ...errors },
    }),
    async (c) => {
      const { siteId, userId } = c.req.valid('param');
      const { site } = await ctx.auth.site(c, siteId, 'read');
      const data = await getUser(ctx.ch, site.siteId, userId);
      if (!data) throw new ApiError('USER_NOT_FOUND', 'User not found');
      return c.json({ data }, 200);
    },
  );

  return app;
}
