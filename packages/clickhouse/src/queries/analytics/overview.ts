import type { ClickHouse } from '../../client';
import { type CommonParams, Params, whereClause } from '../builder';
import { readRollup, rollupSessionRows, rollupSessionsApply } from './rollup';
import { addDays, countedSessions, daysBetween, ratio, SESSION_MS } from './shared';

/** SPEC 13 `overview` numbers of one range. */
export interface TrafficSummary {
  sessions: number;
  pageviews: number;
  users: number;
  pages_per_session: number;
  bounce_rate: number;
  session_duration: number;
}

/** Per-session columns every session total is built from. */
export const SESSION_TOTAL_COLUMNS = [`countIf(type = 'pageview') AS s_pageviews`, `${SESSION_MS} AS s_ms`];

/** Sums over counted sessions, as the session-level part of a summary. */
export interface SessionTotals {
  sessions: number;
  session_pageviews: number;
  bounces: number;
  duration_ms: number;
}

export const SESSION_TOTAL_AGGREGATES = `count() AS sessions, sum(s_pageviews) AS session_pageviews,
  countIf(s_pageviews = 1) AS bounces, sum(s_ms) AS duration_ms`;

/** Averages over counted sessions: pages per session, bounce rate (0–100), duration (seconds). */
export function sessionAverages(t: SessionTotals) {
  return {
    pages_per_session: ratio(t.session_pageviews, t.sessions),
    bounce_rate: ratio(t.bounces * 100, t.sessions),
    session_duration: ratio(t.duration_ms, t.sessions * 1000),
  };
}

/**
 * Sessions and their averages over the counted sessions (each grouped over its events in range,
 * filters not applied); pageviews and users over the events in range that match the filters.
 */
export async function overview(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
): Promise<TrafficSummary> {
  if (rollupSessionsApply(ch)) {
    // Every event in range of a counted session that matches the filters counts (with no
    // filters: every event of it), and a session has one anonymous visitor: the users follow
    // from the sessions, the pageviews from their matching pageviews.
    const pageviews = common.filters.length > 0 ? 'sum(m_pageviews)' : 'sum(s_pageviews)';
    const [t] = await readRollup(ch, async (settled) => {
      const p = new Params();
      const rows = await rollupSessionRows(ch, p, siteId, common, ['pageviews', 'ms', 'user_key'], settled);
      return ch.query<SessionTotals & { pageviews: number; users: number }>(
        `SELECT ${SESSION_TOTAL_AGGREGATES}, ${pageviews} AS pageviews, uniqExact(s_user_key) AS users
         FROM (${rows})`,
        p.values,
      );
    });
    const totals = t ?? {
      sessions: 0,
      session_pageviews: 0,
      bounces: 0,
      duration_ms: 0,
      pageviews: 0,
      users: 0,
    };
    return {
      sessions: totals.sessions,
      pageviews: totals.pageviews,
      users: totals.users,
      ...sessionAverages(totals),
    };
  }
  const s = new Params();
  const [totals] = await ch.query<SessionTotals>(
    `SELECT ${SESSION_TOTAL_AGGREGATES}
     FROM (${countedSessions(s, siteId, common, SESSION_TOTAL_COLUMNS)})`,
    s.values,
  );
  const e = new Params();
  const [counts] = await ch.query<{ pageviews: number; users: number }>(
    `SELECT countIf(type = 'pageview') AS pageviews, uniqExact(user_id) AS users
     FROM events WHERE ${whereClause(e, siteId, common)}`,
    e.values,
  );
  const t = totals ?? { sessions: 0, session_pageviews: 0, bounces: 0, duration_ms: 0 };
  return {
    sessions: t.sessions,
    pageviews: counts?.pageviews ?? 0,
    users: counts?.users ?? 0,
    ...sessionAverages(t),
  };
}

/** The range of equal length that ends the day before `startDate`. */
export function previousRange(startDate: string, endDate: string): { startDate: string; endDate: string } {
  const days = daysBetween(startDate, endDate);
  return { startDate: addDays(startDate, -days), endDate: addDays(startDate, -1) };
}
