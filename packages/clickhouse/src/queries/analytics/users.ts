import { toIso } from '@trackhouse/core';
import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeBounds, whereClause } from '../builder';
import {
  crossingSessions,
  type Edges,
  keyOfUserId,
  readRollup,
  rollupApplies,
  rollupSessionRows,
  type SessionRowField,
  type Settled,
  userIdOfKey,
} from './rollup';
import { rowFiltersApply } from './row-filters';
import {
  EVENT_ORDER,
  earliestHoursBeforeEnd,
  eventOrderKey,
  hoursBeforeEnd,
  RECENT_HOURS,
  rankedPage,
} from './shared';
import {
  aliasedVisitors,
  currentAliases,
  getAliases,
  getTraits,
  mergedProfiles,
  TRAIT_TEXT,
  type Traits,
} from './traits';
import { rangeVisitors, visitorDaysApply } from './visitors';

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
  /** The merged profile of `identified_user_id` ({} without one). */
  traits: Traits;
}

/**
 * The sort keys over a visitor's counted sessions (the `s_` rows of rollupSessionRows, one per
 * session): each equals its SORT_EXPRESSIONS over the visitor's events in range (a session has
 * one visitor).
 */
const SESSION_SORT_EXPRESSIONS: Record<UserSort, string> = {
  last_seen: 'max(s_end)',
  first_seen: 'min(s_start)',
  sessions: 'count()',
  pageviews: 'sum(s_pageviews)',
  events: 'sum(s_events)',
};

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

/** The fields of a user's latest event among the grouped ones. */
const LATEST_EVENT_COLUMNS = LATEST_EVENT_FIELDS.map((f) => `argMax(${f}, ${EVENT_ORDER}) AS u_${f}`).join(
  ', ',
);

/** A user's fields over the grouped events (`u_` names: aliases must not shadow columns). */
const USER_FIELDS = [
  `argMax(user_id, ${EVENT_ORDER}) AS u_user_id`,
  `argMaxIf(identified_user_id, ${EVENT_ORDER}, identified_user_id != '') AS u_identified_user_id`,
  `${SORT_EXPRESSIONS.sessions} AS u_sessions`,
  `${SORT_EXPRESSIONS.pageviews} AS u_pageviews`,
  `${SORT_EXPRESSIONS.events} AS u_events`,
  'toString(min(timestamp)) AS u_first_seen',
  'toString(max(timestamp)) AS u_last_seen',
  LATEST_EVENT_COLUMNS,
].join(',\n  ');

type LatestField = `u_${(typeof LATEST_EVENT_FIELDS)[number]}`;
type EventFields = Omit<TrafficUser, 'traits'>;
type UserRow = { [K in keyof EventFields as `u_${K}`]: EventFields[K] };

function toUser(r: UserRow): EventFields {
  const u = Object.fromEntries(Object.entries(r).map(([k, v]) => [k.slice(2), v])) as unknown as EventFields;
  return { ...u, first_seen: toIso(u.first_seen), last_seen: toIso(u.last_seen) };
}

/**
 * Users as answered: the identified id is the events' one, else the visitor's current alias;
 * `traits` its merged profile (left empty when `profiles` is false).
 */
async function withProfiles<T extends { user_id: string; identified_user_id: string }>(
  ch: ClickHouse,
  siteId: number,
  users: T[],
  profiles: boolean,
  aliased?: Promise<Map<string, string>>,
): Promise<(T & { traits: Traits })[]> {
  // `aliased`, read beforehand, may hold the aliases of more visitors than have no identified id.
  const aliases =
    (await aliased) ??
    (await getAliases(
      ch,
      siteId,
      users.filter((u) => u.identified_user_id === '').map((u) => u.user_id),
    ));
  const resolved = users.map((u) => ({
    ...u,
    identified_user_id: u.identified_user_id || (aliases.get(u.user_id) ?? ''),
  }));
  const traits = profiles
    ? await getTraits(
        ch,
        siteId,
        resolved.map((u) => u.identified_user_id),
      )
    : new Map<string, Traits>();
  return resolved.map((u) => ({ ...u, traits: traits.get(u.identified_user_id) ?? {} }));
}

