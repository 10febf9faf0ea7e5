import { z } from '@hono/zod-openapi';
import { filters, isoDate, timeZone } from './params';
import { MAX_REGEX_CHARS } from './regex';

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

const commonShape = {
  start_date: isoDate.optional(),
  end_date: isoDate.optional(),
  time_zone: timeZone.default('UTC'),
  filters: filters.optional().openapi({
    type: 'string',
    description: `JSON array of {parameter, type, value[]}; regex and not_regex values use RE2 syntax (no lookaround, no backreferences, repeats up to 1000) and total at most ${MAX_REGEX_CHARS} characters`,
  }),
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

/** The browser client's feature switches, in the Site and the SiteConfig alike. */
const featureSwitches = {
  trackErrors: z.boolean(),
  webVitals: z.boolean(),
  sessionReplay: z.boolean(),
  trackButtonClicks: z.boolean(),
  trackCopy: z.boolean(),
  trackFormInteractions: z.boolean(),
  trackInitialPageView: z.boolean(),
  trackSpaNavigation: z.boolean(),
};

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
    ...featureSwitches,
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
    ...featureSwitches,
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
  413: json(errorSchema, 'Request body larger than 64 KiB'),
  429: json(errorSchema, 'Rate limited (per API key, or per client address without one)'),
  503: json(
    errorSchema,
    'A read ran past the time or memory the server allows (QUERY_TIMEOUT, QUERY_TOO_LARGE)',
  ),
};
