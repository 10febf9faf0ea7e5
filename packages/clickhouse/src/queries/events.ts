import { toIso } from '@trackhouse/core';
import type { ClickHouse } from '../client';
import { LOCAL_SUFFIX } from '../cluster';
import type { EventRecord } from '../rows';
import { type CommonParams, Params, READ_DATE_MAX, READ_DATE_MIN, whereClause } from './builder';

// Text forms get their own names: an alias named like a column would shadow the column in
// WHERE and ORDER BY (ClickHouse resolves aliases there), breaking the cursor comparison.
export const EVENT_COLUMNS = `toString(timestamp) AS timestamp_text, type, event_name, properties, toString(session_id) AS session_id_text, user_id,
  identified_user_id, pathname, querystring, hostname, page_title, referrer, browser, browser_version,
  operating_system, operating_system_version, language, country, region, city, lat, lon, screen_width,
  screen_height, device_type, channel, toString(event_id) AS event_id_text`;

/** A row of EVENT_COLUMNS. */
export type EventColumnsRow<E extends { timestamp: string; event_id: string; session_id: string }> = Omit<
  E,
  'timestamp' | 'event_id' | 'session_id'
> & { timestamp_text: string; event_id_text: string; session_id_text: string };

/** A row of EVENT_COLUMNS as the API answers an event. */
export function eventRecord<E extends { timestamp: string; event_id: string; session_id: string }>({
  timestamp_text,
  event_id_text,
  session_id_text,
  ...r
}: EventColumnsRow<E>): E {
  return {
    timestamp: toIso(timestamp_text),
    ...r,
    session_id: session_id_text,
    event_id: event_id_text,
  } as unknown as E;
}

/** A position in the newest-first order: the last event of a page. */
export interface EventCursor {
  timestamp: string;
  eventId: string;
}

export function encodeCursor(c: EventCursor): string {
  return Buffer.from(JSON.stringify([c.timestamp, c.eventId])).toString('base64url');
}

export function decodeCursor(text: string): EventCursor | undefined {
  try {
    const value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown;
    if (!Array.isArray(value) || value.length !== 2) return undefined;
    const [timestamp, eventId] = value as [unknown, unknown];
    if (typeof timestamp !== 'string' || Number.isNaN(Date.parse(timestamp))) return undefined;
    if (typeof eventId !== 'string' || !/^[0-9a-f-]{36}$/.test(eventId)) return undefined;
    const iso = new Date(timestamp).toISOString();
    // Extended years (`+275760-…`, `-000001-…`) sort before digits: they fall outside too.
    if (iso < READ_DATE_MIN || iso.slice(0, 10) > READ_DATE_MAX) return undefined;
    return { timestamp: iso, eventId };
  } catch {
    return undefined;
  }
}

const chTime = (iso: string) => iso.replace('T', ' ').replace('Z', '');

/**
 * Pageviews, custom events and outbound clicks, newest first, ordered by (timestamp, event_id)
 * so that paging never skips or repeats events that share a millisecond. One extra row tells
 * whether there is more.
 */
export async function listEvents(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  page: { pageSize: number; cursor?: EventCursor; beforeTimestamp?: string },
): Promise<{ events: EventRecord[]; hasMore: boolean; next: EventCursor | undefined }> {
  const p = new Params();
  const extra = [`type IN ('pageview', 'custom_event', 'outbound')`];
  if (page.cursor) {
    extra.push(
      `(timestamp, event_id) < (toDateTime64(${p.bind('String', chTime(page.cursor.timestamp))}, 3, 'UTC'), toUUID(${p.bind('String', page.cursor.eventId)}))`,
    );
  } else if (page.beforeTimestamp) {
    extra.push(`timestamp < toDateTime64(${p.bind('String', chTime(page.beforeTimestamp))}, 3, 'UTC')`);
  }
  const sql = `SELECT ${EVENT_COLUMNS} FROM events
  WHERE ${whereClause(p, siteId, common, extra)}
  ORDER BY timestamp DESC, event_id DESC
  LIMIT ${p.bind('UInt32', page.pageSize + 1)}`;
  const rows = await ch.query<
    Omit<EventRecord, 'timestamp' | 'event_id' | 'session_id'> & {
      timestamp_text: string;
      event_id_text: string;
      session_id_text: string;
    }
  >(sql, p.values);
  const hasMore = rows.length > page.pageSize;
  const events: EventRecord[] = rows
    .slice(0, page.pageSize)
    .map(({ timestamp_text, event_id_text, session_id_text, ...r }) => ({
      timestamp: toIso(timestamp_text),
      ...r,
      session_id: session_id_text,
      event_id: event_id_text,
    }));
  const last = events.at(-1);
  return {
    events,
    hasMore,
    next: hasMore && last ? { timestamp: last.timestamp, eventId: last.event_id } : undefined,
  };
}

