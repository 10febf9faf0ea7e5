import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeBounds, rangeCondition } from '../builder';
import { keptEach, memo } from './memo';
import { builtPathTest, type PageDays, pageDays, passingPaths, sessionPagesApply } from './pages';
import {
  rowFilterCondition,
  rowFiltersApply,
  rowPageviewsApply,
  UNSURE_ROW,
  unsureApply,
} from './row-filters';
import {
  EVENT_ORDER,
  inSpans,
  matchesFilters,
  matchingEvents,
  rangeEnded,
  rollupElement,
  rollupSize,
  SESSION_ATTRIBUTES,
  SESSION_MS,
} from './shared';

/** What `first_event` holds: the session attributes of SPEC 13 and the hostname. */
const FIRST_EVENT_ATTRIBUTES = [...SESSION_ATTRIBUTES, 'hostname'] as const;
type FirstEventAttribute = (typeof FIRST_EVENT_ATTRIBUTES)[number];

/**
 * One per-session value two ways: over the `session_facts` row of a session lying wholly inside
 * the range (`final`: read with FINAL, where tuple elements must be read whole, see 0005), and
 * over the session's events in range (grouped by session). Both give the same value for the same
 * session.
 */
interface SessionField {
  rollup: (final: boolean) => string;
  events: string;
}

const plain = (expression: string) => () => expression;

const attribute = (a: FirstEventAttribute): SessionField => ({
  rollup: rollupElement('first_event', a),
  events: `toString(argMin(${a}, ${EVENT_ORDER}))`,
});

/** The 64 bits of a visitor id (16 hex digits, SPEC 6) as a number: distinct exactly when the ids are. */
export const userKey = (id: string) => `reinterpretAsUInt64(reverse(unhex(${id})))`;

/** The visitor id of a `userKey` number (as text): its 16 hex digits, lowercase as ingest writes them. */
export const userIdOfKey = (key: string) => BigInt(key).toString(16).padStart(16, '0');

/** The `userKey` number of a visitor id (16 hex digits), as the engine computes it. */
export const keyOfUserId = (id: string) => BigInt(`0x${id}`);

export const SESSION_ROW_FIELDS = {
  user_id: { rollup: plain('user_id'), events: `argMin(user_id, ${EVENT_ORDER})` },
  user_key: { rollup: plain('user_key'), events: userKey(`argMin(user_id, ${EVENT_ORDER})`) },
  pageviews: { rollup: rollupSize('pageview_ids'), events: `countIf(type = 'pageview')` },
  events: { rollup: rollupSize('event_ids'), events: 'count()' },
  ms: {
    rollup: plain('toUnixTimestamp64Milli(session_end) - toUnixTimestamp64Milli(session_start)'),
    events: SESSION_MS,
  },
  start: { rollup: plain('session_start'), events: 'min(timestamp)' },
  end: { rollup: plain('session_end'), events: 'max(timestamp)' },
  entry_page: {
    rollup: rollupElement('entry', 'pathname'),
    events: `toString(argMinIf(pathname, ${EVENT_ORDER}, type = 'pageview'))`,
  },
  exit_page: {
    rollup: rollupElement('exit', 'pathname'),
    events: `toString(argMaxIf(pathname, ${EVENT_ORDER}, type = 'pageview'))`,
  },
  identified_user_id: {
    rollup: rollupElement('identified', 'identified_user_id'),
    events: `argMaxIf(identified_user_id, ${EVENT_ORDER}, identified_user_id != '')`,
  },
  /**
   * The session's latest identified id with its place in EVENT_ORDER, as one comparable tuple
   * (time, event id, id), so the greatest over several sessions is a visitor's latest; an epoch
   * sentinel with an empty id when it has none (as 0005 stores it).
   */
  identified: {
    rollup: plain('identified'),
    events: `max(if(identified_user_id != '', (timestamp, event_id, identified_user_id),
      (toDateTime64(0, 3, 'UTC'), toUUID('00000000-0000-0000-0000-000000000000'), '')))`,
  },
  ...(Object.fromEntries(FIRST_EVENT_ATTRIBUTES.map((a) => [a, attribute(a)])) as Record<
    FirstEventAttribute,
    SessionField
  >),
} satisfies Record<string, SessionField>;
export type SessionRowField = keyof typeof SESSION_ROW_FIELDS;

/**
 * The fields a build's row of `session_pages_by_country` holds (0016, 0026), as columns of it: a
 * read asking for these alone takes the built days' sessions from there (factRows).
 */
const BUILT_FIELDS: Partial<Record<SessionRowField, string>> = {
  user_key: 'user_key',
  pageviews: 'pageviews',
  ms: SESSION_ROW_FIELDS.ms.rollup(),
  start: 'session_start',
  end: 'session_end',
};

/**
 * Whether an answer may read the rollups whole (summaries, `session_paths`, every session): no
 * filters, which select sessions by their events (rollupSessionsApply: rows joined with them).
 */
export const rollupApplies = (ch: ClickHouse, common: CommonParams) =>
  ch.rollups !== false && common.filters.length === 0;

/**
 * Whether an answer may read its sessions through rollupSessionRows, filters or not: with
 * filters it joins the counted sessions found from the matching events.
 */
export const rollupSessionsApply = (ch: ClickHouse) => ch.rollups !== false;

