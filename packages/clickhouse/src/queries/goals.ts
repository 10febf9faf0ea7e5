import { toIso } from '@trackhouse/core';
import type { ClickHouse } from '../client';
import { type CommonParams, nextDay, Params, whereClause } from './builder';

export type GoalDefinition =
  | { goalType: 'path'; config: { pathPattern: string } }
  | {
      goalType: 'event';
      config: { eventName: string; eventPropertyKey?: string; eventPropertyValue?: string | number };
    };

/**
 * A path pattern as an anchored RE2 regex over the whole pathname: `*` is one segment, `**` any
 * number of segments (zero included, so `/blog/**` matches `/blog` itself).
 */
export function pathPatternRegex(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === '*' && pattern[i + 1] === '*') {
      const slashBefore = out.endsWith('/');
      if (slashBefore && (i + 2 === pattern.length || pattern[i + 2] === '/')) {
        out = `${out.slice(0, -1)}(?:/.*)?`;
        i += 2; // the slash after it, if any, is part of ".*"
        if (pattern[i] === '/') out += '/';
        continue;
      }
      out += '.*';
      i++;
    } else if (ch === '*') {
      out += '[^/]+';
    } else {
      out += ch.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
    }
  }
  return `^${out}$`;
}

/** The condition an event must meet to convert a goal. */
export function goalCondition(p: Params, goal: GoalDefinition): string {
  if (goal.goalType === 'path') {
    return `(type = 'pageview' AND match(pathname, ${p.bind('String', pathPatternRegex(goal.config.pathPattern))}))`;
  }
  const parts = [`type = 'custom_event'`, `event_name = ${p.bind('String', goal.config.eventName)}`];
  const { eventPropertyKey: key, eventPropertyValue: value } = goal.config;
  if (key !== undefined && value !== undefined) {
    const k = p.bind('String', key);
    // The map answers most rows cheaply; the JSON type check (evaluated only for rows that got
    // this far) tells the number 2 from the string "2", which the map stores alike.
    parts.push(
      typeof value === 'number'
        ? `props[${k}] != '' AND JSONType(properties, ${k}) IN ('Int64', 'UInt64', 'Double') AND JSONExtractFloat(properties, ${k}) = ${p.bind('Float64', value)}`
        : `props[${k}] = ${p.bind('String', value)} AND JSONType(properties, ${k}) = 'String'`,
    );
  }
  return `(${parts.join(' AND ')})`;
}

/** Custom events live in `events_by_name` too, ordered by name: event goals read only their rows. */
const goalTable = (goal: GoalDefinition) => (goal.goalType === 'event' ? 'events_by_name' : 'events');

/**
 * Distinct sessions with any event in range (after filters), and per goal those that converted.
 * Two queries at once: one GROUP BY session over the range (one hash table, with a flag per
 * path goal, tested on the pathname dictionary), and one over the custom events alone with a
 * distinct count per event goal.
 */
export async function goalStats(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  goals: GoalDefinition[],
): Promise<{ totalSessions: number; conversions: number[] }> {
  const conversions = goals.map(() => 0);
  const pathGoals = goals.flatMap((g, i) => (g.goalType === 'path' ? [i] : []));
  const eventGoals = goals.flatMap((g, i) => (g.goalType === 'event' ? [i] : []));

  const sessionsQuery = async () => {
    const p = new Params();
    const flags = pathGoals.map((i) => `, max(${goalCondition(p, goals[i]!)}) AS g${i}`).join('');
    const sums = pathGoals.map((i) => `, sum(g${i}) AS c${i}`).join('');
    const [row] = await ch.query<Record<string, number>>(
      `SELECT count() AS sessions${sums}
       FROM (SELECT session_id${flags} FROM events WHERE ${whereClause(p, siteId, common)} GROUP BY session_id)`,
      p.values,
    );
    for (const i of pathGoals) conversions[i] = row?.[`c${i}`] ?? 0;
    return row?.sessions ?? 0;
  };
  const eventGoalsQuery = async () => {
    if (eventGoals.length === 0) return;
    const p = new Params();
    const counts = eventGoals.map((i) => `uniqExactIf(session_id, ${goalCondition(p, goals[i]!)}) AS c${i}`);
    const names = p.bind(
      'Array(String)',
      eventGoals.map((i) => (goals[i] as Extract<GoalDefinition, { goalType: 'event' }>).config.eventName),
    );
    const [row] = await ch.query<Record<string, number>>(
      `SELECT ${counts.join(', ')} FROM events_by_name
       WHERE ${whereClause(p, siteId, common, [`type = 'custom_event'`, `event_name IN ${names}`])}`,
      p.values,
    );
    for (const i of eventGoals) conversions[i] = row?.[`c${i}`] ?? 0;
  };
  const [totalSessions] = await Promise.all([sessionsQuery(), eventGoalsQuery()]);
  return { totalSessions, conversions };
}

