import { createRoute, z } from '@hono/zod-openapi';
import { analyzeFunnel, type FunnelStep, funnelStepSessions, MAX_FUNNEL_STEPS } from '@trackhouse/clickhouse';
import { ApiError } from '@trackhouse/core';
import {
  createFunnel,
  deleteFunnel,
  type FunnelRecord,
  listFunnels,
  updateFunnel,
} from '@trackhouse/postgres';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, json, siteIdParam, withCommon } from '../../schemas';
import { invalidParam, paged, pageOf, trafficSessionSchema } from './schemas';

/** A step as goals define theirs: a page pattern, or a custom event with an optional property. */
const stepSchema = z
  .strictObject({
    type: z.enum(['page', 'event']),
    value: z.string().min(1).max(2048),
    name: z.string().trim().min(1).max(200).optional(),
    eventPropertyKey: z.string().min(1).max(256).optional(),
    eventPropertyValue: z.union([z.string().max(1024), z.number()]).optional(),
  })
  .superRefine((s, ctx) => {
    if (s.type === 'page') {
      if (!s.value.startsWith('/'))
        ctx.addIssue({ code: 'custom', path: ['value'], message: 'a page step must start with /' });
      if (s.eventPropertyKey !== undefined || s.eventPropertyValue !== undefined)
        ctx.addIssue({ code: 'custom', path: ['type'], message: 'a page step takes no event property' });
    } else {
      if (s.value.length > 256)
        ctx.addIssue({
          code: 'custom',
          path: ['value'],
          message: 'an event name has at most 256 characters',
        });
      if ((s.eventPropertyKey === undefined) !== (s.eventPropertyValue === undefined))
        ctx.addIssue({
          code: 'custom',
          path: ['eventPropertyKey'],
          message: 'eventPropertyKey and eventPropertyValue go together',
        });
    }
  })
  .openapi('FunnelStep');

const stepsSchema = z.array(stepSchema).min(2).max(MAX_FUNNEL_STEPS);

const funnelBody = z
  .strictObject({ name: z.string().trim().min(1).max(200), steps: stepsSchema })
  .openapi('FunnelInput');

const stepResultSchema = z
  .object({
    step_number: z.number(),
    step_name: z.string(),
    visitors: z.number(),
    sessions: z.number(),
    conversion_rate: z.number(),
    dropoff_rate: z.number(),
  })
  .openapi('FunnelStepResult');

