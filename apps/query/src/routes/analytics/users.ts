import { createRoute, z } from '@hono/zod-openapi';
import { getUser, listUsers, USER_SORTS, type UserSearch } from '@trackhouse/clickhouse';
import { ApiError } from '@trackhouse/core';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, json, siteIdParam, withCommon } from '../../schemas';
import { invalidParam, listedUserSchema, paged, pageOf, trafficUserSchema, userParams } from './schemas';

/** A merged profile: trait -> its latest value, parsed back from JSON. */
export const traitsSchema = z
  .record(z.string(), z.unknown())
  .openapi('UserTraits', { description: 'The merged profile of the identified id ({} without one)' });

const profileUserSchema = trafficUserSchema.extend({ traits: traitsSchema }).openapi('UserProfile');
const listedProfileUserSchema = listedUserSchema
  .extend({ traits: traitsSchema })
  .openapi('ListedUserProfile');

const searchText = (description: string) => z.string().min(1).max(255).optional().openapi({ description });

/**
 * Profiles are personal data the site sent about its users: only members see traits or narrow
 * the list by them (a public or private-link viewer gets `traits: {}`).
 */
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
          ...paged(25, 100),
          sort: z.enum(USER_SORTS).default('last_seen'),
          order: z.enum(['asc', 'desc']).default('desc'),
          trait_key: searchText('With trait_value: only users whose profile has this trait'),
          trait_value: z
            .string()
            .max(1024)
            .optional()
            .openapi({ description: 'The trait value as text (a JSON string decoded), matched exactly' }),
          search: searchText('Case-insensitive part of the anonymous id, the identified id or a trait value'),
        }),
      },
      responses: {
        200: json(
          z.object({ data: z.array(listedProfileUserSchema), totalCount: z.number() }),
          'A page of users and how many there are',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { siteId } = c.req.valid('param');
      const { site, role } = await ctx.auth.site(c, siteId, 'read');
      const q = c.req.valid('query');
      if ((q.trait_key === undefined) !== (q.trait_value === undefined)) {
        throw invalidParam(
          q.trait_key === undefined ? 'trait_key' : 'trait_value',
          'trait_key and trait_value go together',
        );
      }
      const search: UserSearch = {
        ...(q.trait_key === undefined ? {} : { traitKey: q.trait_key }),
        ...(q.trait_value === undefined ? {} : { traitValue: q.trait_value }),
        ...(q.search === undefined ? {} : { search: q.search }),
      };
      // Narrowing by profile is for members: a viewer gets that route's 401 or 403.
      if (role === undefined && Object.keys(search).length > 0) await ctx.auth.site(c, siteId, 'member');
      const result = await listUsers(
        ctx.ch,
        site.siteId,
        toCommon(q),
        {
          ...pageOf(q),
          sort: q.sort,
          order: q.order,
          profiles: role !== undefined,
        },
        search,
      );
      return c.json(result, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/users/{userId}',
      summary: 'One user over all time, by anonymous or identified id',
      request: { params: userParams, query: withCommon({}) },
      responses: { 200: json(z.object({ data: profileUserSchema }), 'The user'), ...errors },
    }),
    async (c) => {
      const { siteId, userId } = c.req.valid('param');
      const { site, role } = await ctx.auth.site(c, siteId, 'read');
      const data = await getUser(ctx.ch, site.siteId, userId, role !== undefined);
      if (!data) throw new ApiError('USER_NOT_FOUND', 'User not found');
      return c.json({ data }, 200);
    },
  );

  return app;
}