/**
 * The counted sessions of a filtered range (SPEC 13: a session counts when one of its events in
 * range matches every filter), one row each with `m_pageviews`, its pageviews that match, and
 * `columns`, more aggregates over its matching events: one pass over the matching events (`extra`
 * narrowing them), grouped by session.
 */
export function matchedSessions(
  p: Params,
  siteId: number,
  common: CommonParams,
  extra: string | undefined,
  columns: string[],
  table: 'events' | 'events_by_name' = 'events',
): string {
  return `SELECT session_id, ${["countIf(type = 'pageview') AS m_pageviews", ...columns].join(', ')} FROM ${table}
  WHERE ${matchingEvents(p, siteId, common)}${extra ? ` AND ${extra}` : ''}
  GROUP BY session_id`;
}

/**
 * The per-session rollups partitioned by the UTC day a session began (and read through
 * `readRollup`); `sessions` serves the goal list. `visitor_hours` (one row per visitor and UTC
 * day, partitioned by that day) is read the same way.
 */
export type SessionRollup = 'session_facts' | 'session_paths' | 'sessions' | 'visitor_hours';

/**
 * The parts of a per-session rollup that are alone in their partition, by partition: such a part
 * has one row per session and is read without FINAL. Undefined on a cluster (parts are per
 * shard): every read merges there.
 */
export interface Settled {
  partitions: string[];
  parts: string[];
  /** The other partitions (several parts: still being written or merged) with their parts. */
  merging?: Map<string, string[]>;
  /** The engine's time zone, in which a partition key's days are taken (sessionPartitions). */
  zone?: string;
  /** The read needs these parts alone: no other partition is merged (settledRest). */
  alone?: boolean;
}

/** The settled partitions a read takes beside those it leaves out, and their parts (settledRest). */
export interface SettledRest {
  partitions: string[];
  parts: string[];
}

/**
 * The settled partitions of `settled` not among `leftOut` (partition ids, or YYYYMMDD days), with
 * their parts, when every partition in several parts is among `leftOut`: a read of the others
 * then takes these parts alone, and its answer holds while they last. Undefined otherwise, and
 * when the partitions in several parts are not known.
 */
export function settledRest(
  settled: Settled | undefined,
  leftOut: readonly (number | string)[],
): SettledRest | undefined {
  if (!settled?.merging) return undefined;
  const out = new Set(leftOut.map(String));
  for (const partition of settled.merging.keys()) if (!out.has(partition)) return undefined;
  const rest: SettledRest = { partitions: [], parts: [] };
  settled.partitions.forEach((partition, i) => {
    if (out.has(partition)) return;
    rest.partitions.push(partition);
    rest.parts.push(settled.parts[i]!);
  });
  return rest;
}

/** The settled parts of a rollup now (not on a cluster: parts are per shard there). */
export async function settledParts(ch: ClickHouse, table: SessionRollup): Promise<Settled> {
  // Grouped here: the engine's GROUP BY over `system.parts` doubled the lookup (10 against 5 ms).
  const active = await ch.query<{ partition: string; part: string; zone: string }>(
    `SELECT partition_id AS partition, name AS part, timezone() AS zone FROM system.parts
     WHERE database = currentDatabase() AND table = {table:String} AND active`,
    { table },
  );
  const counts = new Map<string, number>();
  for (const r of active) counts.set(r.partition, (counts.get(r.partition) ?? 0) + 1);
  const alone = active.filter((r) => counts.get(r.partition) === 1);
  const merging = new Map<string, string[]>();
  for (const r of active)
    if (counts.get(r.partition)! > 1) merging.set(r.partition, [...(merging.get(r.partition) ?? []), r.part]);
  return {
    partitions: alone.map((r) => r.partition),
    parts: alone.map((r) => r.part),
    merging,
    ...(active[0] ? { zone: active[0].zone } : {}),
  };
}

/**
 * Runs `read` against a snapshot of the settled parts. A settled part merged away (with a late
 * row of its partition) before the read took its own snapshot would be missed: when any of them
 * is no longer active afterwards, the read runs again with FINAL everywhere.
 */
export async function readRollup<T>(
  ch: ClickHouse,
  read: (settled?: Settled) => Promise<T>,
  table: SessionRollup = 'session_facts',
): Promise<T> {
  if (ch.cluster) return read();
  const settled = await settledParts(ch, table);
  const result = await read(settled);
  // A settled part that gained a sibling meanwhile was still read whole and once (the sibling's
  // rows arrived after the read began); one merged away may have been missed.
  const [kept] = await ch.query<{ n: number }>(
    `SELECT count() AS n FROM system.parts
     WHERE database = currentDatabase() AND table = {table:String} AND active
       AND name IN {parts:Array(String)}`,
    { table, parts: settled.parts },
  );
  return kept?.n === settled.parts.length ? result : read();
}

/**
 * Rows of a per-session rollup matching `where`, each session once: the settled parts as they
 * are, the other partitions merged (FINAL). `select(final)` gives the columns for either.
 * `prewhere`, a cheap condition that drops most rows, is read first where the parts are settled
 * (under FINAL it must wait for the merge: a session's rows are only whole once merged).
 */
