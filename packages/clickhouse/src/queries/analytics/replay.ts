import { toIso } from '@trackhouse/core';
import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeBounds, whereClause } from '../builder';
import { rollupSessionsIn } from './rollup';
import { EVENT_ORDER } from './shared';

/**
 * Session replays as the ingest stored them: one `session_replay` row per rrweb batch. A
 * session's batches are in the order (start_time, timestamp, batch id as text), its events in
 * batch order and, within a batch, as the browser sent them (docs/decisions.md "User profiles,
 * traits and replays").
 */

export interface ReplayMetadata {
  session_id: string;
  user_id: string;
  identified_user_id: string;
  start_time: string;
  end_time: string;
  duration_ms: number;
  page_url: string;
  event_count: number;
  size: number;
  viewport_width: number;
  viewport_height: number;
  language: string;
}

/** What a replay carries of its session: the attributes of the session's first event. */
export const REPLAY_SESSION_ATTRIBUTES = [
  'country',
  'region',
  'city',
  'browser',
  'browser_version',
  'operating_system',
  'operating_system_version',
  'device_type',
] as const;
type SessionAttributes = Record<(typeof REPLAY_SESSION_ATTRIBUTES)[number], string>;

export type ReplayItem = ReplayMetadata & SessionAttributes;

const noAttributes = Object.fromEntries(REPLAY_SESSION_ATTRIBUTES.map((a) => [a, ''])) as SessionAttributes;

/**
 * The attributes of each session's first event (all its events; "" for a session without
 * events). From the session rollup, whose key starts with the time in the session id, so a page
 * of ids is a few granules; from the events when rollups are off (a scan of the site).
 */
async function sessionAttributes(
  ch: ClickHouse,
  siteId: number,
  ids: string[],
): Promise<Map<string, SessionAttributes>> {
  if (ids.length === 0) return new Map();
  const p = new Params();
  const site = p.bind('UInt32', siteId);
  const list = p.bind('Array(UUID)', ids);
  const columns = REPLAY_SESSION_ATTRIBUTES.map((a) =>
    ch.rollups === false
      ? `argMin(${a}, ${EVENT_ORDER}) AS a_${a}`
      : `tupleElement(min(first_event), '${a}') AS a_${a}`,
  ).join(', ');
  const source =
    ch.rollups === false
      ? `events WHERE site_id = ${site} AND session_id IN ${list}`
      : `session_facts WHERE site_id = ${site} AND ${rollupSessionsIn(list)}`;
  const rows = await ch.query<{ s: string } & Record<string, string>>(
    `SELECT toString(session_id) AS s, ${columns} FROM ${source} GROUP BY session_id`,
    p.values,
  );
  return new Map(
    rows.map((r) => [
      r.s,
      Object.fromEntries(REPLAY_SESSION_ATTRIBUTES.map((a) => [a, r[`a_${a}`] ?? ''])) as SessionAttributes,
    ]),
  );
}

async function withAttributes(
  ch: ClickHouse,
  siteId: number,
  items: ReplayMetadata[],
): Promise<ReplayItem[]> {
  const attributes = await sessionAttributes(
    ch,
    siteId,
    items.map((m) => m.session_id),
  );
  return items.map((m) => ({ ...m, ...(attributes.get(m.session_id) ?? noAttributes) }));
}

const BATCH_ORDER = '(start_time, timestamp, toString(batch_id))';

/** A session's metadata over its batches (`r_` names: aliases must not shadow columns). */
const METADATA_FIELDS = [
  `argMin(user_id, ${BATCH_ORDER}) AS r_user_id`,
  `argMaxIf(identified_user_id, ${BATCH_ORDER}, identified_user_id != '') AS r_identified_user_id`,
  'toString(min(start_time)) AS r_start_time',
  'toString(max(end_time)) AS r_end_time',
  'toUnixTimestamp64Milli(max(end_time)) - toUnixTimestamp64Milli(min(start_time)) AS r_duration_ms',
  `argMin(page_url, ${BATCH_ORDER}) AS r_page_url`,
  'sum(event_count) AS r_event_count',
  'sum(size) AS r_size',
  `argMin(viewport_width, ${BATCH_ORDER}) AS r_viewport_width`,
  `argMin(viewport_height, ${BATCH_ORDER}) AS r_viewport_height`,
  `argMin(language, ${BATCH_ORDER}) AS r_language`,
].join(',\n  ');

type MetadataRow = { s: string } & {
  [K in Exclude<keyof ReplayMetadata, 'session_id'> as `r_${K}`]: ReplayMetadata[K];
};

