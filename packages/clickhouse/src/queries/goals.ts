import { toIso } from '@trackhouse/core';
import type { ClickHouse } from '../client';
import { pageDays, sessionPageRows, sessionPagesApply } from './analytics/pages';
import { readRollup } from './analytics/rollup';
import { hoursBeforeEnd, RECENT_HOURS } from './analytics/shared';
import {
  emptyCounts,
  inPartitions,
  type KeyedCounts,
  settledPartsQuery,
  summarizedDays,
} from './analytics/summaries';
import { type CommonParams, EVENT_ORDER, nextDay, Params, rangeBounds, whereClause } from './builder';

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

/** Whether `text` parses as JSON to something other than a string (`2`, `true`, `null`, `{}`…). */
function isJsonOfNonString(text: string): boolean {
  try {
    return typeof JSON.parse(text) !== 'string';
  } catch {
    return false;
  }
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
    // this far) tells the number 2 from the string "2", which the map stores alike. A string
    // that is not the JSON text of another value (the map's form for non-strings) needs none.
    // A number is bound as its text: the embedded engine's binder refuses integers past 2^53.
    parts.push(
      typeof value === 'number'
        ? `props[${k}] != '' AND JSONType(properties, ${k}) IN ('Int64', 'UInt64', 'Double') AND JSONExtractFloat(properties, ${k}) = ${p.bind('Float64', String(value))}`
        : `props[${k}] = ${p.bind('String', value)}${isJsonOfNonString(value) ? ` AND JSONType(properties, ${k}) = 'String'` : ''}`,
    );
  }
  return `(${parts.join(' AND ')})`;
}

/** Custom events live in `events_by_name` too, ordered by name: event goals read only their rows. */
const goalTable = (goal: GoalDefinition) => (goal.goalType === 'event' ? 'events_by_name' : 'events');

/**
 * Distinct sessions with any event in range (after filters), and per goal those that converted.
 * Queries run at once: the sessions and path goals (from the per-session rollup without
 * filters, else one GROUP BY session over the range) and the event goals (one distinct count
 * each, over the custom events alone).
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
    const paths = pathGoals.map((i) => goals[i]!);
    const counts =
      common.filters.length === 0 && ch.rollups !== false
        ? await rollupSessionCounts(ch, siteId, common, paths)
        : ((await pagedSessionCounts(ch, siteId, common, paths)) ??
          (await scannedSessionCounts(ch, siteId, common, paths)));
    pathGoals.forEach((goal, j) => {
      conversions[goal] = counts.conversions[j]!;
    });
    return counts.sessions;
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

interface SessionCounts {
  sessions: number;
  /** Per path goal, in the order given. */
  conversions: number[];
}

/**
 * Sessions and path-goal conversions over the events themselves: one GROUP BY session over the
 * range, with a flag per goal (the pattern is tested once per distinct pathname). `extra`
 * narrows the rows (the rollup passes the sessions crossing a range boundary).
 */
async function scannedSessionCounts(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  goals: GoalDefinition[],
  extra: (p: Params) => string[] = () => [],
): Promise<SessionCounts> {
  const p = new Params();
  const flags = goals.map((g, j) => `, max(${goalCondition(p, g)}) AS g${j}`).join('');
  const sums = goals.map((_, j) => `, sum(g${j}) AS c${j}`).join('');
  const [row] = await ch.query<Record<string, number>>(
    `SELECT count() AS sessions${sums}
     FROM (SELECT session_id${flags} FROM events WHERE ${whereClause(p, siteId, common, extra(p))} GROUP BY session_id)`,
    p.values,
  );
  return { sessions: row?.sessions ?? 0, conversions: goals.map((_, j) => row?.[`c${j}`] ?? 0) };
}

/**
 * Filtered sessions and path-goal conversions with the settled days' sessions from their
 * `session_pages_by_country` rows where those apply (pages.ts): a sure row's session is counted
 * when the row passes the filters, and converts a path goal when one of its pageviews' paths
 * matches the goal and passes every path filter (its other attributes are those of all its
 * events), tested against the two sets' intersection. The range's other sessions are counted
 * from their events meanwhile. A `GROUP BY session_id` over every matching event cost the answer
 * most of its time (docs/benchmarks.md). Undefined where the rows do not apply (the events are
 * then grouped).
 */