export function fromRollup(
  p: Params,
  where: string | ((final: boolean) => string),
  select: (final: boolean) => string,
  settled?: Settled,
  table: SessionRollup = 'session_facts',
  prewhere?: string,
  merging?: string,
): string {
  const condition = typeof where === 'string' ? () => where : where;
  const merged = [condition(true), prewhere, merging].filter(Boolean).join(' AND ');
  if (!settled) return `SELECT ${select(true)} FROM ${table} FINAL WHERE ${merged}`;
  if (settled.alone)
    return `SELECT ${select(false)} FROM ${table}${prewhere ? ` PREWHERE ${prewhere}` : ''}
     WHERE ${condition(false)} AND _part IN ${p.bind('Array(String)', settled.parts)}`;
  // No settled part to read (narrowed to some sessions' partitions, sessionPartitions): the
  // branch over them is left out rather than sent with an empty list (10 ms at 10 M events).
  if (settled.parts.length === 0)
    return `SELECT ${select(true)} FROM ${table} FINAL
     WHERE ${merged} AND _partition_id NOT IN ${p.bind('Array(String)', settled.partitions)}`;
  return `SELECT ${select(false)} FROM ${table}${prewhere ? ` PREWHERE ${prewhere}` : ''}
     WHERE ${condition(false)} AND _part IN ${p.bind('Array(String)', settled.parts)}
   UNION ALL
   SELECT ${select(true)} FROM ${table} FINAL
     WHERE ${merged} AND _partition_id NOT IN ${p.bind('Array(String)', settled.partitions)}`;
}

/**
 * For a read of a range's sessions from `session_facts` (inside it, crossing it, unsure), a
 * condition on the partitions it merges (FINAL, the costly part: every row of them merged before
 * any is tested) that leaves out those holding no session of the site that overlaps the range,
 * tested on their rows' exact least start and greatest end (the least and greatest over a
 * partition's unmerged rows are those of its merged sessions). The partitions still merging are
 * the recent ones, being written: a range that ended before now, as a comparison's previous one,
 * lies wholly before them. Undefined for any other range, where the lookup would find nothing to
 * leave out (it is exact for any range: the test of the range's end only spares it), and with no
 * settled parts known (a cluster: no partition is left out there).
 */
function overlappingPartitions(
  p: Params,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
): string | undefined {
  if (!settled || !rangeEnded(common)) return undefined;
  const { from, to } = rangeBounds(p, common);
  const overlaps = [`min(session_start) < ${to}`, ...(from ? [`max(session_end) >= ${from}`] : [])];
  return `_partition_id IN (SELECT _partition_id FROM session_facts
       WHERE site_id = ${p.bind('UInt32', siteId)} AND _partition_id NOT IN ${p.bind('Array(String)', settled.partitions)}
       GROUP BY _partition_id HAVING ${overlaps.join(' AND ')})`;
}

/**
 * The counted sessions of an unfiltered range, one row each: `session_id` and `s_<field>` for
 * every field asked for, each over the session's events in range (SPEC 13). Sessions lying wholly
 * inside the range are read from `session_facts` (all their events are in the range); those
 * crossing a boundary are found there first and computed from their events in range, read only up
 * to the last end among those that began before the range and from the first start among those
 * that end after it. With filters, only the counted sessions (those with an event in range that
 * matches every filter). Where the filters can be tested on the session rows and no `matched`
 * column is asked for (row-filters.ts), the rows are tested so, and the sessions whose rows cannot
 * tell (`Edges.unsure`) are computed from their events as the crossing ones are, those and the
 * crossing ones kept when one of their events in range matches every filter. Otherwise the rows
 * are joined with the matching events grouped by session, each row with `m_pageviews` (its
 * matching pageviews) too: at 10 M events a filtered overview took half the time of grouping
 * every event of the range by session (docs/benchmarks.md).
 * Returns the SELECT, with its values bound in `p`. With `only`, just those
 * of the sessions or visitors listed; `restrict`, a condition on rollup rows, narrows the
 * sessions read (summarized partitions left out, or a window). `edges`, the range's crossing
 * (and unsure) sessions found before (`crossingSessions`), saves finding them again: they are
 * narrowed to `only` but not to `restrict`, so a caller passes them only where the sessions it
 * restricts out cannot change its answer. `matching`, a condition on events, narrows the
 * matching events looked at (filtered only): sessions whose matching events all fail it are left
 * out, so a caller passes it only where those cannot change its answer; `matchedFrom`
 * `events_by_name` reads them there, where `matching` keeps custom events or outbound clicks
 * only (a fifth of the rows, sorted by type first). `matched`: more
 * columns of each counted session, aggregates over its matching events. `matchedPageviews`
 * (only where `rowPageviewsApply`): each row with `m_pageviews`, its matching pageviews, the
 * column the join gives otherwise. Call within readRollup(), which gives `settled`.
 */
