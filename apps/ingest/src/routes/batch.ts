import { ApiError, type HttpEnv } from '@trackhouse/core';
import type { Hono } from 'hono';
import {
  authenticate,
  authorizeSite,
  type Credentials,
  type EventRow,
  loadSite,
  overloaded,
  parseProperties,
  processEvent,
  type RequestInfo,
  rateLimitHeaders,
  serializeRow,
} from '../pipeline';
import { BATCH_BODY_LIMIT, parseWith, readJson, requestInfo } from '../request';
import { batchEnvelopeSchema, batchItemSchema } from '../schemas';
import { OverloadedError } from '../writer/writer';
import type { IngestContext } from './context';

const MAX_AGE_MS = 7 * 86_400_000;
const MAX_AHEAD_MS = 5 * 60_000;
/** Client event ids are remembered this long; a replay within it is stored once. */
const EVENT_ID_MEMORY_MS = 8 * 86_400_000;

export interface ItemResult {
  index: number;
  success: boolean;
  error?: string;
  code?: string;
  details?: Record<string, unknown>;
  tracked?: false;
  reason?: string;
}

/** POST /api/track/batch: 1..1000 events, one rate-limit hit, per-item results, one fsync. */
export function mountBatch(app: Hono<HttpEnv>, ctx: IngestContext): void {
  app.post('/api/track/batch', async (c) => {
    const now = new Date();
    const envelope = parseWith(batchEnvelopeSchema, await readJson(c, BATCH_BODY_LIMIT));
    const info = requestInfo(c, ctx.trustProxy, envelope.api_key);
    if (!info.apiKey) throw new ApiError('MISSING_API_KEY', 'An API key is required for batch tracking');
    const creds = await authenticate(ctx.pipeline, info.apiKey, now);
    for (const [k, v] of Object.entries(rateLimitHeaders(creds.rateLimit))) c.header(k, v);

    const outcomes = await Promise.all(
      envelope.events.map((raw, index) => processItem(ctx, creds, info, raw, index, now)),
    );
    let lines = '';
    let rows = 0;
    for (const o of outcomes) {
      if (!o.row) continue;
      lines += serializeRow(o.row);
      rows++;
    }
    if (rows > 0) {
      try {
        await ctx.writer.append(lines, rows);
      } catch (err) {
        await Promise.all(outcomes.map((o) => o.claimed && ctx.pipeline.stores.once.release(o.claimed)));
        if (err instanceof OverloadedError) throw overloaded();
        throw err;
      }
    }
    const results = outcomes.map((o) => o.result);
    const rejected = results.filter((r) => !r.success).length;
    return c.json({ success: true, accepted: results.length - rejected, rejected, results });
  });
}

async function processItem(
  ctx: IngestContext,
  creds: Credentials,
  info: RequestInfo,
  raw: unknown,
  index: number,
  now: Date,
): Promise<{ result: ItemResult; row?: EventRow; claimed?: string }> {
  let claimed: string | undefined;
  try {
    const item = parseWith(batchItemSchema, raw);
    const timestamp = item.timestamp === undefined ? undefined : new Date(item.timestamp);
    if (
      timestamp &&
      (timestamp.getTime() < now.getTime() - MAX_AGE_MS || timestamp.getTime() > now.getTime() + MAX_AHEAD_MS)
    ) {
      throw new ApiError('INVALID_PAYLOAD', 'Invalid payload', {
        fieldErrors: { timestamp: ['must be within the last 7 days and at most 5 minutes ahead'] },
        formErrors: [],
      });
    }
    const properties = parseProperties(item.properties);
    const site = await loadSite(ctx.pipeline, item.site_id);
    await authorizeSite(ctx.pipeline, creds, site);
    if (item.event_id) {
      const key = `${site.record.siteId}:${item.event_id.toLowerCase()}`;
      if (!(await ctx.pipeline.stores.once.claim(key, EVENT_ID_MEMORY_MS))) {
        return { result: { index, success: true, tracked: false, reason: 'duplicate_event_id' } };
      }
      claimed = key;
    }
    const outcome = await processEvent(ctx.pipeline, site, item, properties, info, {
      now,
      timestamp,
      eventId: item.event_id?.toLowerCase(),
    });
    if (outcome.kind === 'skip') {
      if (claimed) await ctx.pipeline.stores.once.release(claimed);
      return { result: { index, success: true, tracked: false, reason: outcome.reason } };
    }
    return { result: { index, success: true }, row: outcome.row, claimed };
  } catch (err) {
    if (claimed) await ctx.pipeline.stores.once.release(claimed);
    if (!(err instanceof ApiError)) throw err;
    const result: ItemResult = { index, success: false, error: err.message, code: err.code };
    if (err.details) result.details = err.details;
    return { result };
  }
}