/**
 * Narrowing of the users list by profile: a trait with exactly this text (`traitKey` and
 * `traitValue` together), and/or `search`, a case-insensitive substring of the anonymous id,
 * the identified id or any trait value's text.
 */
export interface UserSearch {
  traitKey?: string;
  traitValue?: string;
  search?: string;
}

/** Conditions on a ranked row's anonymous id `u` and identified id `iid` for a search. */
function searchConditions(p: Params, siteId: number, s: UserSearch): string[] {
  const out: string[] = [];
  if (s.traitKey !== undefined && s.traitValue !== undefined) {
    out.push(`iid IN (SELECT iid FROM (${mergedProfiles(p, siteId, [`trait = ${p.bind('String', s.traitKey)}`])})
      WHERE ${TRAIT_TEXT} = ${p.bind('String', s.traitValue)})`);
  }
  if (s.search !== undefined) {
    const q = p.bind('String', s.search);
    out.push(`(positionCaseInsensitiveUTF8(u, ${q}) > 0 OR positionCaseInsensitiveUTF8(iid, ${q}) > 0
      OR iid IN (SELECT iid FROM (${mergedProfiles(p, siteId)}) WHERE positionCaseInsensitiveUTF8(${TRAIT_TEXT}, ${q}) > 0))`);
  }
  return out;
}

/** The list answers fewer fields than the profile. */
export type ListedUser = Omit<TrafficUser, 'region' | 'city' | 'language'>;

export interface UserPage {
  limit: number;
  offset: number;
  sort: UserSort;
  order: 'asc' | 'desc';
  /** Answer the profiles' traits (false: `traits` stays empty). */
  profiles?: boolean;
}

/**
 * SPEC 13 `users`: one item per anonymous `user_id` among the events in range that match the
 * filters, counted over those events, attributes from the latest of them. Ranked by the sort key
 * (ties by user id ascending); the page's ids first, then their fields.
 */
export async function listUsers(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  page: UserPage,
  search: UserSearch = {},
): Promise<{ data: ListedUser[]; totalCount: number }> {
  const searched = searchConditions(new Params(), siteId, search).length > 0;
  if (rollupApplies(ch, common) && !searched) return listUsersFromSessions(ch, siteId, common, page);
  const direction = page.order === 'asc' ? 'ASC' : 'DESC';
  const rank = async (limit: number, offset: number) => {
    const p = new Params();
    const narrowed = searchConditions(p, siteId, search);
    const bounds = `LIMIT ${p.bind('UInt32', limit)} OFFSET ${p.bind('UInt32', offset)}`;
    if (narrowed.length === 0) {
      // Grouped by the visitors' 64-bit keys (0013), which order as their ids do.
      const rows = await ch.query<{ k: string; total: number }>(
        `SELECT toString(user_key) AS k, count() OVER () AS total FROM events
         WHERE ${whereClause(p, siteId, common)}
         GROUP BY user_key
         ORDER BY ${SORT_EXPRESSIONS[page.sort]} ${direction}, user_key ASC
         ${bounds}`,
        p.values,
      );
      return rows.map((r) => ({ u: userIdOfKey(r.k), total: r.total }));
    }
    // The identified id as the answer gives it (the events', else the current alias) decides.
    return ch.query<{ u: string; total: number }>(
      `SELECT u, if(r.ev != '', r.ev, a.alias) AS iid, count() OVER () AS total
       FROM (
         SELECT user_id AS u, ${SORT_EXPRESSIONS[page.sort]} AS s,
           argMaxIf(identified_user_id, ${EVENT_ORDER}, identified_user_id != '') AS ev
         FROM events
         WHERE ${whereClause(p, siteId, common)}
         GROUP BY user_id
       ) AS r
       LEFT JOIN (${currentAliases(p, siteId)}) AS a ON r.u = a.au
       WHERE ${narrowed.join(' AND ')}
       ORDER BY s ${direction}, u ASC
       ${bounds}`,
      p.values,
    );
  };
  const leading = searched ? undefined : await leadingUsers(ch, siteId, common, page);
  const { rows: ranked, totals } = leading
    ? { rows: leading.keys.map((k) => ({ u: userIdOfKey(k) })), totals: undefined }
    : await rankedPage(rank, page);
  // Awaited after the page's fields: counted meanwhile.
  leading?.total.catch(() => {});
  const counted = async () => (leading ? await leading.total : (totals?.total ?? 0));
  if (ranked.length === 0) return { data: [], totalCount: await counted() };

  const byId = await listedFields(
    ch,
    siteId,
    common,
    ranked.map((r) => r.u),
  );
  const users = ranked.flatMap((r) => {
    const user = byId.get(r.u);
    if (!user) return [];
    const { region: _r, city: _c, language: _l, ...listed } = user;
    return [listed];
  });
  const data = await withProfiles(ch, siteId, users, page.profiles ?? true);
  return { totalCount: await counted(), data };
}