async function pagedSessionCounts(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  goals: GoalDefinition[],
): Promise<SessionCounts | undefined> {
  if (!sessionPagesApply(ch, common)) return undefined;
  // The goals' paths are found while the days to read are.
  const found = matchingPageHashes(ch, siteId, goals);
  found.catch(() => {});
  return readRollup(
    ch,
    async (settled) => {
      const days = await pageDays(ch, siteId, common, settled, 'session_paths');
      if (!days) return undefined;
      const [rows, pageSets] = await Promise.all([sessionPageRows(ch, siteId, common, days), found]);
      if (!rows || pageSets.some((set) => set.length > ROLLUP_MAX_GOAL_PAGES)) return undefined;
      const p = new Params();
      const passing = rows.passing && new Set(rows.passing);
      // The 48 bits of the rows' path hashes (pathHash) from the goals' full ones, those a path
      // filter passes alone.
      const sets = pageSets.map((set) =>
        [...new Set(set.map((h) => Number(h >> 16n)))].filter((h) => !passing || passing.has(h)),
      );
      const bits = goalBits(p, sets, 'page_hashes');
      const [[row], other] = await Promise.all([
        ch.query<Record<string, number>>(
          `SELECT count() AS sessions${sets.map((_, j) => `, countIf(${bits.converts(j)}) AS c${j}`).join('')}
           FROM (SELECT ${['1 AS one', ...bits.masks].join(', ')} FROM session_pages_by_country WHERE ${rows.counted(p)})`,
          p.values,
        ),
        scannedSessionCounts(ch, siteId, common, goals, (q) => [rows.matching(q)]),
      ]);
      return {
        sessions: Number(row?.sessions ?? 0) + other.sessions,
        conversions: other.conversions.map((c, j) => c + Number(row?.[`c${j}`] ?? 0)),
      };
    },
    'session_paths',
  );
}

/**
 * Which path goals a row's hashes (`array`) convert, each goal a set of hashes: per 64 goals, one
 * mask of a row's goals found in one pass over the array (`masks`, column `m<n>` for the nth 64),
 * where a test per goal goes over it once each (the filtered goal list's rows at 10 M events:
 * with eight goals 362 against 466 ms of CPU, with the bench's two the same, docs/benchmarks.md);
 * `converts(j)`, the test of goal j on them.
 */
function goalBits(
  p: Params,
  sets: number[][],
  array: string,
): { masks: string[]; converts: (j: number) => string } {
  const masks: string[] = [];
  for (let chunk = 0; chunk * 64 < sets.length; chunk++) {
    const bitsOf = new Map<number, bigint>();
    sets.slice(chunk * 64, chunk * 64 + 64).forEach((set, k) => {
      for (const h of set) bitsOf.set(h, (bitsOf.get(h) ?? 0n) | (1n << BigInt(k)));
    });
    // A chunk without a hash has no mask: none of its goals converts (`converts` says 0).
    if (bitsOf.size === 0) continue;
    const keys = p.bind('Array(UInt64)', [...bitsOf.keys()]);
    const values = p.bind('Array(UInt64)', [...bitsOf.values()]);
    masks.push(
      `arrayReduce('groupBitOr', arrayMap(h -> transform(h, ${keys}, ${values}, toUInt64(0)), ${array})) AS m${chunk}`,
    );
  }
  return {
    masks,
    converts: (j) => (sets[j]!.length > 0 ? `bitTest(m${Math.floor(j / 64)}, ${j % 64})` : '0'),
  };
}

/** Matching paths up to which a path goal is looked up in the rollup (else the events are scanned). */
export const ROLLUP_MAX_GOAL_PAGES = 10_000;
/** Up to this many matching paths a direct array test beats a hashed lookup (it is linear in them). */
const SMALL_PAGE_SET = 32;

/**
 * Sessions and path-goal conversions from the `sessions` rollup, for ranges without filters.
 * A session lying wholly inside the range has all its events in it: it is counted there, and
 * converts a path goal when one of its pageview paths matches. Patterns are matched against
 * the site's distinct paths first (`site_pages`, one regex per path), and the matching paths'
 * hashes looked up in each session's. The days whose sessions all lie in the range are read
 * from their summaries (summaries.ts: per day, its sessions and each pattern's conversions,
 * built by the first read that finds a settled day without them); the other days from their
 * sessions, where the few crossing a range boundary are listed and counted from their events
 * in range, read only up to the last end among those that began before the range and from the
 * first start among those that end after it.
 */
