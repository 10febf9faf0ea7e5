import type { CommonParams, Filter } from '@trackhouse/clickhouse';

/** Common parameters as a query string (with `extra` parameters), as a client sends them. */
export function query(c: Partial<CommonParams>, extra: Record<string, string> = {}): string {
  const params = new URLSearchParams(extra);
  if (c.startDate) params.set('start_date', c.startDate);
  if (c.endDate) params.set('end_date', c.endDate);
  if (c.timeZone) params.set('time_zone', c.timeZone);
  if (c.filters?.length) params.set('filters', JSON.stringify(c.filters));
  return params.toString();
}

/** Common parameters with the defaults the API applies (UTC, no filters). */
export const full = (c: Partial<CommonParams>): CommonParams => ({ timeZone: 'UTC', filters: [], ...c });

/** One filter. */
export const f = (parameter: Filter['parameter'], type: Filter['type'], ...value: string[]): Filter => ({
  parameter,
  type,
  value,
});