/**
 * One page of the users list (visitor keys as decimal text) for the sorts of LEADING_SESSIONS
 * (the latest visitors first, or the earliest), read from the matching events in the order of
 * the sort key of `events` instead of ranking every matching visitor, and how many visitors
 * match (a promise, counted meanwhile: matchingVisitors). The latest matching events first, a
 * few times as many as the page asks for visitors: a visitor is first met at its latest
 * matching event, so when `wanted` (the page's end) visitors are met, the wanted-th's time
 * bounds them all (every visitor ranked before it has a matching event at that time or later),
 * and ranking only the events from that time on gives the page exactly, ties by key included.
 * By first seen, the same from the earliest. The events are looked for in the last hours of the
 * range first (its first hours by first seen), widening as the unfiltered list does, so a filter
 * that few events match reads a window, not the range, in time order. Undefined where the list
 * ranks every visitor: other sorts, pages past MAX_LEADING, visitors repeating so often that the
 * events read hold too few of them, or too few in the widest window. At 10 M bench events,
 * filtered, the events read in order took 19 ms where ranking every visitor took 204
 * (docs/benchmarks.md).
 */
async function leadingUsers(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  page: UserPage,
): Promise<{ keys: string[]; total: Promise<number> } | undefined> {
  const sort = `${page.sort} ${page.order}` as const;
  if (!readsLeading(page)) return undefined;
  const latest = sort === 'last_seen desc';
  if (!latest && !common.startDate) return undefined;
  const wanted = page.offset + page.limit;
  const scanned = wanted * 8 + 200;
  for (const hours of RECENT_HOURS) {
    const p = new Params();
    const { from, to } = rangeBounds(p, common);
    const end = to ? `least(${to}, now64(3))` : 'now64(3)';
    // The window's edge, and whether the window holds the whole range.
    const [edge, covers] = latest
      ? [hoursBeforeEnd(p, common, hours), from ? `${hoursBeforeEnd(p, common, hours)} <= ${from}` : '0']
      : [
          `${from} + INTERVAL ${p.bind('UInt32', hours)} HOUR`,
          `${from} + INTERVAL ${p.bind('UInt32', hours)} HOUR >= ${end}`,
        ];
    const events = await ch.query<{ k: string; t: string; covers: number }>(
      `SELECT toString(user_key) AS k, toString(timestamp) AS t, ${covers} AS covers FROM events
       WHERE ${whereClause(p, siteId, common, [`timestamp ${latest ? '>=' : '<'} ${edge}`])}
       ORDER BY timestamp ${latest ? 'DESC' : 'ASC'} LIMIT ${p.bind('UInt32', scanned)}`,
      p.values,
    );
    const firstMet = new Map<string, string>();
    for (const e of events) if (!firstMet.has(e.k)) firstMet.set(e.k, e.t);
    if (firstMet.size < wanted) {
      // Visitors repeating among the window's latest events: rank them all.
      if (events.length === scanned) return undefined;
      // Every matching event of a window short of the range read: widen it.
      if (Number(events[0]?.covers ?? 0) !== 1) continue;
    }
    // Counted beside the page's ranking and fields, once the page is read this way.
    const total = matchingVisitors(ch, siteId, common);
    total.catch(() => {});
    const times = [...firstMet.values()];
    if (times.length <= page.offset) return { keys: [], total };
    const bound = times[Math.min(wanted, times.length) - 1]!;
    const q = new Params();
    const ranked = await ch.query<{ k: string }>(
      `SELECT toString(user_key) AS k FROM events
       WHERE ${whereClause(q, siteId, common, [
         `timestamp ${latest ? '>=' : '<='} ${q.bind("DateTime64(3, 'UTC')", bound)}`,
       ])}
       GROUP BY user_key
       ORDER BY ${SORT_EXPRESSIONS[page.sort]} ${latest ? 'DESC' : 'ASC'}, user_key ASC
       LIMIT ${q.bind('UInt32', page.limit)} OFFSET ${q.bind('UInt32', page.offset)}`,
      q.values,
    );
    return { keys: ranked.map((r) => r.k), total };
  }
  return undefined;
}

