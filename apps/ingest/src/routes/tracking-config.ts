import { ApiError, type HttpEnv } from '@trackhouse/core';
import type { Hono } from 'hono';
import { siteIdParam } from '../request';
import type { IngestContext } from './context';

/**
 * GET /api/site/tracking-config/:siteId — public. What the browser client turns on, from the
 * site's configuration (the ingest refuses the event types of features that are off).
 */
export function mountTrackingConfig(app: Hono<HttpEnv>, ctx: IngestContext): void {
  app.get('/api/site/tracking-config/:siteId', async (c) => {
    const site = await ctx.pipeline.directory.site(siteIdParam(c));
    if (!site) throw new ApiError('SITE_NOT_FOUND', 'Site not found');
    const r = site.record;
    return c.json({
      trackInitialPageView: r.trackInitialPageView,
      trackSpaNavigation: r.trackSpaNavigation,
      trackOutbound: r.trackOutbound,
      trackUrlParams: r.trackUrlParams,
      trackErrors: r.trackErrors,
      webVitals: r.webVitals,
      sessionReplay: r.sessionReplay,
      trackButtonClicks: r.trackButtonClicks,
      trackCopy: r.trackCopy,
      trackFormInteractions: r.trackFormInteractions,
    });
  });
}
