import { createRoute, z } from '@hono/zod-openapi';
import { getReplay, listReplays } from '@trackhouse/clickhouse';
import { ApiError } from '@trackhouse/core';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, intParam, json, siteIdParam, withCommon } from '../../schemas';
import { sessionParams } from './schemas';

/** Deepest offset into the replay list. */
const MAX_LIST_OFFSET = 100_000;
/** Deepest offset into one replay's events (10,000 events per batch at most). */
const MAX_EVENT_OFFSET = 100_000_000;

const replayMetadataSchema = z
  .object({
    session_id: z.string(),
    user_id: z.string(),
    identified_user_id: z.string(),
    start_time: z.string(),
    end_time: z.string(),
    duration_ms: z.number(),
    page_url: z.string(),
    event_count: z.number(),
    size: z.number(),
    viewport_width: z.number(),
    viewport_height: z.number(),
    language: z.string(),
    country: z.string(),
    region: z.string(),
    city: z.string(),
    browser: z.string(),
    browser_version: z.string(),
    operating_system: z.string(),
    operating_system_version: z.string(),
    device_type: z.string(),
  })
  .openapi('SessionReplay');

/**
 * Recorded sessions. Members only, public sites and private links included: a replay shows
 * what visitors typed and saw, more than a traffic dashboard shares.
 */
export function replayRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/session-replay/list',
      summary: 'Replays starting in the range, newest first',
      request: {
        params: siteIdParam,
        query: withCommon({ limit: intParam(50, 1, 100), offset: intParam(0, 0, MAX_LIST_OFFSET) }),
      },
      responses: {
        200: json(
          z.object({ data: z.array(replayMetadataSchema), totalCount: z.number() }),
          'A page of replays and how many there are',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'member');
      const q = c.req.valid('query');
      const page = { limit: q.limit, offset: q.offset };
      return c.json(await listReplays(ctx.ch, site.siteId, toCommon(q), page), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/session-replay/{sessionId}',
      summary: "A replay's metadata and a page of its rrweb events, in order",
      request: {
        params: sessionParams,
        query: z.object({ limit: intParam(1000, 1, 10_000), offset: intParam(0, 0, MAX_EVENT_OFFSET) }),
      },
      responses: {
        200: json(
          z.object({
            metadata: replayMetadataSchema,
            events: z.array(z.unknown()),
            hasMore: z.boolean(),
            nextOffset: z.number().nullable(),
          }),
          'The metadata and the events from `offset`',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { siteId, sessionId } = c.req.valid('param');
      const { site } = await ctx.auth.site(c, siteId, 'member');
      const q = c.req.valid('query');
      const data = await getReplay(ctx.ch, site.siteId, sessionId, { limit: q.limit, offset: q.offset });
      if (!data) throw new ApiError('SESSION_NOT_FOUND', 'Session replay not found');
      return c.json(data, 200);
    },
  );

  return app;
}