async function rollupSessionCounts(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  goals: GoalDefinition[],
): Promise<SessionCounts> {
  // The goals' paths are found while the rollup's settled parts are.
  const found = matchingPageHashes(ch, siteId, goals);
  found.catch(() => {});
  const patterns = goals.map((g) =>
    pathPatternRegex((g as Extract<GoalDefinition, { goalType: 'path' }>).config.pathPattern),
  );
  return readRollup(
    ch,
    async (settled) => {
      const pageSets = await found;
      if (pageSets.some((set) => set.length > ROLLUP_MAX_GOAL_PAGES)) {
        return scannedSessionCounts(ch, siteId, common, goals);
      }
      const days = await summarizedDays(
        ch,
        siteId,
        common,
        'goals',
        settled,
        (missing, parts) => dayCounts(ch, siteId, missing, parts, patterns, pageSets),
        { table: 'sessions', values: patterns },
      );
      const live = await liveSessionCounts(ch, siteId, common, goals, pageSets, days?.partitions);
      if (!days) return live;
      return {
        sessions: live.sessions + days.counts.all_sessions,
        conversions: live.conversions.map(
          (c, j) => c + (days.counts.byValue.get(patterns[j]!)?.n_sessions ?? 0),
        ),
      };
    },
    'sessions',
  );
}

/** Whether a `sessions` row has a page of `set` (hashes of paths). */
function converts(p: Params, set: bigint[]): string {
  if (set.length === 0) return '0';
  const hashes = p.bind('Array(UInt64)', set);
  return set.length <= SMALL_PAGE_SET
    ? `hasAny(page_hashes, ${hashes})`
    : `arrayExists(h -> transform(h, ${hashes}, arrayMap(x -> toUInt8(1), ${hashes}), toUInt8(0)) = 1, page_hashes)`;
}

/**
 * The summaries of settled days (partitions, YYYYMMDD): each day's sessions, and per pattern
 * the sessions that converted, a row for every pattern (zeros included: a day's summary is
 * whole for the patterns it holds).
 */
async function dayCounts(
  ch: ClickHouse,
  siteId: number,
  days: number[],
  parts: string[],
  patterns: string[],
  pageSets: bigint[][],
): Promise<Map<number, KeyedCounts>> {
  const p = new Params();
  const counts = pageSets.map((set, j) => `, countIf(${converts(p, set)}) AS c${j}`).join('');
  const rows = await ch.query<Record<string, number> & { day: string; sessions: number }>(
    settledPartsQuery(p, 'sessions', siteId, parts, `count() AS sessions${counts}`),
    p.values,
  );
  const byDay = new Map<number, KeyedCounts>();
  for (const day of days) {
    const r = rows.find((row) => Number(row.day) === day);
    const c: KeyedCounts = { ...emptyCounts(), all_sessions: Number(r?.sessions ?? 0) };
    patterns.forEach((v, j) => {
      if (!c.byValue.has(v)) c.byValue.set(v, { v, ...ZERO_COUNTS, n_sessions: Number(r?.[`c${j}`] ?? 0) });
    });
    byDay.set(day, c);
  }
  return byDay;
}

const ZERO_COUNTS = { n_sessions: 0, n_events: 0, bounces: 0, top_ms: 0, top_n: 0 };

/**
 * Sessions and path-goal conversions of the range read from the `sessions` rollup, outside the
 * partitions `skipped` (summarized days).
 */
