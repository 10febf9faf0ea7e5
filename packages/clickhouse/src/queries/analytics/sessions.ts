import { toIso } from '@trackhouse/core';
import type { ClickHouse } from '../../client';
import type { EventRecord, StoredEvent } from '../../rows';
import { type CommonParams, Params, rangeCondition } from '../builder';
import { EVENT_COLUMNS, type EventColumnsRow, eventRecord } from '../events';
import { sessionTotalDays } from './overview';
import {
  crossingSessions,
  type Edges,
  readRollup,
  rollupSessionRows,
  rollupSessionsApply,
  type SessionRowField,
  type Settled,
} from './rollup';
import { rowFiltersApply, unsureApply } from './row-filters';
import {
  countedSessions,
  EVENT_ORDER,
  earliestHoursBeforeEnd,
  hoursBeforeEnd,
  listed,
  listOrder,
  matchingEvents,
  RECENT_HOURS,
  rankedPage,
  SESSION_MS,
} from './shared';
import { inPartitions } from './summaries';

/** SPEC 13 Session: section 9's fields and the extras of the sessions endpoints. */
export interface TrafficSession {
  session_id: string;
  user_id: string;
  identified_user_id: string;
  country: string;
  region: string;
  city: string;
  language: string;
  browser: string;
  operating_system: string;
  device_type: string;
  hostname: string;
  entry_page: string;
  exit_page: string;
  pageviews: number;
  events: number;
  session_duration: number;
  session_start: string;
  session_end: string;
  referrer: string;
  channel: string;
  utm_source: string;
  utm_medium: string;
  utm_campaign: string;
}

/** Fields a session takes from its first event. */
const FIRST_EVENT_FIELDS = [
  'user_id',
  'country',
  'region',
  'city',
  'language',
  'browser',
  'operating_system',
  'device_type',
  'hostname',
  'referrer',
  'channel',
  'utm_source',
  'utm_medium',
  'utm_campaign',
] as const;

/**
 * A session's fields over the grouped events. Output names carry an `s_` prefix: an alias named
 * like a column would shadow it in WHERE. The identified id is the latest one seen (a visitor
 * often signs in partway through a session).
 */
export const SESSION_FIELDS = [
  'toString(session_id) AS s_session_id',
  ...FIRST_EVENT_FIELDS.map((f) => `argMin(${f}, ${EVENT_ORDER}) AS s_${f}`),
  `argMaxIf(identified_user_id, ${EVENT_ORDER}, identified_user_id != '') AS s_identified_user_id`,
  `argMinIf(pathname, ${EVENT_ORDER}, type = 'pageview') AS s_entry_page`,
  `argMaxIf(pathname, ${EVENT_ORDER}, type = 'pageview') AS s_exit_page`,
  `countIf(type = 'pageview') AS s_pageviews`,
  'count() AS s_events',
  `${SESSION_MS} AS s_ms`,
  'toString(min(timestamp)) AS s_session_start',
  'toString(max(timestamp)) AS s_session_end',
].join(',\n  ');

/** The same fields over per-session rows of the rollup (rollup.ts). */
const ROLLUP_SESSION_FIELDS = [
  ...FIRST_EVENT_FIELDS,
  'identified_user_id',
  'entry_page',
  'exit_page',
  'pageviews',
  'events',
  'ms',
  'start',
  'end',
] as const satisfies SessionRowField[];
const ROLLUP_SESSION_COLUMNS = [
  'toString(session_id) AS s_session_id',
  ...ROLLUP_SESSION_FIELDS.filter((f) => f !== 'start' && f !== 'end'),
  'toString(s_start) AS s_session_start',
  'toString(s_end) AS s_session_end',
]
  .map((c) => (c.includes(' AS ') ? c : `s_${c}`))
  .join(', ');

export type SessionRow = { [K in keyof TrafficSession as `s_${K}`]: TrafficSession[K] } & { s_ms: number };

export function toSession(r: SessionRow): TrafficSession {
  const s = Object.fromEntries(
    Object.entries(r).map(([k, v]) => [k.slice(2), v]),
  ) as unknown as TrafficSession & {
    ms: number;
  };
  const { ms, ...rest } = s;
  return {
    ...rest,
    session_duration: ms / 1000,
    session_start: toIso(s.session_start),
    session_end: toIso(s.session_end),
  };
}

/**
 * SPEC 13 `sessions`: the counted sessions of the range, newest start first (ties by id), with
 * their fields over their events in range. With `userId`, only the sessions of that anonymous or
 * identified id (as the `user_id` filter selects them). The page's ids are ranked first; fields
 * are then aggregated for those sessions only.
 */
