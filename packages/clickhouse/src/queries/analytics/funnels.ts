import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeCondition } from '../builder';
import { type GoalDefinition, goalCondition } from '../goals';
import { userKey } from './rollup';
import { SESSION_FIELDS, type SessionRow, type TrafficSession, toSession } from './sessions';
import { matchesFilters, rankedPage, ratio } from './shared';

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

/** Tied sessions (see `walkedSessions`) up to which their exact walk reads them by id (past it, every session is walked exactly). */
const MAX_TIED_SESSIONS = 50_000;

/**
 * One row per counted session that matched step 1, walked without event ids (reading them over a
 * whole range costs as much as the rest of the walk): `reach` over the events matching a later
 * step after the session's first step-1 event, in time order. `f_tied` marks a session where two
 * events matching a step share a millisecond: only there does the order of event ids decide
 * (elsewhere the first step-1 event is the only one at its time, so the walk starts strictly
 * after it), and such sessions are walked again exactly. `f_from` and `f_to` bound the rows read
 * for the session.
 */
function walkedSessions(p: Params, siteId: number, common: CommonParams, steps: FunnelStep[]): string {
  const filters = common.filters.length > 0 ? matchesFilters(p, siteId, common) : undefined;
  const having = ['max(bitTest(f_m, 0))', ...(filters ? ['max(f_match)'] : [])];
  return `SELECT session_id, s_user, s_uid, f_tied, f_from, f_to,
      arrayFold((acc, x) -> toUInt8(acc + bitTest(x.2, acc)), f_after, toUInt8(1)) AS reach
    FROM (
      SELECT session_id, ${userKey('any(user_id)')} AS s_user, any(user_id) AS s_uid,
        minIf(timestamp, bitTest(f_m, 0)) AS f_first,
        arrayFilter(x -> x.1 > f_first, arraySort(groupArrayIf((timestamp, f_m), f_m >= 2))) AS f_after,
        groupArrayIf(toUnixTimestamp64Milli(timestamp), f_m != 0) AS f_times,
        length(arrayDistinct(f_times)) < length(f_times) AS f_tied,
        toString(min(timestamp)) AS f_from, toString(max(timestamp)) AS f_to
      FROM (
        SELECT session_id, user_id, timestamp, ${stepMask(p, steps)} AS f_m${filters ? `, ${filters} AS f_match` : ''}
        FROM events
        WHERE ${rangeCondition(p, siteId, common)} AND (f_m != 0${filters ? ' OR f_match' : ''}))
      GROUP BY session_id
      HAVING ${having.join(' AND ')})`;
}

interface WalkTotals {
  /** Per step: sessions not tied reaching it, visitors without a tied session reaching it. */
  sessions: number[];
  visitors: number[];
  /** Visitors with a tied session: their id and the furthest step their other sessions reached. */
  tiedUsers: [string, number][];
  tiedIds: string[];
  tiedFrom: string | null;
  tiedTo: string | null;
}

/** Step counts of the sessions walked without event ids, and what is left to walk exactly. */
async function walkTotals(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
): Promise<WalkTotals> {
  const p = new Params();
  const perVisitor = steps.map((_, k) => `countIf(NOT f_tied AND reach > ${k}) AS u${k}`);
  const counts = steps.flatMap((_, k) => [
    `sum(u${k}) AS s${k}`,
    `countIf(NOT u_tied AND u_reach > ${k}) AS v${k}`,
  ]);
  const [row] = await ch.query<
    Record<string, number> & {
      tied_users: [string, number][];
      tied_ids: string[];
      tied_from: string | null;
      tied_to: string | null;
    }
  >(
    `SELECT ${counts.join(', ')},
       groupArrayIf((u_uid, u_reach), u_tied) AS tied_users,
       arrayFlatten(groupArrayIf(u_tied_ids, u_tied)) AS tied_ids,
       minIf(u_from, u_tied) AS tied_from, maxIf(u_to, u_tied) AS tied_to
     FROM (
       SELECT s_user, any(s_uid) AS u_uid, max(f_tied) AS u_tied, maxIf(reach, NOT f_tied) AS u_reach,
         groupArrayIf(toString(session_id), f_tied) AS u_tied_ids,
         minIf(f_from, f_tied) AS u_from, maxIf(f_to, f_tied) AS u_to, ${perVisitor.join(', ')}
       FROM (${walkedSessions(p, siteId, common, steps)})
       GROUP BY s_user)`,
    p.values,
  );
  const tiedIds = row?.tied_ids ?? [];
  return {
    sessions: steps.map((_, k) => Number(row?.[`s${k}`] ?? 0)),
    visitors: steps.map((_, k) => Number(row?.[`v${k}`] ?? 0)),
    tiedUsers: (row?.tied_users ?? []).map(([id, reach]) => [id, Number(reach)]),
    tiedIds,
    tiedFrom: tiedIds.length > 0 ? (row?.tied_from ?? null) : null,
    tiedTo: tiedIds.length > 0 ? (row?.tied_to ?? null) : null,
  };
}