/**
 * How many visitors have an event in range that matches every filter. With filters the session
 * rows can test, the visitors of the counted sessions, as the filtered overview counts its users
 * (a session is of one visitor, who then has a matching event): at 10 M bench events, filtered,
 * 141 against 221 ms counting them over the matching events (the same count). Otherwise over
 * the matching events.
 */
async function matchingVisitors(ch: ClickHouse, siteId: number, common: CommonParams): Promise<number> {
  if (rowFiltersApply(ch, common)) {
    return readRollup(
      ch,
      async (settled) => {
        const p = new Params();
        const rows = await rollupSessionRows(ch, p, siteId, common, ['user_key'], settled);
        const [r] = await ch.query<{ n: number }>(
          `SELECT uniqExact(s_user_key) AS n FROM (${rows})`,
          p.values,
        );
        return Number(r?.n ?? 0);
      },
      'session_facts',
    );
  }
  const p = new Params();
  const [r] = await ch.query<{ n: number }>(
    `SELECT uniqExact(user_key) AS n FROM events WHERE ${whereClause(p, siteId, common)}`,
    p.values,
  );
  return Number(r?.n ?? 0);
}

/**
 * USER_FIELDS of some visitors (anonymous ids) over the events in range that match the filters,
 * by id, in two reads: their counts, first and last times, and the time of their latest event
 * with an identified id, over their matching events; then only their events at those times (the
 * sort key finds them at once), which hold their latest event and latest identified id (the
 * greatest in EVENT_ORDER among what is read: every other time read is earlier than theirs).
 * Reading the attributes and event ids of all their matching events to pick the latest took a
 * filtered users list 304 against 232 ms p50 at 10 M events (the same answers).
 */
async function listedFields(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  ids: string[],
): Promise<Map<string, EventFields>> {
  const keys = ids.map(keyOfUserId);
  const p = new Params();
  const counted = await ch.query<
    Omit<UserRow, 'u_user_id' | 'u_identified_user_id' | LatestField> & { k: string; id_at: string | null }
  >(
    `SELECT toString(user_key) AS k, ${SORT_EXPRESSIONS.sessions} AS u_sessions,
       ${SORT_EXPRESSIONS.pageviews} AS u_pageviews, ${SORT_EXPRESSIONS.events} AS u_events,
       toString(min(timestamp)) AS u_first_seen, toString(max(timestamp)) AS u_last_seen,
       toString(maxIfOrNull(timestamp, identified_user_id != '')) AS id_at
     FROM events
     WHERE ${whereClause(p, siteId, common, [`user_key IN ${p.bind('Array(UInt64)', keys)}`])}
     GROUP BY user_key`,
    p.values,
  );
  if (counted.length === 0) return new Map();
  const times = [
    ...new Set(counted.flatMap((r) => (r.id_at === null ? [r.u_last_seen] : [r.u_last_seen, r.id_at]))),
  ];
  const q = new Params();
  const latest = await ch.query<
    Pick<UserRow, 'u_user_id' | 'u_identified_user_id' | LatestField> & { k: string }
  >(
    `SELECT toString(user_key) AS k, argMax(user_id, ${EVENT_ORDER}) AS u_user_id,
       argMaxIf(identified_user_id, ${EVENT_ORDER}, identified_user_id != '') AS u_identified_user_id,
       ${LATEST_EVENT_COLUMNS}
     FROM events
     WHERE ${whereClause(q, siteId, common, [
       `timestamp IN ${q.bind("Array(DateTime64(3, 'UTC'))", times)}`,
       `user_key IN ${q.bind('Array(UInt64)', keys)}`,
     ])}
     GROUP BY user_key`,
    q.values,
  );
  const byKey = new Map(latest.map((r) => [r.k, r]));
  return new Map(
    counted.flatMap(({ k, id_at: _at, ...counts }) => {
      const found = byKey.get(k);
      if (!found) return [];
      const { k: _k, u_user_id, u_identified_user_id, ...latestFields } = found;
      return [
        [userIdOfKey(k), toUser({ u_user_id, u_identified_user_id, ...counts, ...latestFields })] as const,
      ];
    }),
  );
}

