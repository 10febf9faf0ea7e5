import { z } from '@hono/zod-openapi';
import { BUCKETS, type Bucket, isSubDay, MAX_BUCKETS } from '@trackhouse/clickhouse';
import { ApiError } from '@trackhouse/core';
import { intParam, siteIdParam, withCommon } from '../../schemas';

/** Deepest page of a ranked list: deeper reads go through a narrower range or filters. */
export const MAX_PAGE = 1000;

/** Query fields of a page of a ranked list: `limit` (default and most as given), 1-based `page`. */
export const paged = (limit: number, most: number) => ({
  limit: intParam(limit, 1, most),
  page: intParam(1, 1, MAX_PAGE),
});

/** The rows a `paged` query asks for. */
export const pageOf = (q: { limit: number; page: number }) => ({
  limit: q.limit,
  offset: (q.page - 1) * q.limit,
});

/** An exact path segment (ids are matched as given, never parsed). */
export const pathText = (name: string) =>
  z
    .string()
    .min(1)
    .max(255)
    .openapi({ param: { name, in: 'path' }, type: 'string' });

export const sessionParams = siteIdParam.extend({ sessionId: pathText('sessionId') });
export const userParams = siteIdParam.extend({ userId: pathText('userId') });

export const trafficSummarySchema = z
  .object({
    sessions: z.number(),
    pageviews: z.number(),
    users: z.number(),
    pages_per_session: z.number(),
    bounce_rate: z.number(),
    session_duration: z.number(),
  })
  .openapi('TrafficSummary');

export const trafficBucketSchema = trafficSummarySchema.extend({ time: z.string() }).openapi('TrafficBucket');

export const metricItemSchema = z
  .object({
    value: z.string(),
    count: z.number(),
    percentage: z.number(),
    pageviews: z.number(),
    pageviews_percentage: z.number(),
    bounce_rate: z.number(),
    time_on_page_seconds: z.number().optional(),
  })
  .openapi('MetricItem');

export const trafficSessionSchema = z
  .object({
    session_id: z.string(),
    user_id: z.string(),
    identified_user_id: z.string(),
    country: z.string(),
    region: z.string(),
    city: z.string(),
    language: z.string(),
    browser: z.string(),
    operating_system: z.string(),
    device_type: z.string(),
    hostname: z.string(),
    entry_page: z.string(),
    exit_page: z.string(),
    pageviews: z.number(),
    events: z.number(),
    session_duration: z.number(),
    session_start: z.string(),
    session_end: z.string(),
    referrer: z.string(),
    channel: z.string(),
    utm_source: z.string(),
    utm_medium: z.string(),
    utm_campaign: z.string(),
  })
  .openapi('TrafficSession');

export const trafficUserSchema = z
  .object({
    user_id: z.string(),
    identified_user_id: z.string(),
    sessions: z.number(),
    pageviews: z.number(),
    events: z.number(),
    first_seen: z.string(),
    last_seen: z.string(),
    country: z.string(),
    region: z.string(),
    city: z.string(),
    browser: z.string(),
    operating_system: z.string(),
    device_type: z.string(),
    language: z.string(),
  })
  .openapi('TrafficUser');

export const listedUserSchema = trafficUserSchema
  .omit({ region: true, city: true, language: true })
  .openapi('ListedUser');

/** A 400 in the validation shape for one parameter, for checks that need the data. */
export function invalidParam(field: string, message: string): ApiError {
  return new ApiError('INVALID_PARAMS', 'Invalid parameters', {
    fieldErrors: { [field]: [message] },
    formErrors: [],
  });
}

/**
 * The common parameters, `extra` and `bucket` of a bucketed answer: a bucket finer than a day
 * needs both dates (an open range of minutes has no bound).
 */
export function bucketedQuery<T extends z.ZodRawShape>(extra: T) {
  return withCommon({ ...extra, bucket: z.enum(BUCKETS).default('day') }).refine(
    (q) => {
      const {
        bucket,
        start_date: start,
        end_date: end,
      } = q as {
        bucket: Bucket;
        start_date?: string;
        end_date?: string;
      };
      return !isSubDay(bucket) || (start !== undefined && end !== undefined);
    },
    { message: 'a bucket finer than a day needs start_date and end_date', path: ['bucket'] },
  );
}

/** The 400 of a range holding more buckets than a bucketed answer lists. */
export const tooManyBuckets = () =>
  invalidParam('bucket', `the range holds more than ${MAX_BUCKETS} buckets of this size`);