/** The most rows the names, properties and outbound lists answer. */
export const MAX_LIST_ROWS = 1000;

export async function eventNames(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  limit = MAX_LIST_ROWS,
) {
  const p = new Params();
  return ch.query<{ eventName: string; count: number }>(
    `SELECT event_name AS eventName, count() AS count FROM events_by_name
     WHERE ${whereClause(p, siteId, common, [`type = 'custom_event'`])}
     GROUP BY event_name ORDER BY count DESC, eventName
     LIMIT ${p.bind('UInt32', limit)}`,
    p.values,
  );
}

/** Top-level property keys and values of one custom event; non-string values as JSON text. */
export async function eventProperties(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  eventName: string,
  limit = MAX_LIST_ROWS,
) {
  const p = new Params();
  const name = p.bind('String', eventName);
  return ch.query<{ propertyKey: string; propertyValue: string; count: number }>(
    `SELECT key AS propertyKey, value AS propertyValue, count() AS count
     FROM events_by_name ARRAY JOIN mapKeys(props) AS key, mapValues(props) AS value
     WHERE ${whereClause(p, siteId, common, [`type = 'custom_event'`, `event_name = ${name}`])}
     GROUP BY key, value ORDER BY count DESC, propertyKey, propertyValue
     LIMIT ${p.bind('UInt32', limit)}`,
    p.values,
  );
}

export async function outboundLinks(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  limit = MAX_LIST_ROWS,
) {
  const p = new Params();
  const rows = await ch.query<{ url: string; count: number; lastClicked: string }>(
    `SELECT props['url'] AS url, count() AS count, toString(max(timestamp)) AS lastClicked
     FROM events_by_name
     WHERE ${whereClause(p, siteId, common, [`type = 'outbound'`, `props['url'] != ''`])}
     GROUP BY url ORDER BY count DESC, url
     LIMIT ${p.bind('UInt32', limit)}`,
    p.values,
  );
  return rows.map((r) => ({ ...r, lastClicked: toIso(r.lastClicked) }));
}

/** Every table holding a site's data, derived ones included. */
const SITE_TABLES = [
  'events',
  'events_by_name',
  'sessions',
  'session_facts',
  'session_paths',
  'site_pages',
  'identifies',
  'user_profiles',
  'user_aliases',
  'session_replay',
  'metric_summaries',
  'visitor_days',
  'user_activity',
  'visitor_quarters',
  'visitor_hours',
  'bucket_visitors',
  'sessions_by_visitor',
  'session_pages',
  'session_pages_by_country',
  'session_pages_builds',
];

/**
 * Removes every event, profile and replay of a site (lightweight delete: gone from reads at
 * once). On a cluster the delete runs on the local tables of every shard (`ON CLUSTER`; a
 * Distributed table takes no delete), with the id inline: a distributed DDL is sent on as text,
 * without its parameters.
 */
export async function deleteSiteEvents(ch: ClickHouse, siteId: number): Promise<void> {
  for (const table of SITE_TABLES) {
    if (ch.cluster) {
      if (!Number.isInteger(siteId) || siteId < 0 || siteId > 0xffffffff)
        throw new RangeError(`bad site id ${siteId}`);
      await ch.command(
        `DELETE FROM ${table}${LOCAL_SUFFIX} ON CLUSTER ${ch.cluster} WHERE site_id = ${siteId}`,
      );
    } else {
      await ch.command(`DELETE FROM ${table} WHERE site_id = {site:UInt32}`, { site: siteId });
    }
  }
}
