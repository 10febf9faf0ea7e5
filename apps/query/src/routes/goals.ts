import { createRoute, z } from '@hono/zod-openapi';
import { type GoalDefinition, goalSessions, goalStats } from '@trackhouse/clickhouse';
import { ApiError } from '@trackhouse/core';
import {
  createGoal,
  deleteGoal,
  type GoalRecord,
  getGoal,
  listGoals,
  updateGoal,
} from '@trackhouse/postgres';
import { toCommon } from '../common';
import { type QueryContext, router } from '../context';
import { errors, goalParams, intParam, json, siteIdParam, withCommon } from '../schemas';
import { pageOf } from './analytics/schemas';

const goalBody = z
  .strictObject({
    name: z.string().trim().min(1).max(200),
    goalType: z.enum(['path', 'event']),
    config: z.strictObject({
      pathPattern: z.string().max(2048).startsWith('/', 'must start with /').optional(),
      eventName: z.string().min(1).max(256).optional(),
      eventPropertyKey: z.string().min(1).max(256).optional(),
      eventPropertyValue: z.union([z.string().max(1024), z.number()]).optional(),
    }),
  })
  .superRefine((g, ctx) => {
    const c = g.config;
    if (g.goalType === 'path') {
      if (c.pathPattern === undefined)
        ctx.addIssue({ code: 'custom', path: ['config'], message: 'a path goal needs config.pathPattern' });
      if (
        c.eventName !== undefined ||
        c.eventPropertyKey !== undefined ||
        c.eventPropertyValue !== undefined
      ) {
        ctx.addIssue({
          code: 'custom',
          path: ['config'],
          message: 'a path goal takes only config.pathPattern',
        });
      }
    } else {
      if (c.eventName === undefined)
        ctx.addIssue({ code: 'custom', path: ['config'], message: 'an event goal needs config.eventName' });
      if (c.pathPattern !== undefined)
        ctx.addIssue({ code: 'custom', path: ['config'], message: 'an event goal takes no pathPattern' });
      if ((c.eventPropertyKey === undefined) !== (c.eventPropertyValue === undefined)) {
        ctx.addIssue({
          code: 'custom',
          path: ['config'],
          message: 'eventPropertyKey and eventPropertyValue go together',
        });
      }
    }
  })
  .openapi('GoalInput');

export const goalSchema = z
  .object({
    goalId: z.number().int(),
    name: z.string(),
    goalType: z.enum(['path', 'event']),
    config: z.record(z.string(), z.unknown()),
    createdAt: z.string(),
    total_conversions: z.number(),
    total_sessions: z.number(),
    conversion_rate: z.number(),
  })
  .openapi('Goal');

const sessionSchema = z
  .object({
    session_id: z.string(),
    user_id: z.string(),
    country: z.string(),
    browser: z.string(),
    operating_system: z.string(),
    device_type: z.string(),
    entry_page: z.string(),
    exit_page: z.string(),
    pageviews: z.number(),
    session_duration: z.number(),
    session_start: z.string(),
    session_end: z.string(),
    referrer: z.string(),
    channel: z.string(),
  })
  .openapi('Session');

/**
 * How deep goal sessions page: each page ranks every session before it, so the depth is what
 * bounds the read (docs/decisions.md).
 */
const MAX_SESSION_ROWS = 10_000;

const SORTS = { goalId: 'goalId', name: 'name', goalType: 'goalType', createdAt: 'createdAt' } as const;

const definition = (g: GoalRecord) => ({ goalType: g.goalType, config: g.config }) as GoalDefinition;

function compare(a: GoalRecord, b: GoalRecord, sort: keyof typeof SORTS): number {
  const x = a[SORTS[sort]];
  const y = b[SORTS[sort]];
  const order =
    x instanceof Date && y instanceof Date
      ? x.getTime() - y.getTime()
      : typeof x === 'number' && typeof y === 'number'
        ? x - y
        : String(x).localeCompare(String(y));
  return order !== 0 ? order : a.goalId - b.goalId;
}