export async function rollupSessionRows(
  ch: ClickHouse,
  p: Params,
  siteId: number,
  common: CommonParams,
  fields: SessionRowField[],
  settled: Settled | undefined,
  {
    only,
    restrict,
    edges: found,
    matching,
    matchedFrom,
    matched = [],
    matchedPageviews = false,
    endingFrom,
  }: {
    only?: Only;
    restrict?: (p: Params) => string;
    edges?: Edges;
    matching?: (p: Params) => string;
    matchedFrom?: 'events_by_name';
    matched?: string[];
    matchedPageviews?: boolean;
    /**
     * With a `restrict` that holds no session ending before this instant (epoch milliseconds):
     * the settled parts whose sessions all end before it are not read (endedBefore), nor the
     * crossing sessions when all of theirs in range do.
     */
    endingFrom?: number;
  } = {},
): Promise<string> {
  // Filters tested on the rows (row-filters.ts): no matching events to join, but the sessions
  // inside the range whose rows cannot tell are computed from their events, as crossing ones are.
  const byRow = matched.length === 0 && rowFiltersApply(ch, common);
  const withUnsure = byRow && unsureApply(ch, common);
  if (matchedPageviews && !(byRow && rowPageviewsApply(ch, common))) {
    throw new Error('matchedPageviews needs filters tested on the rows that name no path');
  }
  const edges = found
    ? narrowEdges(found, only)
    : await crossingSessions(ch, siteId, common, settled, only, restrict, withUnsure);
  const unsure = withUnsure
    ? (edges.unsure ?? (await unsureSessions(ch, siteId, common, settled, only, restrict)))
    : undefined;
  // The row's columns, each field's from `column`.
  const columns = (column: (f: SessionRowField) => string) =>
    [
      'session_id',
      ...fields.map((f) => `${column(f)} AS s_${f}`),
      ...(matchedPageviews ? [`${column('pageviews')} AS m_pageviews`] : []),
    ].join(', ');
  const select = (final: boolean) => columns((f) => SESSION_ROW_FIELDS[f].rollup(final));
  // Sessions ending before `endingFrom` are not read: nor the crossing ones, when every one of
  // them crosses the range's start and their events in range end before it.
  const endedEdges =
    endingFrom !== undefined &&
    edges.from === null &&
    edges.until !== null &&
    Date.parse(`${edges.until.replace(' ', 'T')}Z`) < endingFrom;
  const computed = computedSessions(endedEdges ? { ...edges, ids: [], users: [] } : edges, unsure);
  // Filters tested on the rows, of every session of the range (not some listed or restricted),
  // and fields a build holds: the built days' sessions from their builds.
  // Their rows' paths are tested by their bits against the passing paths, read meanwhile.
  const [days, passing] =
    byRow && !only && !restrict && settled && fields.every((f) => BUILT_FIELDS[f] !== undefined)
      ? await Promise.all([builtDays(ch, siteId, common, settled), passingPaths(ch, siteId, common)])
      : [undefined, undefined];
  const built = days && { days, passing, select: columns((f) => BUILT_FIELDS[f]!) };
  const rolled =
    byVisitorRows(p, siteId, common, fields, only, restrict, byRow, columns) ??
    factRows(p, siteId, common, select, settled, {
      only,
      restrict,
      byRow,
      unsure,
      built,
      ended: settled && endingFrom !== undefined ? await endedBefore(ch, settled, endingFrom) : undefined,
    });
  const rows =
    computed.ids.length === 0
      ? rolled
      : crossingRows(p, siteId, common, fields, computed, rolled, byRow, matchedPageviews);
  if (common.filters.length === 0 || byRow) return rows;
  return `SELECT * FROM (${rows}) AS s
  INNER JOIN (${matchedSessions(p, siteId, common, matching?.(p), matched, matchedFrom)}) AS m USING session_id`;
}

/**
 * The days of a range that a filtered read of its sessions takes from their builds (pageDays:
 * those built of their current parts whose sessions all lie in the range, seven of the settled
 * ones without a build built first), where the builds can test its filters (sessionPagesApply).
 * A build's rows are sorted by country within it (0025): with the bench's country filter the
 * filtered day buckets' statement took 105-113 ms against 175-178 from `session_facts` at 10 M
 * events (docs/benchmarks.md).
 */
async function builtDays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  settled: Settled,
): Promise<PageDays | undefined> {
  return sessionPagesApply(ch, common) ? pageDays(ch, siteId, common, settled, 'session_facts') : undefined;
}

/**
 * The rows of `session_facts` of the sessions lying inside the range (of `only`, narrowed by
 * `restrict`), with `byRow` those whose rows pass the filters, the unsure ones left out (computed
 * from their events). The sessions of `built` days (builtDays, `byRow` only) are read from their
 * builds instead, with `built.select` as their columns: a build holds every session of its day's
 * current `session_facts` part, each with that row's visitor, start, end, pageviews and the
 * columns the filters test; a path filter tests its rows' path bits against `built.passing`
 * (builtPathTest), or their paths as `session_facts` rows where that is null (too many).
 */
