import { createHash } from 'node:crypto';
import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeBounds, rangeCondition } from '../builder';
import { type GoalDefinition, goalCondition, pathPatternRegex } from '../goals';
import {
  keyHash,
  keyInRange,
  keyMs,
  listedSessionsLimit,
  pathHash,
  pathRows,
  type SessionSpan,
  sessionsAt,
  sessionsWithin,
} from './paths';
import { readRollup, rollupApplies, rollupSessionsApply, type Settled, userKey } from './rollup';
import { SESSION_FIELDS, type SessionRow, type TrafficSession, toSession } from './sessions';
import { listed, listOrder, matchesFilters, rankedPage, ratio } from './shared';
import {
  addCounts,
  type DayCounts,
  emptyCounts,
  inPartitions,
  type KeyedCounts,
  nextTurn,
  PARTITION_DAY,
  ROWS_PER_TURN,
  type SummarizedDays,
  summarizedDays,
} from './summaries';

/** Most steps a funnel may have (each is a bit of a per-event mask). */
export const MAX_FUNNEL_STEPS = 10;

/**
 * A funnel step: a page (a goal's path pattern) or a custom event (a name, and optionally one
 * property as event goals have it). `name` labels the step in answers.
 */
export type FunnelStep =
  | { type: 'page'; value: string; name?: string }
  | {
      type: 'event';
      value: string;
      name?: string;
      eventPropertyKey?: string;
      eventPropertyValue?: string | number;
    };

export interface FunnelStepResult {
  step_number: number;
  step_name: string;
  visitors: number;
  sessions: number;
  conversion_rate: number;
  dropoff_rate: number;
}

/** A step as the goal it matches like. */
function stepGoal(step: FunnelStep): GoalDefinition {
  if (step.type === 'page') return { goalType: 'path', config: { pathPattern: step.value } };
  const { eventPropertyKey: key, eventPropertyValue: value } = step;
  return {
    goalType: 'event',
    config: {
      eventName: step.value,
      ...(key !== undefined && value !== undefined
        ? { eventPropertyKey: key, eventPropertyValue: value }
        : {}),
    },
  };
}

/** Per event, bit k set when it matches step k + 1. */
function stepMask(p: Params, steps: FunnelStep[]): string {
  return `toUInt16(${steps.map((s, k) => `(${goalCondition(p, stepGoal(s))}) * ${2 ** k}`).join(' + ')})`;
}

/**
 * How many steps of the funnel a session reached, over its events in order: walking them once,
 * an event advances the session when it matches the next step. Taking the earliest match of each
 * step is never worse than a later one, so this is the furthest step reachable with each step's
 * event strictly after the previous step's (an event counts for one step only).
 */
const REACHED_STEPS = 'arrayFold((acc, m) -> toUInt8(acc + bitTest(m, acc)), f_masks, toUInt8(0))';

/** A session's step masks of its matching events, in event order. */
const orderedMasks = (mask: string) =>
  `arrayMap(x -> x.3, arraySort(groupArrayIf((timestamp, event_id, ${mask}), ${mask} != 0)))`;

/**
 * One row per counted session (SPEC 13: filters select sessions) that matched step 1, with
 * `reach`, the steps it reached over its events in range. `allRows` keeps every event of the
 * range (for columns over the whole session); otherwise only the events matching a step or the
 * filters are read.
 */
function funnelSessions(
  p: Params,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
  columns: string[],
  allRows: boolean,
  extra: string[] = [],
): string {
  const mask = stepMask(p, steps);
  const filters = common.filters.length > 0 ? matchesFilters(p, siteId, common) : undefined;
  const rows = allRows ? '' : ` AND (${mask} != 0${filters ? ` OR ${filters}` : ''})`;
  // Sessions that never match step 1 reach nothing: dropped before the walk, its costly part.
  const having = [`max(bitTest(${mask}, 0))`, ...(filters ? [`max(${filters})`] : [])];
  return `SELECT *, ${REACHED_STEPS} AS reach FROM (
    SELECT ${[...columns, `${orderedMasks(mask)} AS f_masks`].join(', ')}
    FROM events
    WHERE ${[rangeCondition(p, siteId, common), ...extra].join(' AND ')}${rows}
    GROUP BY session_id
    HAVING ${having.join(' AND ')})`;
}

/**
 * One row per counted session that matched step 1, walked without event ids (reading them over a
 * whole range costs as much as the rest of the walk): `reach` over the events matching a later
 * step after the session's first step-1 event, in time order. `f_tied` marks a session where two
 * events matching a step share a millisecond: only there does the order of event ids decide
 * (elsewhere the first step-1 event is the only one at its time, so the walk starts strictly
 * after it), and such sessions are walked again exactly. `f_from` and `f_to` (milliseconds) bound
 * the rows read for the session.
 */
