import { type HttpEnv, toClickHouseDateTime, utcDayKey, uuidv7 } from '@trackhouse/core';
import type { Hono } from 'hono';
import { chargeMonthlyQuota, excludedBy, overloaded, touchSession, visitorIdOf } from '../pipeline';
import { parseWith, REPLAY_BODY_LIMIT, readJson, siteIdParam } from '../request';
import { type ReplayBatch, replayBatchSchema } from '../schemas';
import type { TrackedSite } from '../sites';
import { admit } from './admit';
import type { IngestContext } from './context';
import { storeRow } from './store';

/** The replay bytes counters outlive their UTC day by a day. */
const CAP_TTL_S = 2 * 86_400;

/**
 * POST /api/session-replay/record/:siteId: one rrweb batch of the browser client, stored as one
 * row of `session_replay` in the visitor's live session (docs/decisions.md). Checks as for
 * events; then the site's `sessionReplay` switch, its monthly limit (checked, not counted) and
 * its replay bytes for the UTC day (`SESSION_REPLAY_MAX_MB_PER_DAY`: past it batches are
 * answered `tracked: false`, so the client drops them instead of retrying).
 */
export function mountReplay(app: Hono<HttpEnv>, ctx: IngestContext): void {
  app.post('/api/session-replay/record/:siteId', async (c) => {
    const now = new Date();
    const siteId = siteIdParam(c);
    const batch = parseWith(replayBatchSchema, await readJson(c, REPLAY_BODY_LIMIT));
    const { site, ip, userAgent } = await admit(ctx, c, siteId, {}, now);
    const exclusion = excludedBy(site, ip, ctx.pipeline.geo.lookup(ip));
    if (exclusion) return c.json({ success: true, tracked: false, reason: exclusion });
    if (!site.record.sessionReplay) {
      return c.json({ success: true, tracked: false, reason: 'session_replay_disabled' });
    }
    if (ctx.writers.replays.isFull()) throw overloaded();
    await chargeMonthlyQuota(ctx.pipeline, site, 0, now);

    const events = JSON.stringify(batch.events);
    const size = Buffer.byteLength(events);
    const capKey = `replay:${siteId}:${utcDayKey(now)}`;
    const cap = await ctx.pipeline.stores.quota.consume(capKey, ctx.replay.maxBytesPerDay, size, CAP_TTL_S);
    if (!cap.allowed) return c.json({ success: true, tracked: false, reason: 'replay_limit_reached' });
    try {
      const userId = visitorIdOf(ctx.pipeline, site, ip, userAgent, now);
      const sessionId = await touchSession(ctx.pipeline, siteId, userId);
      const row = replayRow(ctx, site, batch, { now, userId, sessionId, events, size });
      await storeRow(ctx, ctx.writers.replays, `${JSON.stringify(row)}\n`);
    } catch (err) {
      // Not stored: the day's budget gets the bytes back, so the client's retry fits.
      await ctx.pipeline.stores.quota.consume(capKey, 0, -size, CAP_TTL_S).catch(() => {});
      throw err;
    }
    return c.json({ success: true });
  });
}

function replayRow(
  ctx: IngestContext,
  site: TrackedSite,
  batch: ReplayBatch,
  r: { now: Date; userId: string; sessionId: string; events: string; size: number },
) {
  let first = Number.POSITIVE_INFINITY;
  let last = 0;
  for (const e of batch.events) {
    first = Math.min(first, e.timestamp);
    last = Math.max(last, e.timestamp);
  }
  return {
    site_id: site.record.siteId,
    session_id: r.sessionId,
    timestamp: toClickHouseDateTime(r.now),
    batch_id: uuidv7(r.now.getTime()),
    user_id: r.userId,
    identified_user_id: batch.userId ?? '',
    start_time: toClickHouseDateTime(new Date(first)),
    end_time: toClickHouseDateTime(new Date(last)),
    event_count: batch.events.length,
    size: r.size,
    events: r.events,
    page_url: batch.metadata?.pageUrl ?? '',
    viewport_width: batch.metadata?.viewportWidth ?? 0,
    viewport_height: batch.metadata?.viewportHeight ?? 0,
    language: batch.metadata?.language ?? '',
    retention_days: ctx.replay.retentionDays,
  };
}