function factRows(
  p: Params,
  siteId: number,
  common: CommonParams,
  select: (final: boolean) => string,
  settled: Settled | undefined,
  {
    only,
    restrict,
    byRow,
    unsure,
    built,
    ended,
  }: {
    only?: Only;
    restrict?: (p: Params) => string;
    byRow: boolean;
    unsure: Unsure | undefined;
    built?: { days: PageDays; passing: bigint[] | null | undefined; select: string };
    /** Settled parts holding no session `restrict` lets through (endedBefore): not read. */
    ended?: Set<string>;
  },
): string {
  const inside = insideRange(p, siteId, common, only, restrict);
  const passes = byRow ? rowFilterCondition(p, 'session_facts', siteId, common) : undefined;
  // The unsure sessions are left to their events.
  const sure =
    unsure && unsure.ids.length > 0 ? ` AND session_id NOT IN ${p.bind('Array(UUID)', unsure.ids)}` : '';
  // The built days' settled parts are left out of the read of `session_facts`; the partitions
  // it merges stay those that are not settled.
  const builtPartitions = new Set(built?.days.partitions.map(String));
  // Some sessions by id: only their partitions are read (the newest sessions of a list all lie
  // in today's, still merging: the settled parts were looked up for none of them).
  const own = only && 'sessions' in only ? sessionPartitions(only.sessions, settled?.zone) : undefined;
  const kept = (partition: string, part: string) =>
    !builtPartitions.has(partition) && (!own || own.has(partition)) && !ended?.has(part);
  const facts = fromRollup(
    p,
    passes ? (final) => `${inside} AND ${passes(final)}${sure}` : inside,
    select,
    settled && (built || own || ended)
      ? {
          partitions: settled.partitions,
          parts: settled.parts.filter((part, i) => kept(settled.partitions[i]!, part)),
        }
      : settled,
    'session_facts',
    undefined,
    [
      overlappingPartitions(p, siteId, common, settled),
      own && `_partition_id IN ${p.bind('Array(String)', [...own])}`,
    ]
      .filter(Boolean)
      .join(' AND ') || undefined,
  );
  if (!built) return facts;
  const passesBuilt = rowFilterCondition(
    p,
    'session_pages_by_country',
    siteId,
    common,
    built.passing ? builtPathTest(p, built.days, built.passing) : undefined,
  )(false);
  // The builds by their ids alone: with their days' partitions named too, the engine read the
  // rows slower (the filtered day buckets' statement 150 against 104-110 ms at 10 M events).
  return `${facts}
   UNION ALL
   SELECT ${built.select} FROM session_pages_by_country
     WHERE ${inside} AND build_id IN ${p.bind('Array(UUID)', built.days.builds)} AND ${passesBuilt}${sure}`;
}

/**
 * The fields `sessions_by_visitor` (0020) holds, each as an aggregate over a session's rows there
 * (a row per insert until merged), as `session_facts` holds them merged.
 */
const VISITOR_SESSION_FIELDS: Partial<Record<SessionRowField, string>> = {
  user_key: 'user_key',
  start: 'min(session_start)',
  end: 'max(session_end)',
  pageviews: 'length(groupUniqArrayArray(pageview_ids))',
  events: 'length(groupUniqArrayArray(event_ids))',
  ms: 'toUnixTimestamp64Milli(max(session_end)) - toUnixTimestamp64Milli(min(session_start))',
  identified: 'max(identified)',
};

/**
 * A few visitors' sessions lying inside the range, read by key from `sessions_by_visitor` (0020),
 * where `session_facts` has them in most granules (every column then read whole: the 25 latest
 * visitors of the 10 M-event bench have about 3,000 sessions): when `only` lists visitors, the
 * fields are all there, and no `restrict` or filters tested on the rows ask for other columns.
 * `columns` gives the row's columns from each field's expression. Undefined otherwise.
 */
function byVisitorRows(
  p: Params,
  siteId: number,
  common: CommonParams,
  fields: SessionRowField[],
  only: Only | undefined,
  restrict: ((p: Params) => string) | undefined,
  byRow: boolean,
  columns: (column: (f: SessionRowField) => string) => string,
): string | undefined {
  if (!only || !('users' in only) || restrict || byRow || !fields.every((f) => VISITOR_SESSION_FIELDS[f]))
    return undefined;
  // The visitors' keys first: a sorting key column, so only their granules are read. Their rows
  // are grouped by session rather than merged with FINAL: the same rows, for the 25 latest
  // visitors at 10 M events with 5-10 % less CPU (docs/benchmarks.md). The range is tested on
  // the merged times, as FINAL tests it after the merge.
  const { from, to } = rangeBounds(p, common);
  const inside = [
    ...(from ? [`min(session_start) >= ${from}`] : []),
    ...(to ? [`max(session_end) < ${to}`] : []),
  ];
  return `SELECT ${columns((f) => VISITOR_SESSION_FIELDS[f]!)} FROM sessions_by_visitor
  PREWHERE ${onlyCondition(p, only)} WHERE site_id = ${p.bind('UInt32', siteId)}
  GROUP BY user_key, session_id${inside.length > 0 ? ` HAVING ${inside.join(' AND ')}` : ''}`;
}

/** Sessions lying wholly inside the range (of `only`, narrowed by `restrict`), as a condition on rollup rows. */
export function insideRange(
  p: Params,
  siteId: number,
  common: CommonParams,
  only?: Only,
  restrict?: (p: Params) => string,
) {
  const { from, to } = rangeBounds(p, common);
  const inside = [`site_id = ${p.bind('UInt32', siteId)}`];
  if (from) inside.push(`session_start >= ${from}`);
  if (to) inside.push(`session_end < ${to}`);
  if (only) inside.push(onlyCondition(p, only));
  if (restrict) inside.push(restrict(p));
  return inside.join(' AND ');
}

/** Sessions computed from their events: ids, and the windows of time their events in range lie in. */
interface Computed {
  ids: string[];
  /** Conditions on `timestamp`, any of which holds for each of their events in range. */
  near: (p: Params) => string[];
}

