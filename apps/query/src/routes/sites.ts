import { createRoute, z } from '@hono/zod-openapi';
import { deleteSiteEvents } from '@trackhouse/clickhouse';
import { ApiError, domainSchema, generatePrivateLinkKey } from '@trackhouse/core';
import { normalizeIpOrCidr } from '@trackhouse/enrich';
import {
  deleteSite,
  type Role,
  type SiteConfig,
  type SiteRecord,
  setPrivateLinkKey,
  updateSiteConfig,
} from '@trackhouse/postgres';
import { type QueryContext, router } from '../context';
import { errors, json, siteConfigSchema, siteIdParam, siteSchema } from '../schemas';

export function toSite(site: SiteRecord, role: Role | undefined) {
  return {
    id: site.id,
    siteId: site.siteId,
    name: site.name,
    domain: site.domain,
    createdAt: site.createdAt.toISOString(),
    updatedAt: site.updatedAt.toISOString(),
    createdBy: site.createdBy,
    organizationId: site.organizationId,
    public: site.public,
    saltUserIds: site.saltUserIds,
    blockBots: site.blockBots,
    isOwner: role === 'owner' || role === 'admin',
    trackOutbound: site.trackOutbound,
    trackUrlParams: site.trackUrlParams,
    monthlyPageviewLimit: site.monthlyPageviewLimit,
    ...features(site),
  };
}

/** The browser-client switches, in the Site object and the config alike. */
function features(site: SiteRecord) {
  return {
    trackErrors: site.trackErrors,
    webVitals: site.webVitals,
    sessionReplay: site.sessionReplay,
    trackButtonClicks: site.trackButtonClicks,
    trackCopy: site.trackCopy,
    trackFormInteractions: site.trackFormInteractions,
    trackInitialPageView: site.trackInitialPageView,
    trackSpaNavigation: site.trackSpaNavigation,
  };
}

export function toConfig(site: SiteRecord): SiteConfig {
  return {
    public: site.public,
    saltUserIds: site.saltUserIds,
    blockBots: site.blockBots,
    excludedIPs: site.excludedIPs,
    excludedCountries: site.excludedCountries,
    trackOutbound: site.trackOutbound,
    trackUrlParams: site.trackUrlParams,
    monthlyPageviewLimit: site.monthlyPageviewLimit,
    ...features(site),
  };
}

/** SiteConfig fields as accepted on input: lists validated and normalized. */
export const configInput = z.strictObject({
  public: z.boolean().optional(),
  saltUserIds: z.boolean().optional(),
  blockBots: z.boolean().optional(),
  excludedIPs: z
    .array(z.string().max(64))
    .max(100, 'at most 100 entries')
    .superRefine((list, ctx) => {
      list.forEach((entry, i) => {
        if (!normalizeIpOrCidr(entry))
          ctx.addIssue({ code: 'custom', message: `not an IP address or CIDR range: ${entry}`, path: [i] });
      });
    })
    .transform((list) => [...new Set(list.map((e) => normalizeIpOrCidr(e)!))])
    .optional(),
  excludedCountries: z
    .array(z.string().regex(/^[A-Za-z]{2}$/, 'must be a two-letter country code'))
    .max(250)
    .transform((list) => [...new Set(list.map((c) => c.toUpperCase()))])
    .optional(),
  trackOutbound: z.boolean().optional(),
  trackUrlParams: z.boolean().optional(),
  monthlyPageviewLimit: z.number().int().min(0).max(2_147_483_647).nullable().optional(),
  trackErrors: z.boolean().optional(),
  webVitals: z.boolean().optional(),
  sessionReplay: z.boolean().optional(),
  trackButtonClicks: z.boolean().optional(),
  trackCopy: z.boolean().optional(),
  trackFormInteractions: z.boolean().optional(),
  trackInitialPageView: z.boolean().optional(),
  trackSpaNavigation: z.boolean().optional(),
});

/**
 * The update body: SiteConfig fields, plus the name and domain (validated as on creation), which
 * the spec gives no other way to change (docs/decisions.md).
 */
