import { createRoute, z } from '@hono/zod-openapi';
import { listTraitKeys, listTraitUsers, listTraitValues } from '@trackhouse/clickhouse';
import { type QueryContext, router } from '../../context';
import { errors, intParam, json, siteIdParam } from '../../schemas';
import { traitsSchema } from './users';

/** Deepest offset into a list of trait values or users. */
const MAX_OFFSET = 100_000;

const traitKey = z.string().min(1).max(255).openapi({ description: 'The trait key, exactly' });

const traitUserSchema = z
  .object({
    user_id: z.string(),
    identified_user_id: z.string(),
    traits: traitsSchema,
    country: z.string(),
    region: z.string(),
    city: z.string(),
    browser: z.string(),
    operating_system: z.string(),
    device_type: z.string(),
    sessions: z.number(),
  })
  .openapi('TraitUser');

/**
 * The site's user profiles by trait (all time: dates and filters do not apply). Members only,
 * as traits are personal data the site sent about its users.
 */
export function traitRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/user-traits/keys',
      summary: 'Trait keys of the user profiles, with how many users have each, most first',
      request: { params: siteIdParam },
      responses: {
        200: json(
          z.object({ keys: z.array(z.object({ key: z.string(), userCount: z.number() })) }),
          'Every trait key',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'member');
      return c.json({ keys: await listTraitKeys(ctx.ch, site.siteId) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/user-traits/values',
      summary: "A trait's values (as text) with how many users have each, most first",
      request: {
        params: siteIdParam,
        query: z.object({
          key: traitKey,
          limit: intParam(1000, 1, 1000),
          offset: intParam(0, 0, MAX_OFFSET),
        }),
      },
      responses: {
        200: json(
          z.object({
            values: z.array(z.object({ value: z.string(), userCount: z.number() })),
            total: z.number(),
            hasMore: z.boolean(),
          }),
          'A page of values and how many there are',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'member');
      const q = c.req.valid('query');
      return c.json(
        await listTraitValues(ctx.ch, site.siteId, q.key, { limit: q.limit, offset: q.offset }),
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/user-traits/users',
      summary: 'Identified users whose trait has this value (as text), by identified id',
      request: {
        params: siteIdParam,
        query: z.object({
          key: traitKey,
          value: z.string().max(1024).openapi({ description: 'The value as text, exactly' }),
          limit: intParam(50, 1, 100),
          offset: intParam(0, 0, MAX_OFFSET),
        }),
      },
      responses: {
        200: json(
          z.object({ users: z.array(traitUserSchema), total: z.number(), hasMore: z.boolean() }),
          'A page of users and how many there are',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'member');
      const q = c.req.valid('query');
      const page = { limit: q.limit, offset: q.offset };
      return c.json(await listTraitUsers(ctx.ch, site.siteId, q.key, q.value, page), 200);
    },
  );

  return app;
}