/** The crossing sessions' events in range lie before the last end or after the first start among them. */
const edgeWindows = (edges: Edges) => (p: Params) =>
  [
    edges.until !== null && `timestamp <= ${p.bind("DateTime64(3, 'UTC')", edges.until)}`,
    edges.from !== null && `timestamp >= ${p.bind("DateTime64(3, 'UTC')", edges.from)}`,
  ].filter((c): c is string => typeof c === 'string');

/** The crossing sessions, and the unsure ones where filters are tested on the rows. */
function computedSessions(edges: Edges, unsure: Unsure | undefined): Computed {
  if (!unsure || unsure.ids.length === 0) return { ids: edges.ids, near: edgeWindows(edges) };
  return {
    ids: [...edges.ids, ...unsure.ids].sort(),
    near: (p) => [...edgeWindows(edges)(p), inSpans(p, [[unsure.from, unsure.until]])],
  };
}

/**
 * `rolled` and the rows of sessions computed from their events in range (crossing sessions,
 * and with `byRow` the unsure ones), those with `byRow` kept when one of their events in range
 * matches every filter; with `matchedPageviews`, each with `m_pageviews`, its pageviews in range
 * that match every filter.
 */
function crossingRows(
  p: Params,
  siteId: number,
  common: CommonParams,
  fields: SessionRowField[],
  sessions: Computed,
  rolled: string,
  byRow: boolean,
  matchedPageviews: boolean,
): string {
  const near = sessions.near(p);
  // One condition, its values bound once, for both uses (an entry or exit page filter's set of
  // sessions is then one subquery).
  const matches = byRow || matchedPageviews ? matchesFilters(p, siteId, common) : '';
  const computed = [
    'session_id',
    ...fields.map((f) => `${SESSION_ROW_FIELDS[f].events} AS s_${f}`),
    ...(matchedPageviews ? [`countIf(type = 'pageview' AND ${matches}) AS m_pageviews`] : []),
  ].join(', ');
  return `${rolled}
  UNION ALL
  SELECT ${computed} FROM events
  WHERE ${rangeCondition(p, siteId, common)} AND session_id IN ${p.bind('Array(UUID)', sessions.ids)}
    AND (${near.join(' OR ')})
  GROUP BY session_id${byRow ? `\n  HAVING max(${matches})` : ''}`;
}

/**
 * Sessions inside the range whose rows cannot answer row filters (sorted by id, as Edges), their
 * visitors, and their first start and last end.
 */
interface Unsure {
  ids: string[];
  /** Each session's visitor (`user_key`, as text). */
  users: string[];
  from: string;
  until: string;
}

/** The range's sessions (of `only`, narrowed by `restrict`) lying inside it whose rows are unsure. */
async function unsureSessions(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
  only?: Only,
  restrict?: (p: Params) => string,
): Promise<Unsure> {
  const p = new Params();
  const [row] = await ch.query<{ ids: string[]; users: string[]; first: string | null; last: string | null }>(
    `SELECT groupArray(session_id) AS ids, groupArray(toString(user_key)) AS users,
       toString(minOrNull(session_start)) AS first, toString(maxOrNull(session_end)) AS last
     FROM (${sessionSpans(p, siteId, common, settled, `${insideRange(p, siteId, common, only, restrict)} AND ${UNSURE_ROW}`)})`,
    p.values,
  );
  return {
    ...sortedById(row?.ids ?? [], row?.users ?? []),
    from: row?.first ?? '',
    until: row?.last ?? '',
  };
}

/**
 * The ids, times and visitors of the range's sessions in `session_facts` that match `where`, the
 * unsettled partitions the range cannot reach left out (overlappingPartitions).
 */
const sessionSpans = (
  p: Params,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
  where: string,
) =>
  fromRollup(
    p,
    where,
    () => 'session_id, session_start, session_end, user_key',
    settled,
    'session_facts',
    undefined,
    overlappingPartitions(p, siteId, common, settled),
  );

/** A version 7 UUID's text (RFC 9562: version 7, variant 10). */
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** Ids whose time lies in these years only: their days are computed here as the engine does. */
const ID_YEARS = [2000, 2100];

/** The engine's time zones whose days are UTC days. */
const UTC_ZONES = new Set(['UTC', 'Etc/UTC']);

/**
 * The `session_facts` partitions (0005: `toYYYYMMDD(UUIDv7ToDateTime(session_id))`, the day of
 * the id's first 48 bits, milliseconds since the epoch, in the engine's time zone `zone`) holding
 * the sessions of `ids`. Undefined unless that zone is UTC and every id is a version 7 one with a
 * time in ID_YEARS: the engine's days are not computed here then, and every partition is read.
 */
export function sessionPartitions(ids: readonly string[], zone: string | undefined): Set<string> | undefined {
  if (zone === undefined || !UTC_ZONES.has(zone)) return undefined;
  const days = new Set<string>();
  for (const id of ids) {
    if (!UUID_V7.test(id)) return undefined;
    const at = new Date(Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16));
    const year = at.getUTCFullYear();
    if (year < ID_YEARS[0]! || year >= ID_YEARS[1]!) return undefined;
    days.add(at.toISOString().slice(0, 10).replaceAll('-', ''));
  }
  return days;
}

/** Some sessions only: by id, or those of some visitors (anonymous ids: 16 hex digits, SPEC 6). */
export type Only = { sessions: string[] } | { users: string[] };