function walkedSessions(p: Params, siteId: number, common: CommonParams, steps: FunnelStep[]): string {
  const filters = common.filters.length > 0 ? matchesFilters(p, siteId, common) : undefined;
  const having = ['max(bitTest(f_m, 0))', ...(filters ? ['max(f_match)'] : [])];
  return `SELECT session_id, s_user, f_tied, f_from, f_to,
      arrayFold((acc, x) -> toUInt8(acc + bitTest(x.2, acc)), f_after, toUInt8(1)) AS reach
    FROM (
      SELECT session_id, ${userKey('any(user_id)')} AS s_user,
        minIf(timestamp, bitTest(f_m, 0)) AS f_first,
        arrayFilter(x -> x.1 > f_first, arraySort(groupArrayIf((timestamp, f_m), f_m >= 2))) AS f_after,
        groupArrayIf(toUnixTimestamp64Milli(timestamp), f_m != 0) AS f_times,
        length(arrayDistinct(f_times)) < length(f_times) AS f_tied,
        toUnixTimestamp64Milli(min(timestamp)) AS f_from, toUnixTimestamp64Milli(max(timestamp)) AS f_to
      FROM (
        SELECT session_id, user_id, timestamp, ${stepMask(p, steps)} AS f_m${filters ? `, ${filters} AS f_match` : ''}
        FROM events
        WHERE ${rangeCondition(p, siteId, common)} AND (f_m != 0${filters ? ' OR f_match' : ''}))
      GROUP BY session_id
      HAVING ${having.join(' AND ')})`;
}

/**
 * Whether a funnel can be walked over `session_paths` (0006): it holds pageviews by path and
 * custom events by name, not their properties.
 */
const walksPaths = (steps: FunnelStep[]) =>
  steps.every(
    (s) => s.type === 'page' || s.eventPropertyKey === undefined || s.eventPropertyValue === undefined,
  );

/**
 * `walkedSessions` over `session_paths`, for an unfiltered funnel: each session's keys of its
 * pageviews and custom events in range that match a step, as step masks (page steps through the
 * hashes of the site's matching paths, event steps through the hashes of their names), walked in
 * key order. Keys order as events do except within a millisecond: `f_tied` marks a session with
 * two such keys in one millisecond, which is walked again from its events.
 */
function pathWalked(
  p: Params,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
  settled: Settled | undefined,
  {
    extra = [],
    restrict,
    source,
  }: {
    /** More columns: expressions over the rows and their names. */
    extra?: [expression: string, alias: string][];
    /** A condition narrowing the range's rows (pathRows). */
    restrict?: (p: Params) => string;
    /** The rows to walk instead of the range's (given the columns to select). */
    source?: (columns: string) => string;
  } = {},
): string {
  const inRange = keyInRange(p, common);
  const pageBits = steps.flatMap((s, k) =>
    s.type === 'page' ? [`match(pathname, ${p.bind('String', pathPatternRegex(s.value))}) * ${2 ** k}`] : [],
  );
  const names = new Map<string, number>();
  steps.forEach((s, k) => {
    if (s.type === 'event') names.set(s.value, (names.get(s.value) ?? 0) | (2 ** k));
  });
  const pages =
    pageBits.length === 0
      ? `(CAST([], 'Array(UInt64)'), CAST([], 'Array(UInt16)'))`
      : `(SELECT (groupArray(h), groupArray(m)) FROM (
           SELECT ${pathHash('pathname')} AS h, groupBitOr(toUInt16(${pageBits.join(' + ')})) AS m
           FROM site_pages WHERE site_id = ${p.bind('UInt32', siteId)} GROUP BY h HAVING m != 0))`;
  const events = `(arrayMap(n -> ${pathHash('n')}, ${p.bind('Array(String)', [...names.keys()])}),
    CAST(${p.bind('Array(UInt16)', [...names.values()])}, 'Array(UInt16)'))`;
  const mask = (map: string) => `k -> transform(${keyHash('k')}, ${map}.1, ${map}.2, toUInt16(0))`;
  const columns = ['session_id', 'user_key AS s_user', 'page_keys', 'event_keys'];
  if (extra.length > 0) columns.push('session_start', 'session_end');
  const rows = source
    ? source(columns.join(', '))
    : pathRows(p, siteId, common, () => columns.join(', '), settled, undefined, restrict);
  const outer = ['session_id', 's_user', 'f_tied', 'f_from', 'f_to', 'reach'];
  return `WITH ${pages} AS f_pages, ${events} AS f_events
    SELECT ${[...outer, ...extra.map(([, alias]) => alias)].join(', ')} FROM (
      SELECT ${['session_id', 's_user', ...extra.map(([e, alias]) => `${e} AS ${alias}`)].join(', ')},
        arrayConcat(page_keys, event_keys) AS f_all,
        arrayConcat(arrayMap(${mask('f_pages')}, page_keys), arrayMap(${mask('f_events')}, event_keys)) AS f_all_masks,
        arrayFilter((m, k) -> m != 0 AND ${inRange('k')}, f_all_masks, f_all) AS f_m,
        arrayFilter((k, m) -> m != 0 AND ${inRange('k')}, f_all, f_all_masks) AS f_k,
        arraySort((m, k) -> k, f_m, f_k) AS f_masks,
        arrayMap(k -> ${keyMs('k')}, f_k) AS f_ms,
        length(arrayDistinct(f_ms)) < length(f_ms) AS f_tied,
        arrayMin(f_ms) AS f_from,
        arrayMax(f_ms) AS f_to,
        ${REACHED_STEPS} AS reach
      FROM (${rows})
      WHERE arrayExists(m -> bitTest(m, 0), f_m))`;
}

