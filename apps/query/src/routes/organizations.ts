import { createRoute, z } from '@hono/zod-openapi';
import { ApiError, domainSchema, storable } from '@trackhouse/core';
import { createSite, getOrganization, listSites, listUserOrganizations, ROLES } from '@trackhouse/postgres';
import { type QueryContext, router } from '../context';
import { errors, json, siteSchema } from '../schemas';
import { configInput, toSite } from './sites';

const orgParam = z.object({
  // Storable like every string that reaches Postgres: an id with NUL is one no record has (404).
  organizationId: z
    .string()
    .min(1)
    .max(64)
    .overwrite(storable)
    .openapi({ param: { name: 'organizationId', in: 'path' } }),
});

export const userOrganizationSchema = z
  .object({ id: z.string(), name: z.string(), role: z.enum(ROLES) })
  .openapi('UserOrganization');

const createSiteBody = configInput.extend({ name: z.string().trim().min(1).max(200), domain: domainSchema });

export function organizationRoutes(ctx: QueryContext) {
  const app = router();

  const ensureOrg = async (id: string) => {
    if (!(await getOrganization(ctx.sql, id)))
      throw new ApiError('ORGANIZATION_NOT_FOUND', 'Organization not found');
  };

  // The dashboard's way from a key to its sites: a key names a user, not an organization.
  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/user/organizations',
      summary: "The caller's organizations, with the caller's role in each",
      responses: {
        200: json(
          z.object({
            data: z.array(userOrganizationSchema),
          }),
          'The organizations, oldest first',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const caller = await ctx.auth.requireCaller(c);
      const data = await listUserOrganizations(ctx.sql, caller.userId);
      return c.json({ data: data.map(({ id, name, role }) => ({ id, name, role })) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/organizations/{organizationId}/sites',
      summary: 'Create a site (admin or owner)',
      request: {
        params: orgParam,
        body: { content: { 'application/json': { schema: createSiteBody } }, required: true },
      },
      responses: { 201: json(siteSchema, 'The new site'), ...errors },
    }),
    async (c) => {
      const { organizationId } = c.req.valid('param');
      const caller = await ctx.auth.requireCaller(c);
      await ensureOrg(organizationId);
      const role = await ctx.auth.orgRole(caller, organizationId, 'admin');
      const { name, domain: siteDomain, ...config } = c.req.valid('json');
      const site = await createSite(ctx.sql, {
        organizationId,
        name,
        domain: siteDomain,
        createdBy: caller.userId,
        ...config,
      });
      // An ingest replica may hold a cached 'no such site' for this id: drop it.
      await ctx.stores.channel.publish(site.siteId).catch(() => {});
      return c.json(toSite(site, role), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/organizations/{organizationId}/sites',
      summary: "The organization's sites",
      request: { params: orgParam },
      responses: { 200: json(z.object({ data: z.array(siteSchema) }), 'The sites'), ...errors },
    }),
    async (c) => {
      const { organizationId } = c.req.valid('param');
      const caller = await ctx.auth.requireCaller(c);
      await ensureOrg(organizationId);
      const role = await ctx.auth.orgRole(caller, organizationId, 'member');
      const sites = await listSites(ctx.sql, organizationId);
      return c.json({ data: sites.map((s) => toSite(s, role)) }, 200);
    },
  );

  return app;
}
