import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeBounds } from '../builder';
import { fromRollup, type Settled } from './rollup';

/**
 * Reading `session_paths` (0006): each event of a session as one 128-bit key, milliseconds in
 * bits 127..80, the top 48 bits of the cityHash64 of its path (pageviews) or name (custom events)
 * in bits 79..32 (0 for the other types), a hash of its event id below.
 */

/** The 48-bit hash a key carries for a pathname or event name. */
export const pathHash = (expression: string) => `bitShiftRight(cityHash64(${expression}), 16)`;

/** The path or name hash of a key. */
export const keyHash = (key: string) => `toUInt64(bitAnd(bitShiftRight(${key}, 32), 281474976710655))`;

/** The milliseconds of a key. */
export const keyMs = (key: string) => `toUInt64(bitShiftRight(${key}, 80))`;

/**
 * The milliseconds of an event's key, from its event's columns, as 0006 computes them (`keyMs` of
 * its key). Within a session that is not tied (no two keys in range share a millisecond), they
 * tell which of the session's keys an event read from the events is.
 */
export const EVENT_KEY_MS = 'toUInt64(greatest(toUnixTimestamp64Milli(timestamp), 0))';

/**
 * The names of a site's page paths by their hash, as a (hashes, paths) pair named `alias` for a
 * WITH clause: keys carry hashes, answers name them back.
 */
export const pageNames = (p: Params, siteId: number, alias: string) =>
  `(SELECT (groupArray(h), groupArray(path)) FROM (${sitePaths(p, siteId)})) AS ${alias}`;

/** A site's page paths, each with its hash (`h`, `path`). */
const sitePaths = (p: Params, siteId: number) =>
  `SELECT DISTINCT ${pathHash('pathname')} AS h, pathname AS path
   FROM site_pages WHERE site_id = ${p.bind('UInt32', siteId)}`;

/** A site's page path by its hash (readPageNames). */
export type PageNames = (h: number | string) => string;

/**
 * The name of each of a site's page path hashes, read apart (for answers whose rows come back by
 * hash and are named here, with no scalar subquery for the engine to run and plan into their
 * statement); an unknown hash is named ''. A hash shared by two paths names the lesser of them
 * (`transform` over `pageNames` takes whichever it meets first).
 */
export async function readPageNames(ch: ClickHouse, siteId: number): Promise<PageNames> {
  const p = new Params();
  const rows = await ch.query<{ h: number | string; path: string }>(sitePaths(p, siteId), p.values);
  const names = new Map<number, string>();
  for (const r of rows) {
    const h = Number(r.h);
    const known = names.get(h);
    if (known === undefined || r.path < known) names.set(h, r.path);
  }
  // 48-bit hashes: exact as numbers, however the engine sends 64-bit integers.
  return (h) => names.get(Number(h)) ?? '';
}

/** A time as the least key of its millisecond. */
const keyAt = (time: string) => `bitShiftLeft(toUInt128(toUnixTimestamp64Milli(${time})), 80)`;

/** A condition on a key: its event lies in the range (SPEC 13: from its start, before its end). */
export function keyInRange(p: Params, common: CommonParams): (key: string) => string {
  const { from, to } = rangeBounds(p, common);
  const parts = (key: string) => [from && `${key} >= ${keyAt(from)}`, to && `${key} < ${keyAt(to)}`];
  return (key) => parts(key).filter(Boolean).join(' AND ') || '1';
}

/**
 * A condition on `session_paths` rows: the session lies wholly inside the range, so every key
 * of it is in range (`keyInRange` holds for each: a key's milliseconds lie between the session's
 * first and last event). Undefined for a range without bounds, where every key is in it.
 */
export function sessionInRange(p: Params, common: CommonParams): string | undefined {
  const { from, to } = rangeBounds(p, common);
  return (
    [from && `session_start >= ${from}`, to && `session_end < ${to}`].filter(Boolean).join(' AND ') ||
    undefined
  );
}

/**
 * The low bits of a key that a read may use for flags (a mask): they hold part of an event id's
 * hash, which tells apart only the keys of one millisecond, and a session with two of those
 * (tied) is computed from its events instead, its keys' order unused.
 */
const KEY_FLAG_MASK = 3;