interface WalkTotals {
  /** Per step: sessions not tied reaching it, visitors reaching it through such sessions. */
  sessions: number[];
  visitors: number[];
  /** Visitors with a tied session: their key and the furthest step their other sessions reached. */
  tiedUsers: [string, number][];
  tied: SessionSpan[];
}

/**
 * Step counts of the sessions walked without event ids (`walked` builds their query: one row per
 * session, as `walkedSessions`), and what is left to walk exactly. `beside` adds visitors known
 * otherwise, as rows of a visitor number `u` and a furthest step `r` (a visitor may have several):
 * each counts once at the furthest step of all their rows and sessions.
 */
async function walkTotals(
  ch: ClickHouse,
  steps: FunnelStep[],
  walked: (p: Params) => string,
  beside?: (p: Params) => string,
): Promise<WalkTotals> {
  const p = new Params();
  const perVisitor = steps.map((_, k) => `countIf(NOT f_tied AND reach > ${k}) AS u${k}`);
  // Beside other rows, a visitor may come more than once: counted distinct, not grouped again.
  const counts = steps.flatMap((_, k) => [
    `sum(u${k}) AS s${k}`,
    beside ? `uniqExactIf(s_user, u_reach > ${k}) AS v${k}` : `countIf(u_reach > ${k}) AS v${k}`,
  ]);
  const grouped = `SELECT s_user, toString(s_user) AS u_uid, max(f_tied) AS u_tied, maxIf(reach, NOT f_tied) AS u_reach,
      groupArrayIf((toString(session_id), f_from, f_to), f_tied) AS u_tied_sessions, ${perVisitor.join(', ')}
    FROM (${walked(p)})
    GROUP BY s_user`;
  const rows = beside
    ? `${grouped}
       UNION ALL
       SELECT u, '', toUInt8(0), r, [], ${steps.map(() => 'toUInt64(0)').join(', ')} FROM (${beside(p)})`
    : grouped;
  const [row] = await ch.query<
    Record<string, number> & { tied_users: [string, number][]; tied: [string, number, number][] }
  >(
    `SELECT ${counts.join(', ')},
       groupArrayIf((u_uid, u_reach), u_tied) AS tied_users,
       arrayFlatten(groupArrayIf(u_tied_sessions, u_tied)) AS tied
     FROM (${rows})`,
    p.values,
  );
  return {
    sessions: steps.map((_, k) => Number(row?.[`s${k}`] ?? 0)),
    visitors: steps.map((_, k) => Number(row?.[`v${k}`] ?? 0)),
    tiedUsers: (row?.tied_users ?? []).map(([id, reach]) => [id, Number(reach)]),
    tied: sessionsAt(row?.tied ?? []),
  };
}

/** The steps reached by the given sessions (within the bounds of their step events), walked in exact event order. */
function exactlyWalked(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
  sessions: SessionSpan[],
): Promise<{ s_id: string; s_uid: string; reach: number }[]> {
  const p = new Params();
  const walked = funnelSessions(
    p,
    siteId,
    common,
    steps,
    ['toString(session_id) AS s_id', `toString(${userKey('any(user_id)')}) AS s_uid`],
    false,
    [sessionsWithin(p, sessions)],
  );
  return ch.query<{ s_id: string; s_uid: string; reach: number }>(
    `SELECT s_id, s_uid, reach FROM (${walked})`,
    p.values,
  );
}

