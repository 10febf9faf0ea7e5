import type { HttpEnv } from '@trackhouse/core';
import type { Hono } from 'hono';
import { claimEventId, eventProperties, processEvent, serializeRow } from '../pipeline';
import { parseWith, readJson, TRACK_BODY_LIMIT } from '../request';
import { trackPayloadSchema } from '../schemas';
import { admit } from './admit';
import type { IngestContext } from './context';
import { releaseClaims, store } from './store';

const SUCCESS = JSON.stringify({ success: true });
const JSON_HEADERS = { 'Content-Type': 'application/json' };

/** POST /api/track: the pipeline of SPEC section 6, in its order. */
export function mountTrack(app: Hono<HttpEnv>, ctx: IngestContext): void {
  app.post('/api/track', async (c) => {
    const now = new Date();
    const body = await readJson(c, TRACK_BODY_LIMIT);
    const payload = parseWith(trackPayloadSchema, body);
    const properties = eventProperties(payload);
    const { site, info } = await admit(
      ctx,
      c,
      payload.site_id,
      { apiKey: payload.api_key, userAgent: payload.user_agent },
      now,
    );
    const claimed = payload.event_id
      ? await claimEventId(ctx.pipeline, site.record.siteId, payload.event_id)
      : undefined;
    if (claimed === 'duplicate')
      return c.json({ success: true, tracked: false, reason: 'duplicate_event_id' });
    const claims = claimed ? [claimed.claim] : [];
    try {
      const outcome = await processEvent(ctx.pipeline, site, payload, properties, info, {
        now,
        eventId: payload.event_id?.toLowerCase(),
      });
      if (outcome.kind === 'skip') {
        await releaseClaims(ctx, claims);
        return c.json({ success: true, tracked: false, reason: outcome.reason });
      }
      await store(ctx, [outcome.row], serializeRow(outcome.row), now);
    } catch (err) {
      // Whatever failed, the id was not used: a retry must be able to store the event.
      await releaseClaims(ctx, claims);
      throw err;
    }
    return c.body(SUCCESS, 200, JSON_HEADERS);
  });
}