export async function listSessions(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  page: { limit: number; offset: number; userId?: string },
): Promise<{ data: TrafficSession[]; totalCount: number }> {
  const scoped: CommonParams =
    page.userId === undefined
      ? common
      : {
          ...common,
          filters: [...common.filters, { parameter: 'user_id', type: 'equals', value: [page.userId] }],
        };
  const rolled = rollupSessionsApply(ch);
  const list = async (settled?: Settled) => {
    // The range's crossing sessions, found once for every read of the rollup below.
    const edges = rolled
      ? await crossingSessions(ch, siteId, scoped, settled, undefined, undefined, unsureApply(ch, scoped))
      : undefined;
    const rank = async (limit: number, offset: number) => {
      const p = new Params();
      const sessions = countedSessions(p, siteId, scoped, [
        'toString(session_id) AS s_id',
        'min(timestamp) AS s_start',
        'count() OVER () AS s_total',
      ]);
      return ch.query<{ s_id: string; s_total: number }>(
        `SELECT s_id, s_total FROM (${sessions})
         ORDER BY s_start DESC, s_id ASC
         LIMIT ${p.bind('UInt32', limit)} OFFSET ${p.bind('UInt32', offset)}`,
        p.values,
      );
    };
    // The count from the rollup comes unawaited: the page's sessions are read while it is counted.
    const { ids: pageIds, total } = edges
      ? await leadingSessions(ch, siteId, scoped, settled, edges, page.limit, page.offset)
      : await rankedPage(rank, page).then(({ rows, totals }) => ({
          ids: rows.map((r) => r.s_id),
          total: Promise.resolve(totals?.s_total ?? 0),
        }));
    if (pageIds.length === 0) return { data: [], totalCount: await total };

    const p = new Params();
    const rows = await ch.query<SessionRow>(
      rolled
        ? // The page's sessions are counted ones: their fields are read with no filters.
          `SELECT ${ROLLUP_SESSION_COLUMNS}
           FROM (${await rollupSessionRows(ch, p, siteId, { ...common, filters: [] }, ROLLUP_SESSION_FIELDS, settled, { only: { sessions: pageIds }, edges })})`
        : `SELECT ${SESSION_FIELDS} FROM events
           WHERE ${rangeCondition(p, siteId, common)} AND session_id IN ${p.bind('Array(UUID)', pageIds)}
           GROUP BY session_id`,
      p.values,
    );
    const byId = new Map(rows.map((r) => [r.s_session_id, toSession(r)]));
    return { data: pageIds.flatMap((id) => byId.get(id) ?? []), totalCount: await total };
  };
  return rolled ? readRollup(ch, list) : list();
}

/**
 * A page of the list's ids over the rollup (filtered: over its counted sessions), and the count
 * of the range's sessions (still counting when the page is found). The list is newest start
 * first: a session starting in the last hours before the end of the range (or now, if sooner)
 * ends there too, so the sessions ending in them (by the rollup's end, which no start in range
 * passes) hold every one starting there. When at least `offset + limit` of them start there,
 * the page is theirs; otherwise the window widens, at last to the whole range. Each pass keeps the first sessions of the list as one number each (tuples
 * sort slower).
 */
async function leadingSessions(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
  edges: Edges,
  limit: number,
  offset: number,
): Promise<{ ids: string[]; total: Promise<number> }> {
  const wanted = offset + limit;
  // Counted while the page is found and read (on another read connection), awaited by the
  // caller. Filters tested on the session rows count the sessions there too (row-filters.ts).
  const counting =
    common.filters.length === 0 || rowFiltersApply(ch, common)
      ? countedTotal(ch, siteId, common, settled, edges)
      : matchedTotal(ch, siteId, common);
  counting.catch(() => {});
  let head: string[] = [];
  for (const hours of [...RECENT_HOURS, undefined]) {
    const p = new Params();
    const since = (q: Params) => hoursBeforeEnd(q, common, hours ?? 0);
    const window = hours === undefined ? undefined : (q: Params) => `session_end >= ${since(q)}`;
    // Every crossing session: those ending before the window start before it too. Filtered, a
    // session starting in the window has all its events there: the matching events before it
    // are not looked at.
    const rows = await rollupSessionRows(ch, p, siteId, common, ['start'], settled, {
      restrict: window,
      edges,
      matching: window && ((q: Params) => `timestamp >= ${since(q)}`),
      ...(hours === undefined ? {} : { endingFrom: earliestHoursBeforeEnd(common, hours) }),
    });
    const [row] = await ch.query<{ head: string[]; since: number }>(
      `SELECT arrayMap(x -> toString(x), groupArraySorted(${p.bind('UInt32', wanted)})(${listOrder('toUnixTimestamp64Milli(s_start)')})) AS head,
         toUnixTimestamp64Milli(${since(p)}) AS since
       FROM (${rows})`,
      p.values,
    );
    head = row?.head ?? [];
    const last = head[wanted - 1];
    if (hours === undefined || (last !== undefined && listed(last).start >= Number(row!.since))) break;
  }
  return { ids: head.slice(offset).map((order) => listed(order).id), total: counting };
}