/** Sessions and visitors reaching each step, every session walked in exact event order. */
async function exactTotals(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
): Promise<{ reached: number[]; visitors: number[] }> {
  const p = new Params();
  const sessions = funnelSessions(p, siteId, common, steps, [`${userKey('any(user_id)')} AS s_user`], false);
  const perVisitor = steps.map((_, k) => `countIf(reach > ${k}) AS u${k}`);
  const counts = steps.flatMap((_, k) => [`sum(u${k}) AS s${k}`, `countIf(u${k} > 0) AS v${k}`]);
  const [row] = await ch.query<Record<string, number>>(
    `SELECT ${counts.join(', ')}
     FROM (SELECT s_user, ${perVisitor.join(', ')} FROM (${sessions}) GROUP BY s_user)`,
    p.values,
  );
  return {
    reached: steps.map((_, k) => Number(row?.[`s${k}`] ?? 0)),
    visitors: steps.map((_, k) => Number(row?.[`v${k}`] ?? 0)),
  };
}

/**
 * The name a funnel's per-day summaries are stored under: its steps as they match (a step's
 * name changes nothing), hashed. Only funnels walked over `session_paths` have them.
 */
export function funnelSummaryParameter(steps: FunnelStep[]): `funnel:${string}` | undefined {
  if (!walksPaths(steps)) return undefined;
  const matching = JSON.stringify(steps.map((s) => [s.type, s.value]));
  return `funnel:${createHash('sha256').update(matching).digest('hex').slice(0, 16)}`;
}

/** Where a funnel's per-day visitors are stored: one row per visitor and day, apart from the totals. */
const visitorsParameter = (parameter: string) => `${parameter}:visitors`;

/**
 * The summarized days of an unfiltered range for a funnel (summaries.ts: days whose sessions all
 * lie in the range), and the sessions reaching each step there (values `1`..`n`). A session wholly
 * inside the range reaches the same steps whatever the range, so a day's sessions are walked
 * once: its summary holds, per step, the sessions reaching it, and apart
 * (`<parameter>:visitors`) one row per visitor with a session reaching step 1, the furthest step
 * their sessions of the day reached (`top_n`): visitors are not additive over days, so an answer
 * takes each visitor's furthest over the days it reads. With `build`, days without one are built
 * (a week at most) from the day's part of `session_paths` as the range's sessions are walked, the
 * sessions with a shared millisecond walked exactly from their events; answers only read them
 * (buildFunnelSummaries: a broad funnel's week is hundreds of thousands of visitor rows, seconds
 * to store).
 */
async function funnelDays(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
  parameter: `funnel:${string}`,
  settled: Settled | undefined,
  build = false,
): Promise<SummarizedDays | undefined> {
  return summarizedDays(
    ch,
    siteId,
    common,
    parameter,
    settled,
    build
      ? async (days, parts) => {
          const p = new Params();
          const source = (columns: string) =>
            `SELECT ${columns} FROM session_paths
         WHERE site_id = ${p.bind('UInt32', siteId)} AND _part IN ${p.bind('Array(String)', parts)}`;
          const walked = pathWalked(p, siteId, common, steps, settled, {
            extra: [[PARTITION_DAY, 'day']],
            source,
          });
          const rows = await ch.query<
            Record<string, number> & {
              day: number;
              s_uid: string;
              u_reach: number;
              u_tied: [string, number, number][];
            }
          >(
            `SELECT day, toString(s_user) AS s_uid, maxIf(reach, NOT f_tied) AS u_reach,
           ${steps.map((_, k) => `countIf(NOT f_tied AND reach > ${k}) AS u${k}`).join(', ')},
           groupArrayIf((toString(session_id), f_from, f_to), f_tied) AS u_tied
         FROM (${walked})
         GROUP BY day, s_user`,
            p.values,
          );
          const byDay = new Map<number, KeyedCounts>(days.map((day) => [day, emptyCounts()]));
          const reached = (day: number, uid: string, reach: number, sessions: number[]) => {
            const counts = byDay.get(day);
            if (!counts || reach === 0) return;
            sessions.forEach((n, k) => {
              if (n > 0)
                addCounts(counts, {
                  v: String(k + 1),
                  n_sessions: n,
                  n_events: 0,
                  bounces: 0,
                  top_ms: 0,
                  top_n: 0,
                });
            });
            counts.all_sessions += sessions[0] ?? 0;
            const known = counts.apart?.get(uid);
            if (known) known.top_n = Math.max(known.top_n, reach);
            else
              addCounts(
                counts,
                { v: uid, n_sessions: 0, n_events: 0, bounces: 0, top_ms: 0, top_n: reach },
                true,
              );
          };
          const tied: SessionSpan[] = [];
          const dayOf = new Map<string, number>();
          for (const [i, r] of rows.entries()) {
            if (i % ROWS_PER_TURN === ROWS_PER_TURN - 1) await nextTurn();
            const day = Number(r.day);
            reached(
              day,
              r.s_uid,
              Number(r.u_reach),
              steps.map((_, k) => Number(r[`u${k}`])),
            );
            for (const s of sessionsAt(r.u_tied)) {
              tied.push(s);
              dayOf.set(s.id, day);
            }
          }
          if (tied.length > listedSessionsLimit(ch)) return undefined;
          if (tied.length > 0) {
            for (const s of await exactlyWalked(ch, siteId, common, steps, tied)) {
              const reach = Number(s.reach);
              reached(
                dayOf.get(s.s_id)!,
                s.s_uid,
                reach,
                steps.map((_, k) => (reach > k ? 1 : 0)),
              );
            }
          }
          return byDay;
        }
      : undefined,
    { valuesUnder: visitorsParameter(parameter) },
  );
}