/**
 * A condition on the rows of a per-session rollup (sorted by the site, the time inside the id,
 * then the id): the sessions of `ids`, a bound `Array(UUID)`. They are looked up by the sorting
 * key's time of their ids as well, as the engine computes it for each listed id (for any UUID, a
 * version 7 one or not: equal ids have equal times), so only the granules holding them are read,
 * and in a partition read with FINAL only those are merged: by id alone every granule was (the
 * unfiltered sessions list's page of the newest 25 at 10 M events, all in today's unsettled
 * partition, 209 against 60 ms of CPU, docs/benchmarks.md).
 */
export const rollupSessionsIn = (ids: string) =>
  `UUIDv7ToDateTime(session_id) IN (SELECT UUIDv7ToDateTime(arrayJoin(${ids}))) AND session_id IN ${ids}`;

/** A condition on rollup rows: the sessions or visitors of `only`. */
const onlyCondition = (p: Params, only: Only) =>
  'sessions' in only
    ? rollupSessionsIn(p.bind('Array(UUID)', only.sessions))
    : // The visitors' keys: eight bytes a row to test instead of their ids' text.
      `user_key IN ${p.bind('Array(UInt64)', only.users.map(keyOfUserId))}`;

export interface Edges {
  ids: string[];
  /** Each session's visitor (`user_key`, as text). */
  users: string[];
  /** The last end among the crossing sessions that began before the range. */
  until: string | null;
  /** The first start among the crossing sessions that end after it. */
  from: string | null;
  /**
   * With filters tested on the session rows (row-filters.ts): the sessions lying inside the
   * range whose rows cannot tell, to be tested on their events as the crossing ones are.
   */
  unsure?: Unsure;
}

/** Crossing sessions of `only` among `edges` (the bounds kept: still bounds of the fewer). */
function narrowEdges(edges: Edges, only: Only | undefined): Edges {
  if (!only) return edges;
  const [keep, keyOf] =
    'sessions' in only
      ? [new Set(only.sessions.map((id) => id.toLowerCase())), (i: number) => edges.ids[i]!.toLowerCase()]
      : [new Set(only.users.map((id) => keyOfUserId(id).toString())), (i: number) => edges.users[i]!];
  const kept = edges.ids.flatMap((_, i) => (keep.has(keyOf(i)) ? [i] : []));
  const narrowed = { ...edges, ids: kept.map((i) => edges.ids[i]!), users: kept.map((i) => edges.users[i]!) };
  if (!edges.unsure) return narrowed;
  const unsure = narrowEdges({ ...edges.unsure, until: null, from: null }, only);
  return { ...narrowed, unsure: { ...edges.unsure, ids: unsure.ids, users: unsure.users } };
}

/**
 * The sessions with events both inside and outside the range (none for an open range); with
 * `withUnsure` (for reads testing the filters on the session rows, `unsureApply`), the unsure
 * sessions too, side by side.
 */
export async function crossingSessions(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
  only?: Only,
  restrict?: (p: Params) => string,
  withUnsure = false,
): Promise<Edges> {
  const unsure = withUnsure ? unsureSessions(ch, siteId, common, settled, only, restrict) : undefined;
  unsure?.catch(() => {});
  const p = new Params();
  const { from, to } = rangeBounds(p, common);
  if (!from && !to) return { ids: [], users: [], until: null, from: null, unsure: await unsure };
  const crossing = [from && `session_start < ${from}`, to && `session_end >= ${to}`].filter(
    (c): c is string => Boolean(c),
  );
  const overlaps = [to && `session_start < ${to}`, from && `session_end >= ${from}`].filter(Boolean);
  const where = [
    `site_id = ${p.bind('UInt32', siteId)}`,
    ...overlaps,
    `(${crossing.join(' OR ')})`,
    ...(only ? [onlyCondition(p, only)] : []),
    ...(restrict ? [restrict(p)] : []),
  ].join(' AND ');
  const edgesOf = async (rows: string): Promise<CrossingRow> => {
    const [row] = await ch.query<CrossingRow>(
      `SELECT groupArray(session_id) AS ids, groupArray(toString(user_key)) AS users,
         ${from ? `toString(maxIfOrNull(session_end, session_start < ${from}))` : 'NULL'} AS edge_until,
         ${to ? `toString(minIfOrNull(session_start, session_end >= ${to}))` : 'NULL'} AS edge_from
       FROM (${rows})`,
      p.values,
    );
    return row ?? { ids: [], users: [], edge_until: null, edge_from: null };
  };
  const rows =
    !settled || only || restrict
      ? [await edgesOf(sessionSpans(p, siteId, common, settled, where))]
      : await Promise.all([
          // The settled parts' crossing sessions, kept by the parts' names; those of the other
          // partitions merged, of those that can hold one (mergingCrossing).
          keptCrossing.read(
            ch,
            JSON.stringify([siteId, common.startDate, common.endDate, common.timeZone, settled.parts]),
            () => edgesOf(sessionSpans(p, siteId, common, { ...settled, alone: true }, where)),
          ),
          mergingCrossing(ch, p, siteId, common, settled, where, crossing, edgesOf),
        ]);
  // The engine's text of a time (YYYY-MM-DD hh:mm:ss.sss) sorts as the time does.
  const known = (values: (string | null)[]) => values.filter((v): v is string => v !== null).sort();
  return {
    ...sortedById(
      rows.flatMap((r) => r.ids),
      rows.flatMap((r) => r.users),
    ),
    until: known(rows.map((r) => r.edge_until)).at(-1) ?? null,
    from: known(rows.map((r) => r.edge_from))[0] ?? null,
    unsure: await unsure,
  };
}

