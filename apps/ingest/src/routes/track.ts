import type { HttpEnv } from '@trackhouse/core';
import type { Hono } from 'hono';
import {
  authenticate,
  authorizeSite,
  checkAnonymous,
  loadSite,
  overloaded,
  parseProperties,
  processEvent,
  rateLimitHeaders,
  serializeRow,
} from '../pipeline';
import { parseWith, readJson, requestInfo, TRACK_BODY_LIMIT } from '../request';
import { trackPayloadSchema } from '../schemas';
import { OverloadedError } from '../writer/writer';
import type { IngestContext } from './context';

const SUCCESS = JSON.stringify({ success: true });
const JSON_HEADERS = { 'Content-Type': 'application/json' };

/** POST /api/track: the pipeline of SPEC section 6, in its order. */
export function mountTrack(app: Hono<HttpEnv>, ctx: IngestContext): void {
  app.post('/api/track', async (c) => {
    const now = new Date();
    const body = await readJson(c, TRACK_BODY_LIMIT);
    const payload = parseWith(trackPayloadSchema, body);
    const properties = parseProperties(payload.properties);
    const site = await loadSite(ctx.pipeline, payload.site_id);
    const info = requestInfo(c, ctx.trustProxy, payload.api_key);
    const userAgent = payload.user_agent ?? info.userAgent;
    if (info.apiKey) {
      const creds = await authenticate(ctx.pipeline, info.apiKey, now);
      for (const [k, v] of Object.entries(rateLimitHeaders(creds.rateLimit))) c.header(k, v);
      await authorizeSite(ctx.pipeline, creds, site);
    } else {
      checkAnonymous(ctx.pipeline, site, userAgent, info);
    }
    const outcome = await processEvent(ctx.pipeline, site, payload, properties, info, { now });
    if (outcome.kind === 'skip') return c.json({ success: true, tracked: false, reason: outcome.reason });
    try {
      await ctx.writer.append(serializeRow(outcome.row), 1);
    } catch (err) {
      if (err instanceof OverloadedError) throw overloaded();
      throw err;
    }
    return c.body(SUCCESS, 200, JSON_HEADERS);
  });
}
