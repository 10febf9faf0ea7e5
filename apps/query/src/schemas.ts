import { z } from '@hono/zod-openapi';
import { FILTER_PARAMETERS, FILTER_TYPES } from '@trackhouse/clickhouse';

/** A positive int4 id in the path, documented as an integer parameter. */
const idParam = (name: string) =>
  z
    .string()
    .regex(/^[1-9]\d{0,9}$/, 'must be a positive integer')
    .transform(Number)
    .pipe(z.number().max(2_147_483_647))
    .openapi({ param: { name, in: 'path' }, type: 'integer', example: 1 });

export const siteIdParam = z.object({ siteId: idParam('siteId') });
export const goalParams = siteIdParam.extend({ goalId: idParam('goalId') });

const isoDate = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be YYYY-MM-DD')
  .refine(
    (v) =>
      !Number.isNaN(Date.parse(`${v}T00:00:00Z`)) && new Date(`${v}T00:00:00Z`).toISOString().startsWith(v),
    'not a calendar date',
  );

const timeZone = z.string().refine((tz) => {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}, 'not an IANA time zone');

const filterSchema = z.strictObject({
  parameter: z.enum(FILTER_PARAMETERS),
  type: z.enum(FILTER_TYPES),
  value: z
    .array(z.union([z.string().max(255), z.number()]))
    .min(1)
    .max(100),
});

const filters = z
  .string()
  .transform((text, ctx) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'filters must be JSON' });
      return z.NEVER;
    }
  })
  .pipe(z.array(filterSchema).max(20, 'at most 20 filters'))
  .transform((list) => list.map((f) => ({ ...f, value: f.value.map(String) })))
  .superRefine((list, ctx) => {
    for (const f of list) {
      if (!f.type.endsWith('regex')) continue;
      for (const v of f.value) {
        try {
          new RegExp(v);
        } catch {
          ctx.addIssue({ code: 'custom', message: `invalid regular expression: ${v}` });
        }
      }
    }
  });

const commonShape = {
  start_date: isoDate.optional(),
  end_date: isoDate.optional(),
  time_zone: timeZone.default('UTC'),
  filters: filters
    .optional()
    .openapi({ type: 'string', description: 'JSON array of {parameter, type, value[]}' }),
};

/** Section 8 (inclusive dates in a time zone, and filters) plus an endpoint's own parameters. */
export function withCommon<T extends z.ZodRawShape>(extra: T) {
  return z.object({ ...commonShape, ...extra }).refine(
    (q) => {
      const { start_date: start, end_date: end } = q as { start_date?: string; end_date?: string };
      return !start || !end || start <= end;
    },
    {
      message: 'start_date is after end_date',
      path: ['start_date'],
    },
  );
}

export const intParam = (def: number, min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,9}$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().min(min).max(max))
    .optional()
    .transform((v) => v ?? def)
    .openapi({ type: 'integer', default: def, minimum: min, maximum: max });

export const errorSchema = z
  .object({
    success: z.literal(false),
    error: z.string(),
    code: z.string(),
    details: z.record(z.string(), z.unknown()).optional(),
  })
  .openapi('Error');

export const siteSchema = z
  .object({
    id: z.string(),
    siteId: z.number().int(),
    name: z.string(),
    domain: z.string(),
    createdAt: z.string(),
    updatedAt: z.string(),
    createdBy: z.string().nullable(),
    organizationId: z.string(),
    public: z.boolean(),
    saltUserIds: z.boolean(),
    blockBots: z.boolean(),
    isOwner: z.boolean(),
    trackOutbound: z.boolean(),
    trackUrlParams: z.boolean(),
    monthlyPageviewLimit: z.number().int().nullable(),
  })
  .openapi('Site');

export const siteConfigSchema = z
  .object({
    public: z.boolean(),
    saltUserIds: z.boolean(),
    blockBots: z.boolean(),
    excludedIPs: z.array(z.string()),
    excludedCountries: z.array(z.string()),
    trackOutbound: z.boolean(),
    trackUrlParams: z.boolean(),
    monthlyPageviewLimit: z.number().int().nullable(),
  })
  .openapi('SiteConfig');

export const json = <T extends z.ZodType>(schema: T, description: string) => ({
  content: { 'application/json': { schema } },
  description,
});

export const errors = {
  400: json(errorSchema, 'Invalid request'),
  401: json(errorSchema, 'Missing or invalid API key'),
  403: json(errorSchema, 'Not allowed'),
  404: json(errorSchema, 'Not found'),
  429: json(errorSchema, 'Rate limited'),
};
