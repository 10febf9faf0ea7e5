import type { CommonParams, FunnelStep, GoalDefinition, StoredEvent } from '@trackhouse/clickhouse';
import { convertsGoal, selectEvents } from './reference';
import { byteOrder, ratio, type Selection, sessions as sessionList } from './traffic-reference';

/**
 * Brute-force answers for funnels, retention and journeys, written from their definitions
 * (docs/decisions.md, "Funnels, retention and journeys"), not from the queries.
 */

const asGoal = (step: FunnelStep): GoalDefinition =>
  step.type === 'page'
    ? { goalType: 'path', config: { pathPattern: step.value } }
    : {
        goalType: 'event',
        config: {
          eventName: step.value,
          ...(step.eventPropertyKey === undefined || step.eventPropertyValue === undefined
            ? {}
            : { eventPropertyKey: step.eventPropertyKey, eventPropertyValue: step.eventPropertyValue }),
        },
      };

/**
 * Whether events (in order) hold steps `k`… at increasing positions from `from`: a plain search
 * over every choice of event for each step, remembered per (step, position).
 */
function holds(
  events: StoredEvent[],
  goals: GoalDefinition[],
  k: number,
  from: number,
  memo: Map<string, boolean>,
): boolean {
  if (k === goals.length) return true;
  const key = `${k} ${from}`;
  const known = memo.get(key);
  if (known !== undefined) return known;
  let found = false;
  for (let i = from; i < events.length && !found; i++)
    found = convertsGoal(events[i]!, goals[k]!) && holds(events, goals, k + 1, i + 1, memo);
  memo.set(key, found);
  return found;
}

/** Steps a session reached: the longest prefix of the funnel found in order in its events. */
export function reachedSteps(events: StoredEvent[], steps: FunnelStep[]): number {
  const goals = steps.map(asGoal);
  let reached = 0;
  while (reached < steps.length && holds(events, goals.slice(0, reached + 1), 0, 0, new Map())) reached++;
  return reached;
}

export function funnel(s: Selection, steps: FunnelStep[]) {
  const reach = [...s.sessions.values()].map((events) => ({ events, n: reachedSteps(events, steps) }));
  const sessions = steps.map((_, k) => reach.filter((r) => r.n > k));
  return steps.map((step, k) => {
    const here = sessions[k]!.length;
    const before = k === 0 ? here : sessions[k - 1]!.length;
    return {
      step_number: k + 1,
      step_name: step.name ?? step.value,
      visitors: new Set(sessions[k]!.map((r) => r.events[0]!.user_id)).size,
      sessions: here,
      conversion_rate: ratio(here * 100, sessions[0]!.length),
      dropoff_rate: k === 0 ? 0 : ratio((before - here) * 100, before),
    };
  });
}

/** Sessions reaching step `k`, or reaching `k - 1` and not `k`, as the sessions list orders them. */
export function funnelSessions(s: Selection, steps: FunnelStep[], k: number, mode: 'reached' | 'dropped') {
  return sessionList(s).filter((r) => {
    const n = reachedSteps(s.sessions.get(r.session_id)!, steps);
    return mode === 'reached' ? n >= k : n === k - 1;
  });
}

// ---- retention --------------------------------------------------------------------------

const dayFormats = new Map<string, Intl.DateTimeFormat>();
export function localDate(timestamp: string, timeZone: string): string {
  let f = dayFormats.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' });
    dayFormats.set(timeZone, f);
  }
  return f.format(new Date(`${timestamp.replace(' ', 'T')}Z`));
}

const shift = (date: string, days: number) =>
  new Date(Date.parse(`${date}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10);
const monday = (date: string) => shift(date, -((new Date(`${date}T00:00:00Z`).getUTCDay() + 6) % 7));
const daysFrom = (a: string, b: string) => Math.round((Date.parse(b) - Date.parse(a)) / 86_400_000);

export function retention(
  all: StoredEvent[],
  siteId: number,
  c: CommonParams & { startDate: string; endDate: string },
  mode: 'day' | 'week',
) {
  const periodOf = (date: string) => (mode === 'day' ? date : monday(date));
  const size = mode === 'day' ? 1 : 7;
  const seen = new Map<string, Set<string>>();
  for (const e of selectEvents(all, siteId, c)) {
    const set = seen.get(e.user_id) ?? new Set<string>();
    set.add(periodOf(localDate(e.timestamp, c.timeZone)));
    seen.set(e.user_id, set);
  }
  const first = periodOf(c.startDate);
  const periods = daysFrom(first, periodOf(c.endDate)) / size + 1;
  const cohorts = new Map<string, Set<string>[]>();
  for (const active of seen.values()) {
    const cohort = [...active].sort()[0]!;
    const list = cohorts.get(cohort) ?? [];
    list.push(active);
    cohorts.set(cohort, list);
  }
  const out: Record<string, { size: number; counts: (number | null)[]; percentages: (number | null)[] }> = {};
  for (const cohort of [...cohorts.keys()].sort().reverse()) {
    const members = cohorts.get(cohort)!;
    const index = daysFrom(first, cohort) / size;
    const counts = Array.from({ length: periods }, (_, j) =>
      index + j < periods ? members.filter((m) => m.has(shift(cohort, j * size))).length : null,
    );
    out[cohort] = {
      size: members.length,
      counts,
      percentages: counts.map((n) => (n === null ? null : ratio(n * 100, members.length))),
    };
  }
  return { cohorts: out, maxPeriods: periods - 1, mode, range: daysFrom(c.startDate, c.endDate) + 1 };
}

// ---- journeys ---------------------------------------------------------------------------

const comparePaths = (a: string[], b: string[]) => {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const order = byteOrder(a[i]!, b[i]!);
    if (order !== 0) return order;
  }
  return a.length - b.length;
};

export function journeys(s: Selection, opts: { steps: number; limit: number; startPage?: string }) {
  const counts = new Map<string, { path: string[]; count: number }>();
  for (const events of s.sessions.values()) {
    const pages: string[] = [];
    for (const e of events) if (e.type === 'pageview' && pages.at(-1) !== e.pathname) pages.push(e.pathname);
    const start =
      opts.startPage === undefined
        ? 0
        : pages.findIndex((path) =>
            convertsGoal({ type: 'pageview', pathname: path } as StoredEvent, {
              goalType: 'path',
              config: { pathPattern: opts.startPage! },
            }),
          );
    if (start < 0) continue;
    const path = pages.slice(start, start + opts.steps);
    if (path.length < 2) continue;
    const key = JSON.stringify(path);
    const known = counts.get(key) ?? { path, count: 0 };
    known.count++;
    counts.set(key, known);
  }
  return [...counts.values()]
    .sort((a, b) => b.count - a.count || comparePaths(a.path, b.path))
    .slice(0, opts.limit)
    .map((j) => ({ ...j, percentage: ratio(j.count * 100, s.sessions.size) }));
}
