import { createRoute, z } from '@hono/zod-openapi';
import { addDays, daysBetween, retention } from '@trackhouse/clickhouse';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, intParam, json, siteIdParam, withCommon } from '../../schemas';
import { invalidParam } from './schemas';

/** Most periods (days or weeks) one answer may span: the grid grows with their square. */
const MAX_PERIODS = 366;

const cohortSchema = z
  .object({
    size: z.number(),
    counts: z.array(z.number().nullable()),
    percentages: z.array(z.number().nullable()),
  })
  .openapi('RetentionCohort');

/** Today's date in a time zone. */
const today = (timeZone: string) =>
  new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(
    new Date(),
  );

export function retentionRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/retention',
      summary: 'Visitors by the day or week they were first seen, and how many came back in each later one',
      request: {
        params: siteIdParam,
        query: withCommon({
          mode: z.enum(['day', 'week']).default('week'),
          range: intParam(90, 1, 365).openapi({
            description: 'days ending end_date (default today in time_zone), when start_date is not given',
          }),
        }),
      },
      responses: {
        200: json(
          z.object({
            data: z.object({
              cohorts: z.record(z.string(), cohortSchema),
              maxPeriods: z.number(),
              mode: z.enum(['day', 'week']),
              range: z.number(),
            }),
          }),
          'Cohorts keyed by their first day, newest first',
        ),
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const endDate = q.end_date ?? today(q.time_zone);
      const startDate = q.start_date ?? addDays(endDate, 1 - q.range);
      if (startDate > endDate) throw invalidParam('start_date', 'start_date is after today');
      const days = daysBetween(startDate, endDate);
      if ((q.mode === 'day' ? days : Math.ceil(days / 7) + 1) > MAX_PERIODS)
        throw invalidParam('start_date', `the range spans more than ${MAX_PERIODS} ${q.mode}s`);
      const data = await retention(ctx.ch, site.siteId, { ...toCommon(q), startDate, endDate }, q.mode);
      return c.json({ data: { ...data, mode: q.mode, range: days } }, 200);
    },
  );

  return app;
}
