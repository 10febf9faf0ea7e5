import { rateLimitHeaders } from '@trackhouse/limits';
import type { Context } from 'hono';
import { authenticate, authorizeSite, checkAnonymous, loadSite, type RequestInfo } from '../pipeline';
import { requestInfo } from '../request';
import type { TrackedSite } from '../sites';
import type { IngestContext } from './context';

export interface Admitted {
  site: TrackedSite;
  /** The visitor's address and agent: the body's claim (as for events), else the request's. */
  ip: string;
  userAgent: string;
  /** What the transport knows of the request. */
  info: RequestInfo;
}

/**
 * Steps 4–6 of the tracking pipeline (single events, identify, replay batches): the site, then
 * a key (its rate limit and membership) or, without one, the per-address budget, bot and
 * domain checks.
 */
export async function admit(
  ctx: IngestContext,
  c: Context,
  siteId: number,
  body: { apiKey?: string; ipAddress?: string; userAgent?: string },
  now: Date,
): Promise<Admitted> {
  const site = await loadSite(ctx.pipeline, siteId);
  const info = requestInfo(c, ctx.trustedProxyHops, body.apiKey);
  const userAgent = body.userAgent ?? info.userAgent;
  if (info.apiKey) {
    const creds = await authenticate(ctx.pipeline, info.apiKey, now);
    for (const [k, v] of Object.entries(rateLimitHeaders(creds.rateLimit))) c.header(k, v);
    await authorizeSite(ctx.pipeline, creds, site);
  } else {
    await checkAnonymous(ctx.pipeline, site, userAgent, info, now.getTime());
  }
  return { site, ip: body.ipAddress ?? info.clientIp, userAgent, info };
}