const updateInput = configInput.extend({
  name: z.string().trim().min(1).max(200).optional(),
  domain: domainSchema.optional(),
});

const action = z.object({ action: z.string() });

export function sitesRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}',
      summary: 'Get a site',
      request: { params: siteIdParam },
      responses: { 200: json(siteSchema, 'The site'), ...errors },
    }),
    async (c) => {
      const { site, role } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      return c.json(toSite(site, role), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/sites/{siteId}',
      summary: 'Delete a site, its goals, its private link and all its events',
      request: { params: siteIdParam },
      responses: { 200: json(z.object({ success: z.literal(true) }), 'Deleted'), ...errors },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'admin');
      await deleteSite(ctx.sql, site.siteId);
      // Ingest replicas drop the site at once; rows they had already buffered land after the
      // first delete, so a second pass a little later removes those too.
      await ctx.stores.channel.publish(site.siteId).catch(() => {});
      await deleteSiteEvents(ctx.ch, site.siteId);
      setTimeout(() => deleteSiteEvents(ctx.ch, site.siteId).catch(() => {}), 5_000).unref();
      return c.json({ success: true as const }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'put',
      path: '/api/sites/{siteId}/config',
      summary: 'Change site configuration (and its name or domain)',
      request: {
        params: siteIdParam,
        body: { content: { 'application/json': { schema: updateInput } }, required: true },
      },
      responses: {
        200: json(
          z.object({ success: z.literal(true), message: z.string(), config: siteConfigSchema }),
          'Updated',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'admin');
      const changes = c.req.valid('json');
      if (Object.keys(changes).length === 0) throw new ApiError('NO_FIELDS', 'No fields to update');
      const updated = await updateSiteConfig(ctx.sql, site.siteId, changes);
      if (!updated) throw new ApiError('SITE_NOT_FOUND', 'Site not found');
      await ctx.stores.channel.publish(site.siteId).catch(() => {});
      return c.json(
        { success: true as const, message: 'Site configuration updated', config: toConfig(updated) },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/excluded-ips',
      summary: 'Excluded IP addresses and ranges',
      request: { params: siteIdParam },
      responses: {
        200: json(z.object({ success: z.literal(true), excludedIPs: z.array(z.string()) }), 'The list'),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'member');
      return c.json({ success: true as const, excludedIPs: site.excludedIPs }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/excluded-countries',
      summary: 'Excluded countries',
      request: { params: siteIdParam },
      responses: {
        200: json(z.object({ success: z.literal(true), excludedCountries: z.array(z.string()) }), 'The list'),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'member');
      return c.json({ success: true as const, excludedCountries: site.excludedCountries }, 200);
    },
  );

  const linkResponse = json(
    z.object({ success: z.literal(true), data: z.object({ privateLinkKey: z.string().nullable() }) }),
    'The private link key',
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/private-link-config',
      summary: 'The private link key',
      request: { params: siteIdParam },
      responses: { 200: linkResponse, ...errors },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'admin');
      return c.json({ success: true as const, data: { privateLinkKey: site.privateLinkKey } }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/sites/{siteId}/private-link-config',
      summary: 'Generate or revoke the private link key',
      request: {
        params: siteIdParam,
        body: { content: { 'application/json': { schema: action } }, required: true },
      },
      responses: { 200: linkResponse, ...errors },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'admin');
      const { action: what } = c.req.valid('json');
      let key: string | null;
      if (what === 'generate_private_link_key') key = generatePrivateLinkKey();
      else if (what === 'revoke_private_link_key') key = null;
      else {
        throw new ApiError('INVALID_PAYLOAD', 'Unknown action', {
          fieldErrors: { action: ['must be generate_private_link_key or revoke_private_link_key'] },
          formErrors: [],
        });
      }
      await setPrivateLinkKey(ctx.sql, site.siteId, key);
      return c.json({ success: true as const, data: { privateLinkKey: key } }, 200);
    },
  );

  return app;
}
