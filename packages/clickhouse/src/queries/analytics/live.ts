import type { ClickHouse } from '../../client';
import { type CommonParams, filterConditions, Params } from '../builder';

/**
 * SPEC 13 `live-user-count`: distinct anonymous users with an event in the last `minutes`
 * minutes that matches the filters (the dates of `common` are ignored).
 */
export async function liveUserCount(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  minutes: number,
): Promise<number> {
  const p = new Params();
  const allTime: CommonParams = { ...common, startDate: undefined, endDate: undefined };
  const conditions = [
    `site_id = ${p.bind('UInt32', siteId)}`,
    `timestamp >= now64(3) - toIntervalMinute(${p.bind('UInt32', minutes)})`,
    ...filterConditions(p, siteId, allTime),
  ];
  const [row] = await ch.query<{ count: number }>(
    `SELECT uniqExact(user_id) AS count FROM events WHERE ${conditions.join(' AND ')}`,
    p.values,
  );
  return row?.count ?? 0;
}