const funnelSchema = z
  .object({
    id: z.number().int(),
    name: z.string(),
    steps: z.array(stepSchema),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi('Funnel');

const funnelParams = siteIdParam.extend({
  funnelId: z
    .string()
    .regex(/^[1-9]\d{0,9}$/, 'must be a positive integer')
    .transform(Number)
    .pipe(z.number().max(2_147_483_647))
    .openapi({ param: { name: 'funnelId', in: 'path' }, type: 'integer', example: 1 }),
});
const stepParams = siteIdParam.extend({
  stepNumber: z
    .string()
    .regex(/^\d{1,2}$/, 'must be a step number')
    .transform(Number)
    .pipe(z.number().min(1).max(MAX_FUNNEL_STEPS))
    .openapi({ param: { name: 'stepNumber', in: 'path' }, type: 'integer', example: 2 }),
});

const body = <T extends z.ZodType>(schema: T) => ({
  body: { content: { 'application/json': { schema } }, required: true },
});

const steps = (s: z.infer<typeof stepsSchema>) => s as FunnelStep[];

const toFunnel = (f: FunnelRecord) => ({
  id: f.funnelId,
  name: f.name,
  steps: f.steps,
  createdAt: f.createdAt.toISOString(),
  updatedAt: f.updatedAt.toISOString(),
});

export function funnelRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/sites/{siteId}/funnels/analyze',
      summary: 'Sessions and visitors reaching each step of a funnel, in order within a session',
      request: {
        params: siteIdParam,
        query: withCommon({}),
        ...body(z.object({ steps: stepsSchema }).openapi('FunnelQuery')),
      },
      responses: { 200: json(z.object({ data: z.array(stepResultSchema) }), 'One item per step'), ...errors },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const data = await analyzeFunnel(ctx.ch, site.siteId, toCommon(q), steps(c.req.valid('json').steps));
      return c.json({ data }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/sites/{siteId}/funnels/{stepNumber}/sessions',
      summary: 'Sessions that reached a funnel step, or reached the step before it and not it',
      request: {
        params: stepParams,
        query: withCommon({
          mode: z.enum(['reached', 'dropped']).optional().openapi({ description: 'or in the body' }),
          ...paged(25, 100),
        }),
        ...body(
          z
            .object({ steps: stepsSchema, mode: z.enum(['reached', 'dropped']).optional() })
            .openapi('FunnelSessionsQuery'),
        ),
      },
      responses: {
        200: json(
          z.object({ data: z.array(trafficSessionSchema), totalCount: z.number() }),
          'A page of sessions, newest start first, and how many there are',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { siteId, stepNumber } = c.req.valid('param');
      const { site } = await ctx.auth.site(c, siteId, 'read');
      const q = c.req.valid('query');
      const b = c.req.valid('json');
      const mode = b.mode ?? q.mode;
      if (mode === undefined) throw invalidParam('mode', 'mode is required: reached or dropped');
      if (q.mode !== undefined && b.mode !== undefined && q.mode !== b.mode)
        throw invalidParam('mode', 'the query and the body give different modes');
      if (stepNumber > b.steps.length) throw invalidParam('stepNumber', 'the funnel has fewer steps');
      if (mode === 'dropped' && stepNumber === 1)
        throw invalidParam('stepNumber', 'dropped sessions are counted from step 2');
      const result = await funnelStepSessions(ctx.ch, site.siteId, toCommon(q), steps(b.steps), {
        stepNumber,
        mode,
        ...pageOf(q),
      });
      return c.json(result, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/funnels',
      summary: 'Saved funnels of a site, oldest first',
      request: { params: siteIdParam },
      responses: { 200: json(z.object({ data: z.array(funnelSchema) }), 'The saved funnels'), ...errors },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const data = (await listFunnels(ctx.sql, site.siteId)).map(toFunnel);
      return c.json({ data }, 200);
    },
  );

  const saved = json(z.object({ success: z.literal(true), funnelId: z.number().int() }), 'Saved');

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/sites/{siteId}/funnels',
      summary: 'Save a funnel',
      request: { params: siteIdParam, ...body(funnelBody) },
      responses: { 201: saved, ...errors },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'member');
      const funnel = await createFunnel(ctx.sql, site.siteId, c.req.valid('json'));
      // A saved funnel's summaries are built ahead of its reads.
      ctx.summaries?.schedule(site.siteId);
      return c.json({ success: true as const, funnelId: funnel.funnelId }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'put',
      path: '/api/sites/{siteId}/funnels/{funnelId}',
      summary: 'Replace a saved funnel',
      request: { params: funnelParams, ...body(funnelBody) },
      responses: { 200: saved, ...errors },
    }),
    async (c) => {
      const { siteId, funnelId } = c.req.valid('param');
      const { site } = await ctx.auth.site(c, siteId, 'member');
      const updated = await updateFunnel(ctx.sql, site.siteId, funnelId, c.req.valid('json'));
      if (!updated) throw new ApiError('FUNNEL_NOT_FOUND', 'Funnel not found');
      ctx.summaries?.schedule(site.siteId);
      return c.json({ success: true as const, funnelId: updated.funnelId }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/sites/{siteId}/funnels/{funnelId}',
      summary: 'Delete a saved funnel',
      request: { params: funnelParams },
      responses: { 200: json(z.object({ success: z.literal(true) }), 'Deleted'), ...errors },
    }),
    async (c) => {
      const { siteId, funnelId } = c.req.valid('param');
      const { site } = await ctx.auth.site(c, siteId, 'member');
      if (!(await deleteFunnel(ctx.sql, site.siteId, funnelId)))
        throw new ApiError('FUNNEL_NOT_FOUND', 'Funnel not found');
      return c.json({ success: true as const }, 200);
    },
  );

  return app;
}