/**
 * Builds the per-day summaries of a funnel (funnelDays) for the settled days of an unfiltered
 * range that lack one, a week of them at most, and tells how many days of the range have one.
 * The background builder runs it for the saved funnels (warm.ts); nothing on a cluster, without
 * the rollups, or for a funnel with event properties.
 */
export async function buildFunnelSummaries(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
): Promise<number> {
  const parameter = funnelSummaryParameter(steps);
  if (!parameter || !rollupApplies(ch, common) || ch.cluster) return 0;
  const days = await readRollup(
    ch,
    (settled) => funnelDays(ch, siteId, common, steps, parameter, settled, true),
    'session_paths',
  );
  return days?.partitions.length ?? 0;
}

/**
 * `walkTotals` of an unfiltered funnel over `session_paths`: the range's summarized days
 * (funnelDays) add their sessions per step, and their visitors as rows standing for no session
 * beside the other days' sessions, so that a visitor counts once at their furthest step. The
 * visitors' rows are read without FINAL: a day stored twice repeats a visitor's furthest step,
 * which changes nothing.
 */
async function rolledWalk(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
  settled: Settled | undefined,
): Promise<WalkTotals> {
  const parameter = funnelSummaryParameter(steps);
  const days = parameter && (await funnelDays(ch, siteId, common, steps, parameter, settled));
  if (!parameter || !days) return walkTotals(ch, steps, (p) => pathWalked(p, siteId, common, steps, settled));
  const summarized = (p: Params, uids?: string[]) =>
    `metric_summaries
     WHERE site_id = ${p.bind('UInt32', siteId)} AND parameter = ${p.bind('String', visitorsParameter(parameter))}
       AND partition IN ${p.bind('Array(UInt32)', days.partitions)}
       AND source_part IN ${p.bind('Array(String)', settled?.parts ?? [])}${
         uids ? ` AND value IN ${p.bind('Array(String)', uids)}` : ''
       }`;
  const totals = await walkTotals(
    ch,
    steps,
    (p) =>
      pathWalked(p, siteId, common, steps, settled, {
        restrict: (q) => inPartitions(q, days.partitions, true),
      }),
    (p) => `SELECT toUInt64(value) AS u, toUInt8(top_n) AS r FROM ${summarized(p)}`,
  );
  // The visitors with a tied session reached, by their other sessions, the furthest of the
  // walk's and of the summarized days'.
  let tiedUsers = totals.tiedUsers;
  if (tiedUsers.length > 0) {
    const p = new Params();
    const rows = await ch.query<{ uid: string; reach: number }>(
      `SELECT value AS uid, max(top_n) AS reach FROM ${summarized(
        p,
        tiedUsers.map(([uid]) => uid),
      )} GROUP BY value`,
      p.values,
    );
    const inDays = new Map(rows.map((r) => [r.uid, Number(r.reach)]));
    tiedUsers = tiedUsers.map(([uid, reach]) => [uid, Math.max(reach, inDays.get(uid) ?? 0)]);
  }
  return {
    ...totals,
    tiedUsers,
    sessions: totals.sessions.map((n, k) => n + (days.counts.byValue.get(String(k + 1))?.n_sessions ?? 0)),
  };
}

/**
 * Sessions and visitors reaching each step. One pass over the range's events that match a step
 * or the filters walks each session without event ids; the few sessions where a millisecond is
 * shared are walked again in exact event order (by id, within the bounds of their rows). A
 * session's visitor is its anonymous `user_id` (ingest keys sessions by visitor: it is the same
 * on all its events), told apart by the number its 16 hex digits spell, as the rollup does; a
 * visitor reaches a step when one of their sessions does. Rates are over sessions.
 */
