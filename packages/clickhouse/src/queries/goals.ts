import { toIso } from '@trackhouse/core';
import type { ClickHouse } from '../client';
import { type CommonParams, Params, whereClause } from './builder';

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

/**
 * Distinct sessions with any event in range (after filters), and per goal those that converted:
 * one GROUP BY session (one hash table) rather than one distinct-count set per goal.
 */
export async function goalStats(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  goals: GoalDefinition[],
): Promise<{ totalSessions: number; conversions: number[] }> {
  const p = new Params();
  const flags = goals.map((g, i) => `max(${goalCondition(p, g)}) AS g${i}`);
  const sums = goals.map((_, i) => `sum(g${i}) AS c${i}`);
  const [row] = await ch.query<Record<string, number>>(
    `SELECT count() AS sessions${sums.length ? `, ${sums.join(', ')}` : ''}
     FROM (
       SELECT session_id${flags.length ? `, ${flags.join(', ')}` : ''}
       FROM events WHERE ${whereClause(p, siteId, common)}
       GROUP BY session_id
     )`,
    p.values,
  );
  return { totalSessions: row?.sessions ?? 0, conversions: goals.map((_, i) => row?.[`c${i}`] ?? 0) };
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

/** Sessions that converted the goal, newest end first. Fields are over the session's events in range. */
export async function goalSessions(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  goal: GoalDefinition,
  page: { limit: number; offset: number },
): Promise<SessionRecord[]> {
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
     WHERE ${whereClause(p, siteId, common)}
       -- Full aggregates only for the page's sessions: the converted sessions ranked by their
       -- last event, cut to the page, first.
       AND session_id IN (
         SELECT session_id FROM events
         WHERE ${whereClause(p, siteId, common)}
           AND session_id IN (SELECT session_id FROM events WHERE ${whereClause(p, siteId, common, [goalCondition(p, goal)])})
         GROUP BY session_id
         ORDER BY max(timestamp) DESC, toString(session_id)
         LIMIT ${p.bind('UInt32', page.limit)} OFFSET ${p.bind('UInt32', page.offset)})
     GROUP BY session_id
     ORDER BY max(timestamp) DESC, toString(session_id)`,
    p.values,
  );
  return rows.map((r) => {
    const s = Object.fromEntries(
      Object.entries(r).map(([k, v]) => [k.slice(2), v]),
    ) as unknown as SessionRecord;
    return { ...s, session_start: toIso(s.session_start), session_end: toIso(s.session_end) };
  });
}
