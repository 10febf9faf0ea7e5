import type { ClickHouse } from '../../client';
import type { CommonParams, Params } from '../builder';
import { memo } from './memo';
import type { Settled } from './rollup';
import { epochDay, epochDayEndedAnHourAgo, type KeyedCounts, type ValueCounts } from './summaries';

/**
 * Counts over the sessions of a partition still being written (several parts: today's), kept
 * between reads and brought up to date from the parts added since, rather than read whole
 * again (docs/architecture.md, "Partitions still being written").
 *
 * A part's name gives the blocks it holds (`<partition>_<min>_<max>_<level>[_<version>]`).
 * Block numbers grow with every insert, and a merge makes one part of parts of neighbouring
 * blocks, so what a partition held up to a block stays exactly that until a mutation (a
 * site's DELETE: its version rises past it) or a merge of it with later blocks. Counts of
 * sessions are sums of each session's own counts, so those up to block B, less the counts of
 * the sessions the later parts touch as they were up to B, plus those sessions' counts now,
 * are the counts now.
 */

/** A part's blocks and data version, from its name. */
export interface Blocks {
  name: string;
  min: number;
  max: number;
  version: number;
}

/** The blocks of part `name` of `partition`; undefined for a name of another form. */
export function blocksOf(partition: string, name: string): Blocks | undefined {
  if (!name.startsWith(`${partition}_`)) return undefined;
  const fields = name.slice(partition.length + 1).split('_');
  if (fields.length !== 3 && fields.length !== 4) return undefined;
  if (!fields.every((f) => /^\d{1,15}$/.test(f))) return undefined;
  const [min, max, , version] = fields.map(Number);
  return { name, min: min!, max: max!, version: version ?? min! };
}

/** Counts of a partition's sessions as its blocks up to `upTo` held them, read from `parts`. */
interface Counted {
  upTo: number;
  parts: Blocks[];
  counts: KeyedCounts;
}

/** Most states kept per key: the later ones, an earlier one when a merge spans a later one. */
const STATES = 4;

const kept = memo<{ states: Counted[] }>(256);

/**
 * Whether the parts now holding blocks up to `state.upTo` hold what its parts held: no part
 * spans that block and later ones, each of its parts lies in one of them, and each of them is
 * made of its parts with no later version (no mutation since).
 */
export function stillHolds(state: { upTo: number; parts: Blocks[] }, now: Blocks[]): boolean {
  if (now.some((b) => b.min <= state.upTo && b.max > state.upTo)) return false;
  const old = now.filter((b) => b.max <= state.upTo);
  const within = (outer: Blocks, inner: Blocks) => outer.min <= inner.min && inner.max <= outer.max;
  return (
    state.parts.every((s) => old.some((c) => within(c, s))) &&
    old.every((c) => {
      const made = state.parts.filter((s) => within(c, s));
      return made.length > 0 && c.version <= Math.max(...made.map((s) => s.version));
    })
  );
}

/** `base` + `plus` − `minus`, value by value; values left with no sessions and no events dropped. */
export function combineCounts(base: KeyedCounts, plus: KeyedCounts, minus: KeyedCounts): KeyedCounts {
  const out = new Map<string, ValueCounts>();
  const add = (values: Map<string, ValueCounts>, sign: number) => {
    for (const r of values.values()) {
      const c = out.get(r.v) ?? { v: r.v, n_sessions: 0, n_events: 0, bounces: 0, top_ms: 0, top_n: 0 };
      c.n_sessions += sign * r.n_sessions;
      c.n_events += sign * r.n_events;
      c.bounces += sign * r.bounces;
      c.top_ms += sign * r.top_ms;
      c.top_n += sign * r.top_n;
      out.set(r.v, c);
    }
  };
  add(base.byValue, 1);
  add(plus.byValue, 1);
  add(minus.byValue, -1);
  for (const [v, c] of out)
    if (c.n_sessions === 0 && c.n_events === 0 && c.bounces === 0 && c.top_ms === 0 && c.top_n === 0)
      out.delete(v);
  return {
    byValue: out,
    all_sessions: base.all_sessions + plus.all_sessions - minus.all_sessions,
    all_events: base.all_events + plus.all_events - minus.all_events,
  };
}

/**
 * A condition on a rollup's rows (bound with `p`) and the counts of the rows meeting it,
 * merged (FINAL); `unkept` when they are not only of those rows (some were counted from the
 * events, which hold later events too), so that they can be neither kept nor taken from.
 */
export type CountRows = (
  restrict: (p: Params) => string,
) => Promise<Counted['counts'] & { unkept?: boolean }>;

/** A rollup read so, and the columns of its sort key that name one of its sessions or visitors. */
export interface Rollup {
  table: 'session_facts' | 'session_paths' | 'visitor_hours';
  entity: string;
}

export const SESSION_PATHS: Rollup = {
  table: 'session_paths',
  entity: '(UUIDv7ToDateTime(session_id), session_id)',
};

export const SESSION_FACTS: Rollup = { ...SESSION_PATHS, table: 'session_facts' };

