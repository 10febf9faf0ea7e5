import type { CommonParams, Filter } from '@trackhouse/clickhouse';

/** The validated common query parameters as the query functions take them. */
export function toCommon(q: {
  start_date?: string | undefined;
  end_date?: string | undefined;
  time_zone: string;
  filters?: Filter[] | undefined;
}): CommonParams {
  return { startDate: q.start_date, endDate: q.end_date, timeZone: q.time_zone, filters: q.filters ?? [] };
}