/** The latest session end (epoch milliseconds) of a settled part of `session_facts`, by its name. */
const keptEnds = memo<number>(4096);

/**
 * The settled parts whose sessions all end before `from` (epoch milliseconds), so that a read of
 * the sessions ending in the last hours skips the settled days; each part's latest end kept by
 * its name (a part never changes), those not yet kept read in one statement.
 */
async function endedBefore(ch: ClickHouse, settled: Settled, from: number): Promise<Set<string>> {
  const { values, missing, supply } = keptEach(
    keptEnds,
    ch,
    settled.parts,
    (part) => part,
    // A part merged away meanwhile has no row: never left out.
    (found: Map<string, number>, part) => found.get(part) ?? Number.POSITIVE_INFINITY,
    Number.isFinite,
  );
  if (missing.length > 0)
    supply(
      ch
        .query<{ part: string; end: number }>(
          `SELECT _part AS part, toUnixTimestamp64Milli(max(session_end)) AS end FROM session_facts
           WHERE _part IN {parts:Array(String)} GROUP BY part`,
          { parts: missing },
        )
        .then((rows) => new Map(rows.map((r) => [r.part, Number(r.end)]))),
    );
  const latest = await values;
  return new Set(settled.parts.filter((_, i) => latest[i]! < from));
}

/** Most sessions of the partitions still merging that crossingSessions looks up by id. */
const CANDIDATES = 5_000;

/**
 * The crossing sessions of the partitions in several parts (not `settled`), merged (FINAL): the
 * sessions with a row that any crossing one has (a session's start is its rows' least, its end
 * their greatest), found without merging through the rows' minmax indexes (0005), which leave
 * out the granules of today's sessions, so that only those are merged (none, mostly); for too
 * many of those, the partitions whose rows' least start and greatest end overlap the range and
 * pass one of its ends (exact, as overlappingPartitions). At 10 M events 9 against 14-17 ms of
 * CPU for the merged partitions' share of a range ending today.
 */
async function mergingCrossing(
  ch: ClickHouse,
  p: Params,
  siteId: number,
  common: CommonParams,
  settled: Settled,
  where: string,
  crossing: string[],
  edgesOf: (rows: string) => Promise<CrossingRow>,
): Promise<CrossingRow> {
  const { from, to } = rangeBounds(p, common);
  const notSettled = `_partition_id NOT IN ${p.bind('Array(String)', settled.partitions)}`;
  const unsettled = `site_id = ${p.bind('UInt32', siteId)} AND ${notSettled}`;
  const merged = (condition: string) =>
    edgesOf(
      fromRollup(
        p,
        `${where} AND ${notSettled}`,
        () => 'session_id, session_start, session_end, user_key',
        undefined,
        'session_facts',
        undefined,
        condition,
      ),
    );
  // A row of each: one starting before the range's end (any session overlapping an ended range
  // has one), or one starting before the range or ending after it (any crossing session has
  // one). One select a condition: each tests one column's index.
  const rowConditions = rangeEnded(common) ? [`session_start < ${to}`] : crossing;
  const [row] = await ch.query<{ ids: string[] }>(
    `SELECT groupUniqArray(${p.bind('UInt32', CANDIDATES + 1)})(session_id) AS ids FROM (
       ${rowConditions.map((c) => `SELECT session_id FROM session_facts WHERE ${unsettled} AND ${c}`).join(' UNION ALL ')})`,
    p.values,
  );
  const ids = row?.ids ?? [];
  if (ids.length === 0) return { ids: [], users: [], edge_until: null, edge_from: null };
  if (ids.length <= CANDIDATES) return merged(rollupSessionsIn(p.bind('Array(UUID)', ids)));
  return merged(`_partition_id IN (SELECT _partition_id FROM session_facts WHERE ${unsettled}
     GROUP BY _partition_id
     HAVING ${[
       to && `min(session_start) < ${to}`,
       from && `max(session_end) >= ${from}`,
       `(${[from && `min(session_start) < ${from}`, to && `max(session_end) >= ${to}`].filter(Boolean).join(' OR ')})`,
     ]
       .filter(Boolean)
       .join(' AND ')})`);
}

/** A crossingSessions read: the sessions, their visitors, and the two bounds. */
interface CrossingRow {
  ids: string[];
  users: string[];
  edge_until: string | null;
  edge_from: string | null;
}

/**
 * The crossing sessions of a site's range in its settled parts, by the parts' names: a few
 * thousand ids at 100 M events, so few ranges are kept.
 */
const keptCrossing = memo<CrossingRow>(32);

/**
 * Session ids with their visitors, sorted by id: the lists become the bound values of later
 * reads, and the same values each time let the engine reuse what it learnt of those conditions
 * (its query condition cache: which granules hold no row), where a list in another order reads
 * as a new condition.
 */
function sortedById(ids: string[], users: string[]): { ids: string[]; users: string[] } {
  const order = ids
    .map((id, i) => [id, users[i]!] as const)
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return { ids: order.map(([id]) => id), users: order.map(([, user]) => user) };
}