function toMetadata({ s, ...r }: MetadataRow): ReplayMetadata {
  const m = Object.fromEntries(Object.entries(r).map(([k, v]) => [k.slice(2), v])) as Omit<
    ReplayMetadata,
    'session_id'
  >;
  return { session_id: s, ...m, start_time: toIso(m.start_time), end_time: toIso(m.end_time) };
}

/**
 * `session-replay/list`: the replays whose first rrweb event lies in the range, newest start
 * first (ties by session id), paged. With filters, a replay is listed when its session has an
 * event in the range matching every filter.
 */
export async function listReplays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  page: { limit: number; offset: number },
): Promise<{ data: ReplayItem[]; totalCount: number }> {
  const ranked = (limit: number, offset: number) => {
    const p = new Params();
    const { from, to } = rangeBounds(p, common);
    const having = [from && `min(start_time) >= ${from}`, to && `min(start_time) < ${to}`].filter(Boolean);
    const where = [`site_id = ${p.bind('UInt32', siteId)}`];
    if (common.filters.length > 0) {
      where.push(`session_id IN (SELECT session_id FROM events WHERE ${whereClause(p, siteId, common)})`);
    }
    return ch.query<MetadataRow & { total: number }>(
      `SELECT toString(session_id) AS s, ${METADATA_FIELDS}, count() OVER () AS total
       FROM session_replay
       WHERE ${where.join(' AND ')}
       GROUP BY session_id
       ${having.length > 0 ? `HAVING ${having.join(' AND ')}` : ''}
       ORDER BY min(start_time) DESC, s ASC
       LIMIT ${p.bind('UInt32', limit)} OFFSET ${p.bind('UInt32', offset)}`,
      p.values,
    );
  };
  const rows = await ranked(page.limit, page.offset);
  const totalCount = (rows[0] ?? (page.offset > 0 ? (await ranked(1, 0))[0] : undefined))?.total ?? 0;
  const data = await withAttributes(
    ch,
    siteId,
    rows.map(({ total: _t, ...r }) => toMetadata(r)),
  );
  return { totalCount, data };
}

/** Session ids as stored: lowercase UUID text (anything else names no session). */
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface ReplayPage {
  metadata: ReplayItem;
  events: unknown[];
  hasMore: boolean;
  /** The `offset` of the next page, null on the last. */
  nextOffset: number | null;
}

/**
 * `session-replay/:sessionId`: the metadata and `limit` rrweb events from `offset` (events
 * counted over the whole session in order). Only the batches holding that window are read.
 * Undefined for a session of this site without a replay.
 */
export async function getReplay(
  ch: ClickHouse,
  siteId: number,
  sessionId: string,
  page: { limit: number; offset: number },
): Promise<ReplayPage | undefined> {
  if (!SESSION_ID.test(sessionId)) return undefined;
  const p = new Params();
  const key = `site_id = ${p.bind('UInt32', siteId)} AND session_id = ${p.bind('UUID', sessionId)}`;
  const [meta] = await ch.query<MetadataRow>(
    `SELECT toString(session_id) AS s, ${METADATA_FIELDS} FROM session_replay WHERE ${key} GROUP BY session_id`,
    p.values,
  );
  if (!meta) return undefined;
  const [metadata] = await withAttributes(ch, siteId, [toMetadata(meta)]);
  if (!metadata) return undefined;

  const batches = await ch.query<{ b: string; n: number }>(
    `SELECT toString(batch_id) AS b, event_count AS n FROM session_replay WHERE ${key} ORDER BY ${BATCH_ORDER}`,
    p.values,
  );
  const end = page.offset + page.limit;
  const wanted: { b: string; first: number }[] = [];
  let first = 0;
  for (const batch of batches) {
    if (first < end && first + batch.n > page.offset) wanted.push({ b: batch.b, first });
    first += batch.n;
  }
  const events: unknown[] = [];
  if (wanted.length > 0) {
    const q = new Params();
    const rows = await ch.query<{ b: string; events: string }>(
      `SELECT toString(batch_id) AS b, events FROM session_replay
       WHERE site_id = ${q.bind('UInt32', siteId)} AND session_id = ${q.bind('UUID', sessionId)}
         AND batch_id IN ${q.bind(
           'Array(UUID)',
           wanted.map((w) => w.b),
         )}`,
      q.values,
    );
    const text = new Map(rows.map((r) => [r.b, r.events]));
    for (const w of wanted) {
      const list = JSON.parse(text.get(w.b) ?? '[]') as unknown[];
      events.push(...list.slice(Math.max(0, page.offset - w.first), end - w.first));
    }
  }
  const hasMore = end < first;
  return { metadata, events, hasMore, nextOffset: hasMore ? end : null };
}
