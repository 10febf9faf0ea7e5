import { type HttpEnv, toClickHouseDateTime, uuidv7 } from '@trackhouse/core';
import type { Hono } from 'hono';
import { chargeMonthlyQuota, excludedBy, overloaded, visitorIdOf } from '../pipeline';
import { parseWith, readJson, TRACK_BODY_LIMIT } from '../request';
import { identifyPayloadSchema } from '../schemas';
import { admit } from './admit';
import type { IngestContext } from './context';
import { storeRow } from './store';

/**
 * POST /api/identify: links the visitor (the anonymous id its events get) to the id the site
 * knows it by, and records the traits sent. One row in `identifies`; views derive the profile
 * (latest value per trait) and the alias (latest identified id per visitor) from it. The same
 * credential, bot, domain, CORS and per-address rules as tracking; durable before it answers.
 */
export function mountIdentify(app: Hono<HttpEnv>, ctx: IngestContext): void {
  app.post('/api/identify', async (c) => {
    const now = new Date();
    const payload = parseWith(identifyPayloadSchema, await readJson(c, TRACK_BODY_LIMIT));
    const { site, ip, userAgent } = await admit(
      ctx,
      c,
      payload.site_id,
      { apiKey: payload.api_key, ipAddress: payload.ip_address, userAgent: payload.user_agent },
      now,
    );
    const exclusion = excludedBy(site, ip, ctx.pipeline.geo.lookup(ip));
    if (exclusion) return c.json({ success: true, tracked: false, reason: exclusion });
    if (ctx.writers.identifies.isFull()) throw overloaded();
    await chargeMonthlyQuota(ctx.pipeline, site, 0, now);

    // Each value as JSON text: types survive, and JSON null (a removed trait) stays apart from
    // the string "null".
    const traits: Record<string, string> = {};
    for (const [key, value] of Object.entries(payload.traits ?? {})) traits[key] = JSON.stringify(value);
    const row = {
      site_id: site.record.siteId,
      timestamp: toClickHouseDateTime(now),
      event_id: uuidv7(now.getTime()),
      user_id: visitorIdOf(ctx.pipeline, site, ip, userAgent, now),
      identified_user_id: payload.user_id,
      traits,
      is_new_identify: payload.is_new_identify,
    };
    await storeRow(ctx, ctx.writers.identifies, `${JSON.stringify(row)}\n`);
    return c.json({ success: true });
  });
}