export async function analyzeFunnel(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
  /** Tied sessions (see `walkedSessions`) up to which their exact walk lists them by id (past it, every session is walked exactly). */
  maxTied = listedSessionsLimit(ch),
): Promise<FunnelStepResult[]> {
  const walked =
    rollupApplies(ch, common) && walksPaths(steps)
      ? await readRollup(ch, (settled) => rolledWalk(ch, siteId, common, steps, settled), 'session_paths')
      : await walkTotals(ch, steps, (p) => walkedSessions(p, siteId, common, steps));
  const reached = [...walked.sessions];
  const visitors = [...walked.visitors];
  if (walked.tied.length > 0) {
    if (walked.tied.length > maxTied) {
      return stepResults(steps, await exactTotals(ch, siteId, common, steps));
    }
    const exact = await exactlyWalked(ch, siteId, common, steps, walked.tied);
    // A tied visitor reaches the furthest of their other sessions (counted already) and their
    // tied ones: the steps past the first count them now.
    const counted = new Map(walked.tiedUsers);
    const furthest = new Map(counted);
    for (const s of exact) {
      const reach = Number(s.reach);
      for (let k = 0; k < reach; k++) reached[k]! += 1;
      furthest.set(s.s_uid, Math.max(furthest.get(s.s_uid) ?? 0, reach));
    }
    for (const [uid, reach] of furthest)
      for (let k = counted.get(uid) ?? 0; k < reach; k++) visitors[k]! += 1;
  }
  return stepResults(steps, { reached, visitors });
}

/** The answer's items from the sessions and visitors reaching each step. */
function stepResults(
  steps: FunnelStep[],
  counts: { reached: number[]; visitors: number[] },
): FunnelStepResult[] {
  const first = counts.reached[0] ?? 0;
  return steps.map((step, k) => {
    const here = counts.reached[k]!;
    const previous = k === 0 ? here : counts.reached[k - 1]!;
    return {
      step_number: k + 1,
      step_name: step.name ?? step.value,
      visitors: counts.visitors[k]!,
      sessions: here,
      conversion_rate: ratio(here * 100, first),
      dropoff_rate: k === 0 ? 0 : ratio((previous - here) * 100, previous),
    };
  });
}

/**
 * The sessions that reached step `stepNumber` (`reached`), or reached the step before it and not
 * it (`dropped`), as the sessions list answers them: newest start first, ties by id, fields over
 * the session's events in range. Unfiltered, from `session_paths`, the list read `spare` sessions past
 * the page (room for tied sessions that drop out).
 */
export function funnelStepSessions(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
  select: StepSelection,
  spare = SPARE_SESSIONS,
): Promise<{ data: TrafficSession[]; totalCount: number }> {
  return rollupApplies(ch, common) && walksPaths(steps)
    ? readRollup(
        ch,
        (settled) => keyedStepSessions(ch, siteId, common, steps, select, settled, spare),
        'session_paths',
      )
    : rollupSessionsApply(ch)
      ? readRollup(
          ch,
          (settled) => eventStepSessions(ch, siteId, common, steps, select, { settled }),
          'session_paths',
        )
      : eventStepSessions(ch, siteId, common, steps, select);
}

/** Which sessions of a funnel step, and which page of them. */
interface StepSelection {
  stepNumber: number;
  mode: 'reached' | 'dropped';
  limit: number;
  offset: number;
}

/** Whether a session reaching `reach` steps is selected. */
const isPicked = (select: StepSelection, reach: number) =>
  select.mode === 'reached' ? reach >= select.stepNumber : reach + 1 === select.stepNumber;

/** Selected sessions ranked past the page, for the tied sessions among them that are not selected. */
const SPARE_SESSIONS = 50;

/**
 * `funnelStepSessions` from the events: one GROUP BY session over the range's events. With the
 * rollups (`rollup` given), over the events matching a step or the filters only, each selected
 * session ranked by its start in range from `session_paths` (its first event's time, or for a
 * session that began before the range its first event in range, startsInRange): at 10 M events
 * filtered, p95 1.38-1.43 s against 1.46-1.48 s grouping every event of the range
 * (docs/benchmarks.md). Without, over every event of the range (the start is its first).
 */
