import { toIso } from '@trackhouse/core';
import type { ClickHouse } from '../../client';
import { type CommonParams, Params, whereClause } from '../builder';
import { EVENT_ORDER } from './shared';

export const USER_SORTS = ['last_seen', 'first_seen', 'sessions', 'pageviews', 'events'] as const;
export type UserSort = (typeof USER_SORTS)[number];

/** The sort keys as aggregates over a user's events. */
const SORT_EXPRESSIONS: Record<UserSort, string> = {
  last_seen: 'max(timestamp)',
  first_seen: 'min(timestamp)',
  sessions: 'uniqExact(session_id)',
  pageviews: `countIf(type = 'pageview')`,
  events: 'count()',
};

export interface TrafficUser {
  user_id: string;
  identified_user_id: string;
  sessions: number;
  pageviews: number;
  events: number;
  first_seen: string;
  last_seen: string;
  country: string;
  region: string;
  city: string;
  browser: string;
  operating_system: string;
  device_type: string;
  language: string;
}

/** Fields a user takes from their latest event. */
const LATEST_EVENT_FIELDS = [
  'country',
  'region',
  'city',
  'browser',
  'operating_system',
  'device_type',
  'language',
] as const;

/** A user's fields over the grouped events (`u_` names: aliases must not shadow columns). */
const USER_FIELDS = [
  `argMax(user_id, ${EVENT_ORDER}) AS u_user_id`,
  `argMaxIf(identified_user_id, ${EVENT_ORDER}, identified_user_id != '') AS u_identified_user_id`,
  `${SORT_EXPRESSIONS.sessions} AS u_sessions`,
  `${SORT_EXPRESSIONS.pageviews} AS u_pageviews`,
  `${SORT_EXPRESSIONS.events} AS u_events`,
  'toString(min(timestamp)) AS u_first_seen',
  'toString(max(timestamp)) AS u_last_seen',
  ...LATEST_EVENT_FIELDS.map((f) => `argMax(${f}, ${EVENT_ORDER}) AS u_${f}`),
].join(',\n  ');

type UserRow = { [K in keyof TrafficUser as `u_${K}`]: TrafficUser[K] };

function toUser(r: UserRow): TrafficUser {
  const u = Object.fromEntries(Object.entries(r).map(([k, v]) => [k.slice(2), v])) as unknown as TrafficUser;
  return { ...u, first_seen: toIso(u.first_seen), last_seen: toIso(u.last_seen) };
}

/** The list answers fewer fields than the profile. */
export type ListedUser = Omit<TrafficUser, 'region' | 'city' | 'language'>;

/**
 * SPEC 13 `users`: one item per anonymous `user_id` among the events in range that match the
 * filters, counted over those events, attributes from the latest of them. Ranked by the sort key
 * (ties by user id ascending); the page's ids first, then their fields.
 */
export async function listUsers(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  page: { limit: number; offset: number; sort: UserSort; order: 'asc' | 'desc' },
): Promise<{ data: ListedUser[]; totalCount: number }> {
  const rank = async (limit: number, offset: number) => {
    const p = new Params();
    return ch.query<{ u: string; total: number }>(
      `SELECT user_id AS u, count() OVER () AS total FROM events
       WHERE ${whereClause(p, siteId, common)}
       GROUP BY user_id
       ORDER BY ${SORT_EXPRESSIONS[page.sort]} ${page.order === 'asc' ? 'ASC' : 'DESC'}, u ASC
       LIMIT ${p.bind('UInt32', limit)} OFFSET ${p.bind('UInt32', offset)}`,
      p.values,
    );
  };
  const ranked = await rank(page.limit, page.offset);
  const totalCount = (ranked[0] ?? (page.offset > 0 ? (await rank(1, 0))[0] : undefined))?.total ?? 0;
  if (ranked.length === 0) return { data: [], totalCount };

  const p = new Params();
  const ids = p.bind(
    'Array(String)',
    ranked.map((r) => r.u),
  );
  const rows = await ch.query<UserRow & { u: string }>(
    `SELECT user_id AS u, ${USER_FIELDS} FROM events
     WHERE ${whereClause(p, siteId, common, [`user_id IN ${ids}`])}
     GROUP BY user_id`,
    p.values,
  );
  const byId = new Map(rows.map(({ u, ...r }) => [u, toUser(r)]));
  return {
    totalCount,
    data: ranked.flatMap((r) => {
      const user = byId.get(r.u);
      if (!user) return [];
      const { region: _r, city: _c, language: _l, ...listed } = user;
      return [listed];
    }),
  };
}

/**
 * SPEC 13 `users/:userId`: every event of all time whose anonymous or identified id is exactly
 * `userId` (as the `user_id` filter matches), attributes from the latest. Undefined when none.
 */
export async function getUser(
  ch: ClickHouse,
  siteId: number,
  userId: string,
): Promise<TrafficUser | undefined> {
  const p = new Params();
  const id = p.bind('String', userId);
  const [row] = await ch.query<UserRow & { n: number }>(
    `SELECT count() AS n, ${USER_FIELDS} FROM events
     WHERE site_id = ${p.bind('UInt32', siteId)} AND (user_id = ${id} OR identified_user_id = ${id})`,
    p.values,
  );
  if (!row || row.n === 0) return undefined;
  const { n: _n, ...fields } = row;
  return toUser(fields);
}
