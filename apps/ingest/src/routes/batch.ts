import { ApiError, type HttpEnv } from '@trackhouse/core';
import { rateLimitHeaders } from '@trackhouse/limits';
import type { Hono } from 'hono';
import { assignBackdatedSessions } from '../backdated';
import {
  authenticate,
  authorizeSite,
  type Credentials,
  claimEventId,
  type EventRow,
  eventProperties,
  loadSite,
  processEvent,
  type RequestInfo,
  serializeRow,
} from '../pipeline';
import { BATCH_BODY_LIMIT, parseWith, readJson, requestInfo } from '../request';
import { batchEnvelopeSchema, batchItemSchema } from '../schemas';
import type { IngestContext } from './context';
import { refund, releaseClaims, store } from './store';

const MAX_AGE_MS = 7 * 86_400_000;
const MAX_AHEAD_MS = 5 * 60_000;

export interface ItemResult {
  index: number;
  success: boolean;
  error?: string;
  code?: string;
  details?: Record<string, unknown>;
  tracked?: false;
  reason?: string;
}

interface ItemOutcome {
  result: ItemResult;
  row?: EventRow;
  claim?: string;
}

/**
 * POST /api/track/batch: 1..1000 events, one rate-limit hit, per-item results, one fsync.
 * Invalid items are reported, not fatal. An internal failure of any item fails the whole
 * request (5xx) with nothing stored, nothing counted and every event-id claim released, so the
 * client's retry of the same batch stores each event once.
 */
export function mountBatch(app: Hono<HttpEnv>, ctx: IngestContext): void {
  app.post('/api/track/batch', async (c) => {
    const now = new Date();
    const envelope = parseWith(batchEnvelopeSchema, await readJson(c, BATCH_BODY_LIMIT));
    const info = requestInfo(c, ctx.trustedProxyHops, envelope.api_key);
    if (!info.apiKey) throw new ApiError('MISSING_API_KEY', 'An API key is required for batch tracking');
    const creds = await authenticate(ctx.pipeline, info.apiKey, now);
    for (const [k, v] of Object.entries(rateLimitHeaders(creds.rateLimit))) c.header(k, v);

    const settled = await Promise.allSettled(
      envelope.events.map((raw, index) => processItem(ctx, creds, info, raw, index, now)),
    );
    const outcomes = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const claims = outcomes.flatMap((o) => (o.claim ? [o.claim] : []));
    const rows = outcomes.flatMap((o) => (o.row ? [o.row] : []));
    try {
      const failed = settled.find((s) => s.status === 'rejected');
      if (failed) {
        await refund(ctx, rows, now);
        throw failed.reason;
      }
      assignBackdatedSessions(rows);
      if (rows.length > 0) await store(ctx, rows, rows.map(serializeRow).join(''), now);
    } catch (err) {
      await releaseClaims(ctx, claims);
      throw err;
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
): Promise<ItemOutcome> {
  let claim: string | undefined;
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
    const properties = eventProperties(item);
    const site = await loadSite(ctx.pipeline, item.site_id);
    await authorizeSite(ctx.pipeline, creds, site);
    if (item.event_id) {
      const claimed = await claimEventId(ctx.pipeline, site.record.siteId, item.event_id);
      if (claimed === 'duplicate') {
        return { result: { index, success: true, tracked: false, reason: 'duplicate_event_id' } };
      }
      claim = claimed.claim;
    }
    const outcome = await processEvent(ctx.pipeline, site, item, properties, info, {
      now,
      timestamp,
      eventId: item.event_id?.toLowerCase(),
    });
    if (outcome.kind === 'skip') {
      await releaseClaims(ctx, claim ? [claim] : []);
      return { result: { index, success: true, tracked: false, reason: outcome.reason } };
    }
    return { result: { index, success: true }, row: outcome.row, claim };
  } catch (err) {
    await releaseClaims(ctx, claim ? [claim] : []);
    if (!(err instanceof ApiError)) throw err;
    const result: ItemResult = { index, success: false, error: err.message, code: err.code };
    if (err.details) result.details = err.details;
    return { result };
  }
}