/** A key with its flag bits set to `flag` (0 to KEY_FLAG_MASK). */
export const flaggedKey = (key: string, flag: string) =>
  `bitOr(bitAnd(${key}, bitNot(toUInt128(${KEY_FLAG_MASK}))), toUInt128(${flag}))`;

/** The flag bits of a key, as a UInt8. */
export const keyFlag = (key: string) => `toUInt8(bitAnd(${key}, ${KEY_FLAG_MASK}))`;

/**
 * Rows of `session_paths` for the sessions that may have events in the range (their first event
 * before its end, their last from its start), each session once. `select(final)` and `prewhere`
 * as fromRollup; `restrict`, a condition on the rows (summarized partitions left out). Call
 * within readRollup(…, 'session_paths').
 */
export function pathRows(
  p: Params,
  siteId: number,
  common: CommonParams,
  select: (final: boolean) => string,
  settled: Settled | undefined,
  prewhere?: string,
  restrict?: (p: Params) => string,
): string {
  const { from, to } = rangeBounds(p, common);
  const where = [
    `site_id = ${p.bind('UInt32', siteId)}`,
    ...(to ? [`session_start < ${to}`] : []),
    ...(from ? [`session_end >= ${from}`] : []),
    ...(restrict ? [restrict(p)] : []),
  ].join(' AND ');
  return fromRollup(p, where, select, settled, 'session_paths', prewhere);
}

/**
 * Most sessions a query lists by id: bound parameters travel in the URL of the server form,
 * which a ClickHouse server takes up to 1 MiB (about 40 bytes an id). Past it, answers compute
 * every session from its events instead.
 */
export const MAX_LISTED_SESSIONS = 10_000;

/**
 * Most sessions a query may list by id on `ch`: MAX_LISTED_SESSIONS on a server, ten times as
 * many on the embedded engine, which takes its parameters in-process (no URL). The page
 * breakdowns read from the events find the sessions past it by a subquery instead.
 */
export const listedSessionsLimit = (ch: ClickHouse) =>
  ch.maxListedSessions ?? (ch.kind === 'embedded' ? 10 * MAX_LISTED_SESSIONS : MAX_LISTED_SESSIONS);

/**
 * A session computed again from its events (its keys share a millisecond where order matters),
 * with the times of the events to read, as the engine writes them.
 */
export interface SessionSpan {
  id: string;
  from: string;
  to: string;
}

/** Milliseconds as the engine writes a DateTime64(3) in UTC ('YYYY-MM-DD hh:mm:ss.sss'). */
const engineTime = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');

/** Sessions for `sessionsWithin`, from (id, first, last milliseconds) as a query returns them. */
export const sessionsAt = (rows: [string, number | string, number | string][]): SessionSpan[] =>
  rows.map(([id, from, to]) => ({ id, from: engineTime(Number(from)), to: engineTime(Number(to)) }));

/** Byte order of UTF-8 texts, as the engine orders strings. */
export const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

/**
 * Conditions reading the events of a few sessions, each within the times given for it (so that
 * the table's sort key skips the rest of the range); more sessions are read by id within the
 * bounds of them all.
 */
export function sessionsWithin(p: Params, listed: SessionSpan[]): string {
  const time = (t: string) => p.bind("DateTime64(3, 'UTC')", t);
  if (listed.length === 0) return '0';
  // In the order of their ids: the same sessions make the same condition (rollup.ts
  // crossingSessions).
  const sessions = [...listed].sort((a, b) => byteOrder(a.id, b.id));
  if (sessions.length <= 32) {
    return `(${sessions
      .map(
        (s) =>
          `(session_id = ${p.bind('UUID', s.id)} AND timestamp >= ${time(s.from)} AND timestamp <= ${time(s.to)})`,
      )
      .join(' OR ')})`;
  }
  // Times as the engine writes them ('YYYY-MM-DD hh:mm:ss.sss') sort as text.
  const from = sessions.map((s) => s.from).sort()[0]!;
  const to = sessions
    .map((s) => s.to)
    .sort()
    .at(-1)!;
  return `(session_id IN ${p.bind(
    'Array(UUID)',
    sessions.map((s) => s.id),
  )} AND timestamp >= ${time(from)} AND timestamp <= ${time(to)})`;
}