export function goalRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/goals',
      summary: 'Goals with conversions over the range',
      request: {
        params: siteIdParam,
        query: withCommon({
          page: intParam(1, 1, 1_000_000),
          page_size: intParam(10, 1, 100),
          sort: z.enum(['goalId', 'name', 'goalType', 'createdAt']).default('createdAt'),
          order: z.enum(['asc', 'desc']).default('desc'),
        }),
      },
      responses: {
        200: json(
          z.object({
            data: z.array(goalSchema),
            meta: z.object({
              total: z.number(),
              page: z.number(),
              pageSize: z.number(),
              totalPages: z.number(),
            }),
          }),
          'A page of goals',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const all = (await listGoals(ctx.sql, site.siteId)).sort((a, b) => {
        const order = compare(a, b, q.sort);
        return q.order === 'asc' ? order : -order;
      });
      const page = all.slice((q.page - 1) * q.page_size, q.page * q.page_size);
      const stats = await goalStats(ctx.ch, site.siteId, toCommon(q), page.map(definition));
      return c.json(
        {
          data: page.map((g, i) => {
            const conversions = stats.conversions[i] ?? 0;
            return {
              goalId: g.goalId,
              name: g.name,
              goalType: g.goalType,
              config: g.config as Record<string, unknown>,
              createdAt: g.createdAt.toISOString(),
              total_conversions: conversions,
              total_sessions: stats.totalSessions,
              conversion_rate: stats.totalSessions === 0 ? 0 : conversions / stats.totalSessions,
            };
          }),
          meta: {
            total: all.length,
            page: q.page,
            pageSize: q.page_size,
            totalPages: Math.ceil(all.length / q.page_size),
          },
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/goals/{goalId}/sessions',
      summary: 'Sessions that converted a goal, newest end first',
      request: {
        params: goalParams,
        query: withCommon({
          page: intParam(1, 1, MAX_SESSION_ROWS).openapi({
            description: `page × limit may not pass ${MAX_SESSION_ROWS.toLocaleString('en-US')}`,
          }),
          limit: intParam(25, 1, 100),
        }).refine((q) => q.page * q.limit <= MAX_SESSION_ROWS, {
          path: ['page'],
          message: `page × limit goes past the ${MAX_SESSION_ROWS.toLocaleString('en-US')}th session: narrow the date range instead`,
        }),
      },
      responses: { 200: json(z.object({ data: z.array(sessionSchema) }), 'A page of sessions'), ...errors },
    }),
    async (c) => {
      const { siteId, goalId } = c.req.valid('param');
      const { site } = await ctx.auth.site(c, siteId, 'read');
      const goal = await getGoal(ctx.sql, site.siteId, goalId);
      if (!goal) throw new ApiError('GOAL_NOT_FOUND', 'Goal not found');
      const q = c.req.valid('query');
      const data = await goalSessions(ctx.ch, site.siteId, toCommon(q), definition(goal), {
        ...pageOf(q),
      });
      return c.json({ data }, 200);
    },
  );

  const saved = json(z.object({ success: z.literal(true), goalId: z.number().int() }), 'Saved');

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/sites/{siteId}/goals',
      summary: 'Create a goal',
      request: {
        params: siteIdParam,
        body: { content: { 'application/json': { schema: goalBody } }, required: true },
      },
      responses: { 201: saved, ...errors },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'member');
      const body = c.req.valid('json');
      const goal = await createGoal(ctx.sql, site.siteId, body as Parameters<typeof createGoal>[2]);
      // A path goal's summaries are built for the days summarized before it.
      if (body.goalType === 'path') ctx.summaries?.schedule(site.siteId);
      return c.json({ success: true as const, goalId: goal.goalId }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'put',
      path: '/api/sites/{siteId}/goals/{goalId}',
      summary: 'Replace a goal',
      request: {
        params: goalParams,
        body: { content: { 'application/json': { schema: goalBody } }, required: true },
      },
      responses: { 200: saved, ...errors },
    }),
    async (c) => {
      const { siteId, goalId } = c.req.valid('param');
      const { site } = await ctx.auth.site(c, siteId, 'member');
      const body = c.req.valid('json');
      const updated = await updateGoal(
        ctx.sql,
        site.siteId,
        goalId,
        body as Parameters<typeof updateGoal>[3],
      );
      if (!updated) throw new ApiError('GOAL_NOT_FOUND', 'Goal not found');
      if (body.goalType === 'path') ctx.summaries?.schedule(site.siteId);
      return c.json({ success: true as const, goalId: updated.goalId }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/sites/{siteId}/goals/{goalId}',
      summary: 'Delete a goal',
      request: { params: goalParams },
      responses: { 200: json(z.object({ success: z.literal(true) }), 'Deleted'), ...errors },
    }),
    async (c) => {
      const { siteId, goalId } = c.req.valid('param');
      const { site } = await ctx.auth.site(c, siteId, 'member');
      if (!(await deleteGoal(ctx.sql, site.siteId, goalId)))
        throw new ApiError('GOAL_NOT_FOUND', 'Goal not found');
      return c.json({ success: true as const }, 200);
    },
  );

  return app;
}