/**
 * The counted sessions of a range read from the rollup: unfiltered, the days whose sessions lie
 * in it counted by their summaries (sessionTotalDays), the other sessions read.
 */
async function countedTotal(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
  edges: Edges,
): Promise<number> {
  const days = common.filters.length === 0 ? await sessionTotalDays(ch, siteId, common, settled) : undefined;
  const p = new Params();
  const rest = days && ((q: Params) => inPartitions(q, days.partitions, true));
  // No crossing session belongs to a summarized day (its sessions all lie in the range).
  const counted = await rollupSessionRows(ch, p, siteId, common, [], settled, { restrict: rest, edges });
  const [row] = await ch.query<{ n: number }>(`SELECT count() AS n FROM (${counted})`, p.values);
  return Number(row?.n ?? 0) + (days?.counts.all_sessions ?? 0);
}

/** The counted sessions of a filtered range: the sessions of its matching events. */
async function matchedTotal(ch: ClickHouse, siteId: number, common: CommonParams): Promise<number> {
  const p = new Params();
  const [row] = await ch.query<{ n: number }>(
    `SELECT uniqExact(session_id) AS n FROM events WHERE ${matchingEvents(p, siteId, common)}`,
    p.values,
  );
  return Number(row?.n ?? 0);
}

/** An event of a session as the session endpoint answers it: error events included. */
export type SessionEvent = Omit<EventRecord, 'type'> & { type: StoredEvent['type'] };

const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * SPEC 13 `sessions/:sessionId`: the session over all its events (no dates, no filters) and a
 * page of those events, oldest first. Undefined when the site has no such session; ids are
 * matched exactly, as the stored (lowercase) text.
 */
export async function getSession(
  ch: ClickHouse,
  siteId: number,
  sessionId: string,
  page: { limit: number; offset: number },
): Promise<{ session: TrafficSession; events: SessionEvent[]; hasMore: boolean } | undefined> {
  if (!UUID_TEXT.test(sessionId)) return undefined;
  const p = new Params();
  const site = p.bind('UInt32', siteId);
  const id = p.bind('UUID', sessionId);
  // Its first and last event from the rollup (sorted by the id's time, then the id: a lookup),
  // so that the events are read within them instead of over the site's whole history.
  const [bounds] =
    ch.rollups === false
      ? []
      : await ch.query<{ b_start: string | null; b_end: string | null }>(
          `SELECT toString(minOrNull(session_start)) AS b_start, toString(maxOrNull(session_end)) AS b_end
           FROM session_facts
           WHERE site_id = ${site} AND UUIDv7ToDateTime(session_id) = UUIDv7ToDateTime(${id}) AND session_id = ${id}`,
          p.values,
        );
  const within =
    bounds?.b_start && bounds.b_end
      ? ` AND timestamp >= ${p.bind("DateTime64(3, 'UTC')", bounds.b_start)} AND timestamp <= ${p.bind("DateTime64(3, 'UTC')", bounds.b_end)}`
      : '';
  const where = `site_id = ${site} AND session_id = ${id}${within}`;
  const [row] = await ch.query<SessionRow>(
    `SELECT ${SESSION_FIELDS} FROM events WHERE ${where} GROUP BY session_id`,
    p.values,
  );
  if (!row) return undefined;
  const rows = await ch.query<EventColumnsRow<SessionEvent>>(
    `SELECT ${EVENT_COLUMNS} FROM events WHERE ${where}
     ORDER BY timestamp, event_id
     LIMIT ${p.bind('UInt32', page.limit + 1)} OFFSET ${p.bind('UInt32', page.offset)}`,
    p.values,
  );
  return {
    session: toSession(row),
    events: rows.slice(0, page.limit).map((r) => eventRecord<SessionEvent>(r)),
    hasMore: rows.length > page.limit,
  };
}