/**
 * Sorts whose first page follows the sessions in one order: taken by their end, latest first
 * (ties by visitor key), a visitor first shows up at its latest end, its `last_seen`; by their
 * start, earliest first, at its `first_seen`. The first visitors met are then the first of the
 * list, in its order.
 */
const LEADING_SESSIONS: Partial<Record<`${UserSort} ${UserPage['order']}`, string>> = {
  'last_seen desc': 's_end DESC',
  'first_seen asc': 's_start ASC',
};
type LeadingSort = 'last_seen desc' | 'first_seen asc';

/**
 * The first `scanned` sessions of a leading sort (their visitor keys), looked for among the
 * sessions of a window only: by last seen, those whose rollup row ends in the last hours before
 * the range's end (or now, if sooner); by first seen, those whose row starts in the first hours
 * of the range. Every session of the range ending (starting) in the window has its row there
 * too, so when the window's `scanned`-th session still ends (starts) in it, its first ones are
 * the range's. Undefined when no window holds them (the caller reads the whole range).
 */
async function windowedLeading(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
  edges: Edges,
  sort: LeadingSort,
  scanned: number,
): Promise<Leading[] | undefined> {
  const latest = sort === 'last_seen desc';
  if (!latest && !common.startDate) return undefined;
  // Hours before the range's end (or now), as the other lists look; by first seen, after its start.
  for (const hours of RECENT_HOURS) {
    const bound = (q: Params) =>
      latest
        ? hoursBeforeEnd(q, common, hours)
        : `${rangeBounds(q, common).from} + INTERVAL ${q.bind('UInt32', hours)} HOUR`;
    const q = new Params();
    const rows = await rollupSessionRows(ch, q, siteId, common, ['user_key', 'start', 'end'], settled, {
      // Every crossing session: one outside the window cannot come first in it.
      restrict: (r) => (latest ? `session_end >= ${bound(r)}` : `session_start < ${bound(r)}`),
      edges,
      ...(latest ? { endingFrom: earliestHoursBeforeEnd(common, hours) } : {}),
    });
    const at = latest ? 's_end' : 's_start';
    const found = await ch.query<Leading & { at: number; bound: number }>(
      `SELECT toString(s_user_key) AS k, toString(s_end) AS end, toUnixTimestamp64Milli(${at}) AS at,
         toUnixTimestamp64Milli(${bound(q)}) AS bound
       FROM (${rows})
       ORDER BY ${LEADING_SESSIONS[sort]}, s_user_key ASC LIMIT ${q.bind('UInt32', scanned)}`,
      q.values,
    );
    const last = found[scanned - 1];
    if (last && (latest ? Number(last.at) >= Number(last.bound) : Number(last.at) < Number(last.bound)))
      return found;
  }
  return undefined;
}

/** A leading session (visitorsPage): its visitor's key (decimal text) and its end (DateTime64 text). */
type Leading = { k: string; end: string };

/** Deepest page (offset + limit) read from the leading sessions. */
const MAX_LEADING = 5000;

/** Whether a page is read from the leading sessions of its sort (visitorsPage). */
const readsLeading = (page: UserPage) =>
  LEADING_SESSIONS[`${page.sort} ${page.order}`] !== undefined && page.offset + page.limit <= MAX_LEADING;

