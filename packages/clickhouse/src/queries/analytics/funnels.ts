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
): string {
  const mask = stepMask(p, steps);
  const filters = common.filters.length > 0 ? matchesFilters(p, siteId, common) : undefined;
  const rows = allRows ? '' : ` AND (${mask} != 0${filters ? ` OR ${filters}` : ''})`;
  // Sessions that never match step 1 reach nothing: dropped before the walk, its costly part.
  const having = [`max(bitTest(${mask}, 0))`, ...(filters ? [`max(${filters})`] : [])];
  return `SELECT *, ${REACHED_STEPS} AS reach FROM (
    SELECT ${[...columns, `${orderedMasks(mask)} AS f_masks`].join(', ')}
    FROM events
    WHERE ${rangeCondition(p, siteId, common)}${rows}
    GROUP BY session_id
    HAVING ${having.join(' AND ')})`;
}

/**
 * Sessions and visitors reaching each step, in one pass over the range's events that match a
 * step or the filters, then one over the sessions by visitor. A session's visitor is its
 * anonymous `user_id` (ingest keys sessions by visitor: it is the same on all its events), told
 * apart by the number its 16 hex digits spell, as the rollup does; a visitor reaches a step when
 * one of their sessions does. Rates are over sessions.
 */
export async function analyzeFunnel(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  steps: FunnelStep[],
): Promise<FunnelStepResult[]> {
  const p = new Params();
  const sessions = funnelSessions(p, siteId, common, steps, [`${userKey('any(user_id)')} AS s_user`], false);
  const perVisitor = steps.map((_, k) => `countIf(reach > ${k}) AS u${k}`);
  const counts = steps.flatMap((_, k) => [`sum(u${k}) AS s${k}`, `countIf(u${k} > 0) AS v${k}`]);
  const [row] = await ch.query<Record<string, number>>(
    `SELECT ${counts.join(', ')}
     FROM (SELECT s_user, ${perVisitor.join(', ')} FROM (${sessions}) GROUP BY s_user)`,
    p.values,
  );
  const reached = steps.map((_, k) => Number(row?.[`s${k}`] ?? 0));
  const first = reached[0] ?? 0;
  return steps.map((step, k) => {
    const here = reached[k]!;
    const previous = k === 0 ? here : reached[k - 1]!;
    return {
      step_number: k + 1,
      step_name: step.name ?? step.value,
      visitors: Number(row?.[`v${k}`] ?? 0),
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