async function liveSessionCounts(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  goals: GoalDefinition[],
  pageSets: bigint[][],
  skipped: number[] | undefined,
): Promise<SessionCounts> {
  const p = new Params();
  const site = p.bind('UInt32', siteId);
  const { from, to } = rangeBounds(p, common);
  const inside = [from && `session_start >= ${from}`, to && `session_end < ${to}`].filter(Boolean);
  const overlaps = [
    to && `session_start < ${to}`,
    from && `session_end >= ${from}`,
    skipped && inPartitions(p, skipped, true),
  ].filter(Boolean);
  const counts = pageSets.map((set, j) => `, countIf(inside AND ${converts(p, set)}) AS c${j}`).join('');
  const edges = [
    'groupArrayIf(session_id, NOT inside) AS edge_ids',
    from ? `toString(maxIfOrNull(session_end, session_start < ${from})) AS edge_until` : 'NULL AS edge_until',
    to ? `toString(minIfOrNull(session_start, session_end >= ${to})) AS edge_from` : 'NULL AS edge_from',
  ];
  const [row] = await ch.query<
    Record<string, number> & { edge_ids: string[]; edge_until: string | null; edge_from: string | null }
  >(
    `WITH ${inside.length > 0 ? inside.join(' AND ') : '1'} AS inside
     SELECT countIf(inside) AS sessions${counts}, ${edges.join(', ')}
     FROM sessions FINAL
     WHERE ${[`site_id = ${site}`, ...overlaps].join(' AND ')}`,
    p.values,
  );
  const result: SessionCounts = {
    sessions: row?.sessions ?? 0,
    conversions: goals.map((_, j) => row?.[`c${j}`] ?? 0),
  };
  if (!row || row.edge_ids.length === 0) return result;

  // The crossing sessions' events in range lie before the last of them to end (those that
  // began before the range) or after the first of them to begin (those that end after it).
  const edge = await scannedSessionCounts(ch, siteId, common, goals, (q) => {
    const near = [
      row.edge_until !== null && `timestamp <= ${q.bind("DateTime64(3, 'UTC')", row.edge_until)}`,
      row.edge_from !== null && `timestamp >= ${q.bind("DateTime64(3, 'UTC')", row.edge_from)}`,
    ].filter(Boolean);
    return [`session_id IN ${q.bind('Array(UUID)', row.edge_ids)}`, `(${near.join(' OR ')})`];
  });
  return {
    sessions: result.sessions + edge.sessions,
    conversions: result.conversions.map((c, j) => c + edge.conversions[j]!),
  };
}

/** Per path goal, the hashes of the site's pageview paths it matches (one more than the cap at most). */
async function matchingPageHashes(
  ch: ClickHouse,
  siteId: number,
  goals: GoalDefinition[],
): Promise<bigint[][]> {
  if (goals.length === 0) return [];
  const p = new Params();
  const sets = goals.map((g, j) => {
    const re = p.bind(
      'String',
      pathPatternRegex((g as Extract<GoalDefinition, { goalType: 'path' }>).config.pathPattern),
    );
    // As text: 64-bit integers come back as JSON numbers, which would lose digits.
    return `arrayMap(h -> toString(h), groupUniqArrayIf(${ROLLUP_MAX_GOAL_PAGES + 1})(cityHash64(pathname), match(pathname, ${re}))) AS pages${j}`;
  });
  const [row] = await ch.query<Record<string, string[]>>(
    `SELECT ${sets.join(', ')} FROM site_pages WHERE site_id = ${p.bind('UInt32', siteId)}`,
    p.values,
  );
  return goals.map((_, j) => (row?.[`pages${j}`] ?? []).map(BigInt));
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

/**
 * Sessions that converted the goal, newest end first (ties by id). Fields are over the
 * session's events in range. The page is found first, newest events first: the converted
 * sessions with an event in the last hours of the range (before its end, or now if sooner) are
 * exactly those ending there, so when they fill the page nothing older can rank on it; otherwise
 * the window widens (at last to the whole range). Full aggregates are then computed for the
 * page's sessions only.
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
  const windows = [...RECENT_HOURS.filter((h) => h < rangeHours), undefined];
  let ids: string[] = [];
  for (const hours of windows) {
    const p = new Params();
    const window = hours === undefined ? [] : [`timestamp >= ${hoursBeforeEnd(p, common, hours)}`];
    // The sessions that converted in the range, as a set, then their events in the window: their
    // last event there ranks them. The set is not matched against the events' session index
    // (a `SETTINGS` clause, which holds for this query only: a call's settings would stay on
    // its embedded connection): that lookup cost four times the read for a goal of a million
    // sessions. At 10 M events, with a 24-hour window: 27 against 86 ms for an event goal,
    // 185 against 207 ms for a path goal of 990k sessions (docs/benchmarks.md).
    const converted = `SELECT session_id FROM ${goalTable(goal)}
         WHERE ${whereClause(p, siteId, common, [goalCondition(p, goal)])}`;
    const ranked = await ch.query<{ s_session_id: string }>(
      `SELECT toString(session_id) AS s_session_id FROM (
         SELECT session_id, max(timestamp) AS s_end FROM events
         WHERE ${whereClause(p, siteId, common, [...window, `session_id IN (${converted})`])}
         GROUP BY session_id)
       ORDER BY s_end DESC, s_session_id
       LIMIT ${p.bind('UInt32', wanted)}
       SETTINGS use_index_for_in_with_subqueries = 0`,
      p.values,
    );
    ids = ranked.slice(page.offset).map((r) => r.s_session_id);
    if (ranked.length === wanted) break;
  }
  if (ids.length === 0) return [];

  const p = new Params();
  const order = EVENT_ORDER;
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