/**
 * The partitions still changing (changingPartitions: YYYYMMDD, with their parts) of a rollup of
 * sessions to keep apart (partitionCounts) for a range: those of its days and the day either
 * side (its local days span those UTC days); other partitions in several parts hold few of its
 * sessions, if any, and are read with the rest.
 */
export function keptPartitions(settled: Settled | undefined, common: CommonParams): [string, string[]][] {
  const shifted = (date: string, days: number) => {
    const d = new Date(`${date}T00:00:00Z`);
    d.setUTCDate(d.getUTCDate() + days);
    return d.toISOString().slice(0, 10).replaceAll('-', '');
  };
  return [...changingPartitions(settled)].filter(
    ([day]) =>
      (common.startDate === undefined || day >= shifted(common.startDate, -2)) &&
      (common.endDate === undefined || day <= shifted(common.endDate, 2)),
  );
}

/** Days since 1970 of a YYYYMMDD partition id; undefined for an id of another form. */
const yyyymmddDay = (partition: string) =>
  /^\d{8}$/.test(partition) ? epochDay(Number(partition)) : undefined;

/**
 * The partitions of a rollup whose counts still change, with their parts: those in several parts
 * (being written or merged), and those in one part of a day that did not end an hour ago. The
 * latter is today's merged into one part between two writes (after an hour without one): it is
 * not summarized (summaries.ts) and the next write gives it a part again, so it is kept apart as
 * it was in several parts, rather than read whole at every request. `epochDayOf` gives a
 * partition's UTC day in days since 1970 (undefined for a partition of another form): of a
 * YYYYMMDD id by default, `Number` for `visitor_hours`' days.
 */
export function changingPartitions(
  settled: Settled | undefined,
  epochDayOf: (partition: string) => number | undefined = yyyymmddDay,
  now = Date.now(),
): Map<string, string[]> {
  const changing = new Map(settled?.merging ?? []);
  settled?.partitions.forEach((partition, i) => {
    const day = epochDayOf(partition);
    if (day !== undefined && !epochDayEndedAnHourAgo(day, now)) changing.set(partition, [settled.parts[i]!]);
  });
  return changing;
}

/**
 * The counts (`count`) of `partition`'s sessions (or visitors) in `rollup`, whose active parts
 * are `names`, for a read keyed by `key` (the site, range and answer: what `count` depends on
 * besides the rows). From the latest kept state that still holds (stillHolds): nothing read
 * when no part was added since, else the sessions the added parts touch, now and as they were;
 * with none, the partition's parts read whole. Every read names its parts; one merged away
 * meanwhile would be missed, so the parts are looked up again after, and if any is gone the
 * partition is read whole (FINAL) and nothing kept.
 */
export async function partitionCounts(
  ch: ClickHouse,
  rollup: Rollup,
  siteId: number,
  partition: string,
  names: string[],
  key: string,
  count: CountRows,
): Promise<KeyedCounts> {
  const whole = () => count((p) => `_partition_id = ${p.bind('String', partition)}`);
  const blocks = names.map((n) => blocksOf(partition, n));
  if (names.length === 0 || blocks.some((b) => b === undefined)) return whole();
  const parts = blocks as Blocks[];
  const inParts = (p: Params, of: Blocks[]) =>
    `_part IN ${p.bind(
      'Array(String)',
      of.map((b) => b.name),
    )}`;
  const upTo = Math.max(...parts.map((b) => b.max));
  const holder = await kept.read(ch, key, async () => ({ states: [] }));
  const state = [...holder.states].sort((a, b) => b.upTo - a.upTo).find((s) => stillHolds(s, parts));
  let counts: KeyedCounts;
  // Counts not only of the rows read (unkept): taken as they are, not kept.
  let keep = true;
  if (state?.upTo === upTo) counts = state.counts;
  else if (state) {
    const added = parts.filter((b) => b.min > state.upTo);
    const before = parts.filter((b) => b.max <= state.upTo);
    // The sessions of the added parts, by their columns of the sort key (all but the site), so
    // that the other reads skip to their granules.
    const touched = (p: Params) =>
      `${rollup.entity} IN (SELECT ${rollup.entity} FROM ${rollup.table}
         WHERE site_id = ${p.bind('UInt32', siteId)} AND ${inParts(p, added)})`;
    const [now, then] = await Promise.all([
      count((p) => `${inParts(p, parts)} AND ${touched(p)}`),
      count((p) => `${inParts(p, before)} AND ${touched(p)}`),
    ]);
    if (now.unkept || then.unkept) return whole();
    counts = combineCounts(state.counts, now, then);
  } else {
    const read = await count((p) => inParts(p, parts));
    counts = read;
    keep = !read.unkept;
  }
  const [active] = await ch.query<{ n: number }>(
    `SELECT count() AS n FROM system.parts
     WHERE database = currentDatabase() AND table = {table:String} AND active AND name IN {parts:Array(String)}`,
    { table: rollup.table, parts: names },
  );
  if (Number(active?.n) !== names.length) return whole();
  if (!keep) return counts;
  holder.states = [...holder.states.filter((s) => s.upTo !== upTo), { upTo, parts, counts }]
    .sort((a, b) => a.upTo - b.upTo)
    .slice(-STATES);
  return counts;
}
