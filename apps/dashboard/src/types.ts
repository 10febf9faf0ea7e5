/**
 * The API's answers, as types inferred from the query service's own zod schemas (the ones its
 * OpenAPI document is generated from). Type-only imports: nothing of them reaches the bundle.
 */
import type { z } from 'zod';
import type { METRIC_PARAMETERS } from '../../../packages/clickhouse/src/queries/analytics/metric';
import type {
  metricItemSchema,
  trafficBucketSchema,
  trafficSessionSchema,
  trafficSummarySchema,
} from '../../query/src/routes/analytics/schemas';
import type { eventSchema } from '../../query/src/routes/events';
import type { goalSchema } from '../../query/src/routes/goals';
import type { userOrganizationSchema } from '../../query/src/routes/organizations';
import type { errorSchema, siteConfigSchema, siteSchema } from '../../query/src/schemas';

export type Summary = z.infer<typeof trafficSummarySchema>;
export type Bucket = z.infer<typeof trafficBucketSchema>;
export type MetricItem = z.infer<typeof metricItemSchema>;
export type TrafficSession = z.infer<typeof trafficSessionSchema>;
export type TrackedEvent = z.infer<typeof eventSchema>;
export type Goal = z.infer<typeof goalSchema>;
export type Site = z.infer<typeof siteSchema>;
export type SiteConfig = z.infer<typeof siteConfigSchema>;
export type ApiErrorBody = z.infer<typeof errorSchema>;
export type MetricParameter = (typeof METRIC_PARAMETERS)[number];
export type UserOrganization = z.infer<typeof userOrganizationSchema>;
export interface Filter {
  parameter: MetricParameter;
  type: 'equals';
  value: string[];
}