/** The steps reached by the given sessions (listed, within the bounds of their rows), walked in exact event order. */
function exactlyWalked(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
  only: { ids: string[]; from: string; to: string },
): Promise<{ s_uid: string; reach: number }[]> {
  const p = new Params();
  const bounds = [
    `session_id IN ${p.bind('Array(UUID)', only.ids)}`,
    `timestamp >= ${p.bind("DateTime64(3, 'UTC')", only.from)}`,
    `timestamp <= ${p.bind("DateTime64(3, 'UTC')", only.to)}`,
  ];
  const sessions = funnelSessions(p, siteId, common, steps, ['any(user_id) AS s_uid'], false, bounds);
  return ch.query<{ s_uid: string; reach: number }>(`SELECT s_uid, reach FROM (${sessions})`, p.values);
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
  maxTied = MAX_TIED_SESSIONS,
): Promise<FunnelStepResult[]> {
  const walked = await walkTotals(ch, siteId, common, steps);
  const reached = [...walked.sessions];
  const visitors = [...walked.visitors];
  if (walked.tiedIds.length > 0) {
    if (walked.tiedIds.length > maxTied) {
      return stepResults(steps, await exactTotals(ch, siteId, common, steps));
    }
    const exact = await exactlyWalked(ch, siteId, common, steps, {
      ids: walked.tiedIds,
      from: walked.tiedFrom!,
      to: walked.tiedTo!,
    });
    // A tied visitor reaches the furthest of their other sessions and their tied ones.
    const furthest = new Map(walked.tiedUsers);
    for (const s of exact) {
      const reach = Number(s.reach);
      for (let k = 0; k < reach; k++) reached[k]! += 1;
      furthest.set(s.s_uid, Math.max(furthest.get(s.s_uid) ?? 0, reach));
    }
    for (const reach of furthest.values()) for (let k = 0; k < reach; k++) visitors[k]! += 1;
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
 * the session's events in range.
 */
export async function funnelStepSessions(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
  select: { stepNumber: number; mode: 'reached' | 'dropped'; limit: number; offset: number },
): Promise<{ data: TrafficSession[]; totalCount: number }> {
  const rank = (limit: number, offset: number) => {
    const p = new Params();
    const k = p.bind('UInt8', select.stepNumber);
    const picked = select.mode === 'reached' ? `reach >= ${k}` : `reach + 1 = ${k}`;
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
       ORDER BY s_start DESC, s_id ASC
       LIMIT ${p.bind('UInt32', limit)} OFFSET ${p.bind('UInt32', offset)}`,
      p.values,
    );
  };
  const { rows: ranked, totals } = await rankedPage(rank, select);
  const totalCount = Number(totals?.s_total ?? 0);
  if (ranked.length === 0) return { data: [], totalCount };

  const p = new Params();
  const ids = ranked.map((r) => r.s_id);
  const rows = await ch.query<SessionRow>(
    `SELECT ${SESSION_FIELDS} FROM events
     WHERE ${rangeCondition(p, siteId, common)} AND session_id IN ${p.bind('Array(UUID)', ids)}
     GROUP BY session_id`,
    p.values,
  );
  const byId = new Map(rows.map((r) => [r.s_session_id, toSession(r)]));
  return { data: ids.flatMap((id) => byId.get(id) ?? []), totalCount };
}