async function eventStepSessions(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
  select: StepSelection,
  /** With the rollups: the settled parts of `session_paths` (readRollup; none on a cluster). */
  rollup?: { settled: Settled | undefined },
): Promise<{ data: TrafficSession[]; totalCount: number }> {
  const settled = rollup?.settled;
  const before = rollup ? await startsInRange(ch, siteId, common, settled) : undefined;
  const rank = (limit: number, offset: number) => {
    const p = new Params();
    const k = p.bind('UInt8', select.stepNumber);
    const picked = select.mode === 'reached' ? `reach >= ${k}` : `reach + 1 = ${k}`;
    const page = `ORDER BY s_start DESC, s_id ASC
       LIMIT ${p.bind('UInt32', limit)} OFFSET ${p.bind('UInt32', offset)}`;
    if (before) {
      const sessions = funnelSessions(p, siteId, common, steps, ['session_id'], false);
      const { from } = rangeBounds(p, common);
      const start = from
        ? `if(session_start >= ${from}, toUnixTimestamp64Milli(session_start),
             arrayElement(${p.bind('Array(Int64)', before.starts)}, indexOf(${p.bind('Array(String)', before.ids)}, toString(session_id))))`
        : 'toUnixTimestamp64Milli(session_start)';
      const rows = pathRows(p, siteId, common, () => `session_id, ${start} AS s_start`, settled);
      return ch.query<{ s_id: string; s_total: number }>(
        `SELECT toString(session_id) AS s_id, count() OVER () AS s_total
         FROM (${rows}) AS r
         INNER JOIN (SELECT session_id FROM (${sessions}) WHERE ${picked}) AS f USING session_id
         ${page}`,
        p.values,
      );
    }
    const sessions = funnelSessions(
      p,
      siteId,
      common,
      steps,
      ['toString(session_id) AS s_id', 'min(timestamp) AS s_start'],
      true,
    );
    return ch.query<{ s_id: string; s_total: number }>(
      `SELECT s_id, count() OVER () AS s_total FROM (${sessions})
       WHERE ${picked}
       ${page}`,
      p.values,
    );
  };
  const { rows: ranked, totals } = await rankedPage(rank, select);
  const totalCount = Number(totals?.s_total ?? 0);
  return {
    data: await sessionsById(
      ch,
      siteId,
      common,
      ranked.map((r) => r.s_id),
    ),
    totalCount,
  };
}

/** The sessions listed (in that order), as the sessions list answers them; `within` narrows the events read. */
async function sessionsById(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  ids: string[],
  within?: (p: Params) => string,
): Promise<TrafficSession[]> {
  if (ids.length === 0) return [];
  const p = new Params();
  const rows = await ch.query<SessionRow>(
    `SELECT ${SESSION_FIELDS} FROM events
     WHERE ${rangeCondition(p, siteId, common)} AND session_id IN ${p.bind('Array(UUID)', ids)}${within ? ` AND ${within(p)}` : ''}
     GROUP BY session_id`,
    p.values,
  );
  const byId = new Map(rows.map((r) => [r.s_session_id, toSession(r)]));
  return ids.flatMap((id) => byId.get(id) ?? []);
}

/**
 * The first events in range of the sessions that began before it (their start in range is not
 * their first event's time), as milliseconds by session id.
 */
async function startsInRange(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  settled: Settled | undefined,
): Promise<{ ids: string[]; starts: number[] }> {
  const p = new Params();
  const { from } = rangeBounds(p, common);
  if (!from) return { ids: [], starts: [] };
  const rows = pathRows(p, siteId, common, () => 'session_id, session_start, session_end', settled);
  const [edge] = await ch.query<{ ids: string[]; until: string | null }>(
    `SELECT groupArray(toString(session_id)) AS ids, toString(max(session_end)) AS until
     FROM (${rows}) WHERE session_start < ${from}`,
    p.values,
  );
  if (!edge || edge.ids.length === 0) return { ids: [], starts: [] };
  const q = new Params();
  const firsts = await ch.query<{ id: string; start: number }>(
    `SELECT toString(session_id) AS id, toUnixTimestamp64Milli(min(timestamp)) AS start FROM events
     WHERE ${rangeCondition(q, siteId, common)} AND session_id IN ${q.bind('Array(UUID)', [...edge.ids].sort())}
       AND timestamp <= ${q.bind("DateTime64(3, 'UTC')", edge.until)}
     GROUP BY session_id`,
    q.values,
  );
  return { ids: firsts.map((r) => r.id), starts: firsts.map((r) => Number(r.start)) };
}

/**
 * `funnelStepSessions` from `session_paths`, unfiltered: one pass walks the sessions' keys and
 * returns the count of selected sessions that are not tied, every tied session (see
 * `pathWalked`) and the first selected-or-tied sessions in the list's order, past the page by
 * `spare`; the tied ones are walked again from their events, and those not selected
 * dropped from the list. Should more than the spare drop out before the page is full, the pass
 * runs again with room for all of them. A session's start is its first event in range: its first
 * event overall unless it began before the range.
 *
 * The range's days with the funnel's summaries (funnelDays) are left out of the pass while
 * they cannot hold a session of the page: their selected sessions are counted from the
 * summaries (per step, the sessions reaching it), and a day whose last session ends before the
 * start of the page's last session is older than the whole page (the list is newest first). A
 * day that could hold one is walked with the others, and the pass runs again.
 */