/**
 * The keys (decimal text) of one page of visitors of `sessions` (rows of rollupSessionRows with
 * `s_user_key`, `s_start`, `s_end`, `s_pageviews`, `s_events`), in the list's order, and how
 * many visitors there are (a promise: the page's fields are read meanwhile). For the sorts of
 * LEADING_SESSIONS, from the sessions leading in their order (a partial sort, several times
 * faster than ranking every visitor; `windowed` looks for them among a window's sessions
 * first), unless visitors repeat among them so often that they hold too few; else every
 * visitor ranked. `visitors`, when given, is how many visitors there are, counted elsewhere
 * (the leading sessions' read does not count them).
 * Sorted by last seen, latest first, from the leading sessions: `lastSeen` too, each listed
 * visitor's `last_seen` (the end of its first session met, its latest), by key.
 */
async function visitorsPage(
  ch: ClickHouse,
  p: Params,
  sessions: string,
  page: UserPage,
  windowed?: (sort: LeadingSort, scanned: number) => Promise<Leading[] | undefined>,
  visitors?: Promise<number>,
): Promise<{ keys: string[]; total: Promise<number>; lastSeen?: Map<string, string> }> {
  const sort = `${page.sort} ${page.order}` as const;
  const order = LEADING_SESSIONS[sort];
  const wanted = page.offset + page.limit;
  if (order && readsLeading(page)) {
    const scanned = wanted * 4 + 100;
    // The count is not awaited here: the page's fields are read while it runs.
    const total =
      visitors ??
      ch
        .query<{ total: number }>(`SELECT uniqExact(s_user_key) AS total FROM (${sessions})`, p.values)
        .then((rows) => Number(rows[0]?.total ?? 0));
    total.catch(() => {});
    const leading =
      (await windowed?.(sort as LeadingSort, scanned)) ??
      (await ch.query<Leading>(
        `SELECT toString(s_user_key) AS k, toString(s_end) AS end FROM (${sessions})
         ORDER BY ${order}, s_user_key ASC LIMIT ${p.bind('UInt32', scanned)}`,
        p.values,
      ));
    // Each visitor's first session met, the end of its latest by last seen.
    const firstMet = new Map<string, string>();
    for (const r of leading) if (!firstMet.has(r.k)) firstMet.set(r.k, r.end);
    const met = [...firstMet.keys()];
    // Fewer sessions than asked for: every visitor was met.
    if (met.length >= wanted || leading.length < scanned) {
      const keys = met.slice(page.offset, wanted);
      return { keys, total, ...(sort === 'last_seen desc' && { lastSeen: firstMet }) };
    }
  }
  const direction = page.order === 'asc' ? 'ASC' : 'DESC';
  const { rows, totals } = await rankedPage(
    (limit, offset) =>
      ch.query<{ k: string; total: number }>(
        `SELECT toString(s_user_key) AS k, count() OVER () AS total
         FROM (${sessions})
         GROUP BY s_user_key
         ORDER BY ${SESSION_SORT_EXPRESSIONS[page.sort]} ${direction}, s_user_key ASC
         LIMIT ${p.bind('UInt32', limit)} OFFSET ${p.bind('UInt32', offset)}`,
        p.values,
      ),
    page,
  );
  return { keys: rows.map((r) => r.k), total: Promise.resolve(totals?.total ?? 0) };
}

/**
 * The unfiltered users list from the session rollup: visitors ranked over their counted
 * sessions (2–5 times fewer rows than their events, visitorsPage), the listed ones' counts and
 * latest identified ids read again over their own sessions (countedVisitors), then their latest
 * events read by their exact times (`last_seen`), which the sort key of `events` finds at once.
 */