export interface SessionRecord {
  session_id: string;
  user_id: string;
  country: string;
  browser: string;
  operating_system: string;
  device_type: string;
  entry_page: string;
  exit_page: string;
  pageviews: number;
  session_duration: number;
  session_start: string;
  session_end: string;
  referrer: string;
  channel: string;
}

/** Hours before the end of the range that goal sessions look back first, widening until a page fills. */
const GOAL_SESSION_WINDOWS = [3, 24, 24 * 8];

/**
 * Sessions that converted the goal, newest end first (ties by id). Fields are over the
 * session's events in range. The page is found first, newest events first: the converted
 * sessions with an event in the last hours of the range are exactly those ending there, so when
 * they fill the page nothing older can rank on it; otherwise the window widens (at last to the
 * whole range). Full aggregates are then computed for the page's sessions only.
 */
export async function goalSessions(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  goal: GoalDefinition,
  page: { limit: number; offset: number },
): Promise<SessionRecord[]> {
  const wanted = page.offset + page.limit;
  // A window as long as the range (25 hours a day covers DST days) is the whole range.
  const rangeHours =
    common.startDate && common.endDate
      ? (Date.parse(nextDay(common.endDate)) - Date.parse(common.startDate)) / 3_600_000 + 1
      : Number.POSITIVE_INFINITY;
  const windows = [...GOAL_SESSION_WINDOWS.filter((h) => h < rangeHours), undefined];
  let ids: string[] = [];
  for (const hours of windows) {
    const p = new Params();
    const rangeEnd = common.endDate
      ? `toDateTime64(${p.bind('String', `${nextDay(common.endDate)} 00:00:00`)}, 3, ${p.bind('String', common.timeZone)})`
      : 'now64(3)';
    const window =
      hours === undefined ? [] : [`timestamp >= ${rangeEnd} - INTERVAL ${p.bind('UInt32', hours)} HOUR`];
    // Sessions with an event in the window and their last event, then those among them that
    // converted in the range (the goal's rows looked up for these sessions only).
    const ranked = await ch.query<{ s_session_id: string }>(
      `WITH recent AS (
         SELECT session_id, max(timestamp) AS s_end FROM events
         WHERE ${whereClause(p, siteId, common, window)}
         GROUP BY session_id)
       SELECT toString(session_id) AS s_session_id FROM recent
       WHERE session_id IN (
         SELECT session_id FROM ${goalTable(goal)}
         WHERE ${whereClause(p, siteId, common, [goalCondition(p, goal)])}
           AND session_id IN (SELECT session_id FROM recent))
       ORDER BY s_end DESC, s_session_id
       LIMIT ${p.bind('UInt32', wanted)}`,
      p.values,
    );
    ids = ranked.slice(page.offset).map((r) => r.s_session_id);
    if (ranked.length === wanted) break;
  }
  if (ids.length === 0) return [];

  const p = new Params();
  const order = '(timestamp, event_id)';
  // Output names carry an `s_` prefix: an alias named like a column would shadow the column in
  // WHERE (ClickHouse resolves aliases there) and turn filters into aggregate comparisons.
  const rows = await ch.query<Record<string, string | number>>(
    `SELECT toString(session_id) AS s_session_id,
       argMin(user_id, ${order}) AS s_user_id,
       argMin(country, ${order}) AS s_country,
       argMin(browser, ${order}) AS s_browser,
       argMin(operating_system, ${order}) AS s_operating_system,
       argMin(device_type, ${order}) AS s_device_type,
       argMinIf(pathname, ${order}, type = 'pageview') AS s_entry_page,
       argMaxIf(pathname, ${order}, type = 'pageview') AS s_exit_page,
       countIf(type = 'pageview') AS s_pageviews,
       toUInt32(intDiv(toUnixTimestamp64Milli(max(timestamp)) - toUnixTimestamp64Milli(min(timestamp)), 1000)) AS s_session_duration,
       toString(min(timestamp)) AS s_session_start,
       toString(max(timestamp)) AS s_session_end,
       argMin(referrer, ${order}) AS s_referrer,
       argMin(channel, ${order}) AS s_channel
     FROM events
     WHERE ${whereClause(p, siteId, common, [`session_id IN ${p.bind('Array(UUID)', ids)}`])}
     GROUP BY session_id
     ORDER BY max(timestamp) DESC, s_session_id`,
    p.values,
  );
  return rows.map((r) => {
    const s = Object.fromEntries(
      Object.entries(r).map(([k, v]) => [k.slice(2), v]),
    ) as unknown as SessionRecord;
    return { ...s, session_start: toIso(s.session_start), session_end: toIso(s.session_end) };
  });
}