async function keyedStepSessions(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
  select: StepSelection,
  settled: Settled | undefined,
  spare: number,
): Promise<{ data: TrafficSession[]; totalCount: number }> {
  const parameter = funnelSummaryParameter(steps);
  const [before, days] = await Promise.all([
    startsInRange(ch, siteId, common, settled),
    parameter ? funnelDays(ch, siteId, common, steps, parameter, settled) : undefined,
  ]);
  const byDay = days?.byDay ?? new Map<number, DayCounts>();
  // A summarized day's selected sessions, from those reaching each step (`dropped` starts at step 2).
  const reaching = (day: DayCounts, j: number) => day.counts.byValue.get(String(j))?.n_sessions ?? 0;
  const pickedOn = (day: DayCounts) =>
    select.mode === 'reached'
      ? reaching(day, select.stepNumber)
      : reaching(day, select.stepNumber - 1) - reaching(day, select.stepNumber);
  const endMs = (day: DayCounts) => Date.parse(`${day.spanEnd.replace(' ', 'T')}Z`);
  const pass = async (size: number, skipped: number[]) => {
    const p = new Params();
    const k = p.bind('UInt8', select.stepNumber);
    const picked = select.mode === 'reached' ? `reach >= ${k}` : `reach + 1 = ${k}`;
    const { from } = rangeBounds(p, common);
    const start = from
      ? `if(session_start >= ${from}, toUnixTimestamp64Milli(session_start),
           arrayElement(${p.bind('Array(Int64)', before.starts)}, indexOf(${p.bind('Array(String)', before.ids)}, toString(session_id))))`
      : 'toUnixTimestamp64Milli(session_start)';
    const walked = pathWalked(p, siteId, common, steps, settled, {
      extra: [[start, 's_start']],
      ...(skipped.length > 0 ? { restrict: (q: Params) => inPartitions(q, skipped, true) } : {}),
    });
    const [row] = await ch.query<{ untied: number; tied: [string, number, number][]; head: string[] }>(
      `SELECT countIf(NOT f_tied AND ${picked}) AS untied,
         groupArrayIf((toString(session_id), f_from, f_to), f_tied) AS tied,
         arrayMap(x -> toString(x), groupArraySortedIf(${p.bind('UInt32', size)})(${listOrder('s_start')}, f_tied OR ${picked})) AS head
       FROM (${walked})`,
      p.values,
    );
    return { untied: Number(row!.untied), tied: row!.tied, head: row!.head.map(listed) };
  };
  const want = select.offset + select.limit;
  let skipped = [...byDay.keys()];
  for (;;) {
    let result = await pass(want + spare, skipped);
    const tied = sessionsAt(result.tied);
    if (tied.length > listedSessionsLimit(ch)) return eventStepSessions(ch, siteId, common, steps, select);
    const tiedIds = new Set(tied.map((t) => t.id));
    const pickedTied = new Set(
      tied.length === 0
        ? []
        : (await exactlyWalked(ch, siteId, common, steps, tied))
            .filter((r) => isPicked(select, Number(r.reach)))
            .map((r) => r.s_id),
    );
    const keep = (head: typeof result.head) => head.filter((s) => !tiedIds.has(s.id) || pickedTied.has(s.id));
    let kept = keep(result.head);
    if (kept.length < want && result.head.length === want + spare) {
      result = await pass(want + tied.length, skipped);
      kept = keep(result.head);
    }
    // Skipped days that could hold a session of the page: walked too, and the pass again.
    const last = kept.length >= want ? kept[want - 1]!.start : Number.NEGATIVE_INFINITY;
    const late = skipped.filter((d) => endMs(byDay.get(d)!) >= last);
    if (late.length > 0) {
      skipped = skipped.filter((d) => !late.includes(d));
      continue;
    }
    const summarized = skipped.reduce((n, d) => n + pickedOn(byDay.get(d)!), 0);
    const page = kept.slice(select.offset, want);
    const earliest = page.reduce((a, s) => Math.min(a, s.start), Number.POSITIVE_INFINITY);
    const data = await sessionsById(
      ch,
      siteId,
      common,
      page.map((s) => s.id),
      (p) => `timestamp >= fromUnixTimestamp64Milli(${p.bind('Int64', earliest)}, 'UTC')`,
    );
    return { data, totalCount: Number(result.untied) + pickedTied.size + summarized };
  }
}