async function listUsersFromSessions(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  page: UserPage,
): Promise<{ data: ListedUser[]; totalCount: number }> {
  // How many visitors, from the days they have events on (visitors.ts), beside the leading
  // sessions' read: at 10 M events 40-80 ms against 110 ms counting them over the range's
  // sessions. A page ranked from every visitor counts them in its ranking: no count here.
  const visitors =
    readsLeading(page) && visitorDaysApply(ch, common) ? rangeVisitors(ch, siteId, common) : undefined;
  // Awaited below (a second read of the rollup awaits it again): a failure meanwhile is not unhandled.
  visitors?.catch(() => {});
  const { rows, total, latest, profiles } = await readRollup(ch, async (settled) => {
    const p = new Params();
    const edges = await crossingSessions(ch, siteId, common, settled);
    const sessions = await rollupSessionRows(
      ch,
      p,
      siteId,
      common,
      ['user_key', 'start', 'end', 'pageviews', 'events'],
      settled,
      { edges },
    );
    const { keys, total, lastSeen } = await visitorsPage(
      ch,
      p,
      sessions,
      page,
      (sort, scanned) => windowedLeading(ch, siteId, common, settled, edges, sort, scanned),
      visitors,
    );
    const ids = keys.map(userIdOfKey);
    if (ids.length === 0) return { rows: [], total };
    // The listed visitors' sessions (built without a read: the edges are known) are counted
    // first, the longest of the reads from here on: it takes a free connection of the pool
    // before the two below, which would otherwise hold them (a read waits for its connection).
    const q = new Params();
    const own = await rollupSessionRows(ch, q, siteId, common, COUNTED_FIELDS, settled, {
      only: { users: ids },
      edges,
    });
    const counting = countedVisitors(ch, q, own);
    // Known last seen times (by last seen, latest first: the default) and the visitors' aliases
    // (every listed one's: those with an identified id of their own leave theirs unused) need
    // no counts: both are read beside them.
    const early = lastSeen
      ? latestEvents(
          ch,
          siteId,
          keys.map((k) => ({ k, u_last_seen: lastSeen.get(k) ?? '' })),
        )
      : undefined;
    const aliased = getAliases(ch, siteId, ids);
    early?.catch(() => {});
    aliased.catch(() => {});
    const counted = await counting;
    const byKey = new Map(counted.map((r) => [r.k, r]));
    const rows = keys.flatMap((k) => byKey.get(k) ?? []);
    // The counted last seen times are the answer's: were any other than the leading sessions'
    // (never so far), the latest events are read at them.
    const same = rows.every((r) => lastSeen?.get(r.k) === r.u_last_seen);
    // The rest are read while readRollup checks the parts read (one statement less on the way):
    // a read that runs again leaves these unawaited, handled.
    const latest = early && same ? early : latestEvents(ch, siteId, rows);
    const profiles = withProfiles(
      ch,
      siteId,
      rows.map((r) => ({ user_id: userIdOfKey(r.k), identified_user_id: r.u_identified_user_id })),
      page.profiles ?? true,
      aliased,
    );
    latest.catch(() => {});
    profiles.catch(() => {});
    return { rows, total, latest, profiles };
  });
  if (rows.length === 0 || !latest || !profiles) return { data: [], totalCount: await total };
  const [byId, resolved] = await Promise.all([latest, profiles]);
  const users = rows.flatMap(({ k, ...counts }, i) => {
    const fields = byId.get(userIdOfKey(k));
    if (!fields) return [];
    const { region: _r, city: _c, language: _l, ...listed } = toUser({ ...counts, ...fields });
    const { identified_user_id, traits } = resolved[i]!;
    return [{ ...listed, identified_user_id, traits }];
  });
  return { totalCount: await total, data: users };
}

type Counted = Omit<UserRow, 'u_user_id' | LatestField> & { k: string };

/** The session fields countedVisitors reads. */
const COUNTED_FIELDS: SessionRowField[] = ['user_key', 'start', 'end', 'pageviews', 'events', 'identified'];

/**
 * Counts, first and last times and latest identified id (by its event's place in EVENT_ORDER: a
 * number compares far faster than the tuple) of some visitors over `sessions`, their counted
 * sessions (rows of rollupSessionRows with COUNTED_FIELDS, values bound in `p`): the users list's
 * columns, read for them only (by key, from `sessions_by_visitor`): over every visitor of a
 * large range it held more memory than the ranking itself. The read is sent at once.
 */
