import { z } from '@hono/zod-openapi';
import { FILTER_PARAMETERS, FILTER_TYPES, READ_DATE_MAX, READ_DATE_MIN } from '@trackhouse/clickhouse';
import { storable } from '@trackhouse/core';
import { MAX_REGEX_CHARS, re2Problem } from './regex';

/**
 * The common read parameters (SPEC section 8), each refusing what ClickHouse could not run:
 * dates outside 1970..2299, time zones Intl does not know, regular expressions RE2 does not
 * accept (docs/decisions.md).
 */

/** YYYY-MM-DD, a calendar date within the dates reads accept. */
export const isoDate = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be YYYY-MM-DD')
  .refine(
    (v) =>
      !Number.isNaN(Date.parse(`${v}T00:00:00Z`)) && new Date(`${v}T00:00:00Z`).toISOString().startsWith(v),
    'not a calendar date',
  )
  .refine(
    (v) => v >= READ_DATE_MIN && v <= READ_DATE_MAX,
    `must be between ${READ_DATE_MIN} and ${READ_DATE_MAX}`,
  )
  .openapi({ format: 'date', description: `YYYY-MM-DD, from ${READ_DATE_MIN} to ${READ_DATE_MAX}` });

/** An instant within the dates reads accept. */
export const isoInstant = z.iso.datetime({ offset: true }).refine((v) => {
  const ms = Date.parse(v);
  // Not an instant at all: the format check above says so (refinements run after it fails).
  if (Number.isNaN(ms)) return true;
  const iso = new Date(ms).toISOString();
  return iso >= READ_DATE_MIN && iso.slice(0, 10) <= READ_DATE_MAX;
}, `must be between ${READ_DATE_MIN} and ${READ_DATE_MAX}`);

/** The canonical name of an IANA time zone given in any case (`utc` → `UTC`), or undefined. */
function canonicalTimeZone(name: string): string | undefined {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}

export const timeZone = z
  .string()
  .max(64)
  .transform((tz, ctx) => {
    const canonical = canonicalTimeZone(tz);
    if (canonical === undefined) {
      ctx.addIssue({ code: 'custom', message: 'not an IANA time zone' });
      return z.NEVER;
    }
    return canonical;
  })
  .openapi({ type: 'string', description: 'IANA time zone name, in any case (default UTC)' });

const filterSchema = z.strictObject({
  parameter: z.enum(FILTER_PARAMETERS),
  type: z.enum(FILTER_TYPES),
  value: z
    .array(z.union([z.string().max(255), z.number()]))
    .min(1)
    .max(100),
});

export const filters = z
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
  // Values as the stored text they are compared with: NUL and lone surrogates were stored as U+FFFD.
  .transform((list) => list.map((f) => ({ ...f, value: f.value.map((v) => storable(String(v))) })))
  .superRefine((list, ctx) => {
    const patterns = list.filter((f) => f.type.endsWith('regex')).flatMap((f) => f.value);
    if (patterns.reduce((sum, v) => sum + v.length, 0) > MAX_REGEX_CHARS) {
      ctx.addIssue({
        code: 'custom',
        message: `regular expressions may total at most ${MAX_REGEX_CHARS} characters per request`,
      });
      return;
    }
    for (const v of patterns) {
      const problem = re2Problem(v);
      if (problem) ctx.addIssue({ code: 'custom', message: `invalid regular expression "${v}": ${problem}` });
    }
  });
