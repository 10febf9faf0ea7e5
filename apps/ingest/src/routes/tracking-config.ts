import { ApiError, type HttpEnv } from '@trackhouse/core';
import type { Hono } from 'hono';
import type { IngestContext } from './context';

/**
 * GET /api/site/tracking-config/:siteId — public. Features trackhouse does not record are
 * always off, so browser scripts never send those event types.
 */
export function mountTrackingConfig(app: Hono<HttpEnv>, ctx: IngestContext): void {
  app.get('/api/site/tracking-config/:siteId', async (c) => {
    const raw = c.req.param('siteId');
    if (!/^[1-9]\d{0,9}$/.test(raw) || Number(raw) > 2_147_483_647) {
      throw new ApiError('INVALID_PARAMS', 'siteId must be a positive integer', {
        fieldErrors: { siteId: ['must be a positive integer'] },
        formErrors: [],
      });
    }
    const site = await ctx.pipeline.directory.site(Number(raw));
    if (!site) throw new ApiError('SITE_NOT_FOUND', 'Site not found');
    return c.json({
      trackInitialPageView: true,
      trackSpaNavigation: true,
      trackOutbound: site.record.trackOutbound,
      trackUrlParams: site.record.trackUrlParams,
      trackErrors: true,
      webVitals: false,
      sessionReplay: false,
      trackButtonClicks: false,
      trackCopy: false,
      trackFormInteractions: false,
    });
  });
}