function countedVisitors(ch: ClickHouse, p: Params, sessions: string): Promise<Counted[]> {
  const element = (n: string) => `tupleElement(s_identified, ${n})`;
  return ch.query<Counted>(
    `SELECT toString(s_user_key) AS k,
       count() AS u_sessions, sum(s_pageviews) AS u_pageviews, sum(s_events) AS u_events,
       toString(min(s_start)) AS u_first_seen, toString(max(s_end)) AS u_last_seen,
       argMaxIf(${element('3')}, ${eventOrderKey(element('1'), element('2'))}, ${element('3')} != '') AS u_identified_user_id
     FROM (${sessions})
     GROUP BY s_user_key`,
    p.values,
  );
}

/**
 * The latest events' fields of the listed visitors (rows of listUsersFromSessions), by anonymous
 * id: their events at their `last_seen` times, which the sort key of `events` finds at once.
 */
async function latestEvents(
  ch: ClickHouse,
  siteId: number,
  rows: { k: string; u_last_seen: string }[],
): Promise<Map<string, Pick<UserRow, 'u_user_id' | LatestField>>> {
  const p = new Params();
  const latest = await ch.query<Pick<UserRow, 'u_user_id' | LatestField>>(
    `SELECT user_id AS u_user_id, ${LATEST_EVENT_COLUMNS}
     FROM events
     WHERE site_id = ${p.bind('UInt32', siteId)}
       AND timestamp IN ${p.bind("Array(DateTime64(3, 'UTC'))", [...new Set(rows.map((r) => r.u_last_seen))])}
       AND user_id IN ${p.bind(
         'Array(String)',
         rows.map((r) => userIdOfKey(r.k)),
       )}
     GROUP BY user_id`,
    p.values,
  );
  return new Map(latest.map((r) => [r.u_user_id, r]));
}

/**
 * USER_FIELDS (and `n`, the events) over the rows of `user_activity`, in the same order (the
 * answer's fields follow it): the union of their id sets counts each event and session once,
 * however many rows (kinds, parts, shards) hold it.
 */
const ACTIVITY_FIELDS = [
  `tupleElement(max(latest), 'user_id') AS u_user_id`,
  `tupleElement(max(identified), 'identified_user_id') AS u_identified_user_id`,
  'length(groupUniqArrayArray(session_ids)) AS u_sessions',
  'length(groupUniqArrayArray(pageview_ids)) AS u_pageviews',
  'u_pageviews + length(groupUniqArrayArray(other_ids)) AS u_events',
  'toString(min(first_seen)) AS u_first_seen',
  'toString(max(last_seen)) AS u_last_seen',
  ...LATEST_EVENT_FIELDS.map((f) => `tupleElement(max(latest), '${f}') AS u_${f}`),
  'u_events AS n',
].join(',\n  ');

/**
 * SPEC 13 `users/:userId`: every event of all time whose anonymous or identified id is exactly
 * `userId` (as the `user_id` filter matches), and the events without an identified id of the
 * visitors whose current alias is `userId`; attributes from the latest. Undefined when none.
 * With rollups, from the ids' rows in `user_activity` (migration 0010), else from the events.
 */
export async function getUser(
  ch: ClickHouse,
  siteId: number,
  userId: string,
  profiles = true,
): Promise<TrafficUser | undefined> {
  const aliased = (await aliasedVisitors(ch, siteId, [userId])).map((a) => a.au);
  const p = new Params();
  const site = p.bind('UInt32', siteId);
  const id = p.bind('String', userId);
  const list = aliased.length === 0 ? undefined : p.bind('Array(String)', aliased);
  const [row] = await ch.query<UserRow & { n: number }>(
    ch.rollups !== false
      ? `SELECT ${ACTIVITY_FIELDS} FROM user_activity
         WHERE site_id = ${site} AND (id = ${id}${list ? ` OR (kind = 0 AND id IN ${list})` : ''})`
      : `SELECT count() AS n, ${USER_FIELDS} FROM events
         WHERE site_id = ${site} AND (user_id = ${id} OR identified_user_id = ${id}${
           list ? ` OR (identified_user_id = '' AND user_id IN ${list})` : ''
         })`,
    p.values,
  );
  if (!row || row.n === 0) return undefined;
  const { n: _n, ...fields } = row;
  const [user] = await withProfiles(ch, siteId, [toUser(fields)], profiles);
  return user;
}
