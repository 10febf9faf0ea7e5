import type { ClickHouse } from '../../client';
import type { CommonParams } from '../builder';
import { type GoalDefinition, goalStats, pathPatternRegex } from '../goals';
import { overviewBucketed } from './buckets';
import { buildFunnelSummaries, type FunnelStep, funnelSummaryParameter } from './funnels';
import { JOURNEY_STEPS, journeys } from './journeys';
import { metric } from './metric';
import { buildSessionPages } from './pages';
import { type SessionRollup, settledParts } from './rollup';
import { listSessions } from './sessions';
import { SESSION_ATTRIBUTES } from './shared';
import type { SummarizedParameter } from './summaries';

/**
 * Building the per-day summaries (summaries.ts) ahead of the reads that would otherwise build
 * them, a week of days per read, while a dashboard waits: the query service runs this for each
 * site in the background (docs/decisions.md).
 *
 * Each summarized answer is read unfiltered over the last `days` UTC days until a read builds
 * nothing more; an answer is skipped when every settled day of that window already has its
 * summary, so a run with nothing to build costs a few small reads per site. The settled days of
 * the window without a build in `session_pages_by_country` (pages.ts) are built last.
 */

/** Every summarized answer, under the name its summaries are stored by, and the rollup they summarize. */
const SUMMARIZED: [SummarizedParameter, SessionRollup][] = [
  ['pathname', 'session_paths'],
  ['entry_page', 'session_paths'],
  ['exit_page', 'session_paths'],
  ['event_name', 'session_paths'],
  ['page_title', 'session_paths'],
  ['hostname', 'session_paths'],
  // Built by the page titles' read (metric.ts), which reads them (the next-day counts of
  // hostnames by the hostnames' read).
  ['uncovered_sessions:2', 'session_paths'],
  ['page_title:next_day', 'session_paths'],
  ['hostname:next_day', 'session_paths'],
  ...SESSION_ATTRIBUTES.map((a): [SummarizedParameter, SessionRollup] => [a, 'session_facts']),
  ['sessions', 'session_facts'],
  ['quarters', 'session_paths'],
  ['goals', 'sessions'],
  // Journeys of other lengths are summarized by the reads asking for them.
  [`journeys:${JOURNEY_STEPS}`, 'session_paths'],
];

const DAY_MS = 86_400_000;
/** A day is summarized once it ended an hour ago (summarizedDays). */
const SETTLE_MS = 3_600_000;
/** Most days one read builds (summarizedDays). */
const DAYS_PER_READ = 7;

export interface SummaryBuildOptions {
  /** UTC days back from `now`'s, today included. */
  days: number;
  /** The site's path goals (their summaries hold a value per pattern). */
  pathGoals?: GoalDefinition[];
  /** The steps of the site's saved funnels (each has summaries of its own). */
  funnels?: FunnelStep[][];
  now?: Date;
  signal?: AbortSignal;
}

export interface SummaryBuildReport {
  /** Answers read to build summaries. */
  reads: number;
  /** Summary rows stored by those reads (keys new to the table). */
  rows: number;
  /** Days built into `session_pages_by_country` (pages.ts). */
  pageDays: number;
}

const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** The YYYYMMDD partition of a UTC day, as the rollups name it. */
const partitionOf = (ms: number) => isoDay(ms).replaceAll('-', '');

/**
 * The summaries of a site's settled days in the last `options.days` UTC days that are missing,
 * built by reading each summarized answer over that window. Nothing on a cluster or without the
 * rollups, where no answer reads summaries.
 */
export async function buildSummaries(
  ch: ClickHouse,
  siteId: number,
  options: SummaryBuildOptions,
): Promise<SummaryBuildReport> {
  const report = { reads: 0, rows: 0, pageDays: 0 };
  if (ch.cluster || ch.rollups === false) return report;
  const now = (options.now ?? new Date()).getTime();
  const today = Math.floor(now / DAY_MS) * DAY_MS;
  const first = today - (options.days - 1) * DAY_MS;
  const common: CommonParams = {
    startDate: isoDay(first),
    endDate: isoDay(today),
    timeZone: 'UTC',
    filters: [],
  };
  const patterns = [...new Set((options.pathGoals ?? []).map(goalPattern))];
  // Saved funnels that have summaries, once per parameter (two funnels may match alike).
  const funnels = new Map<SummarizedParameter, FunnelStep[]>();
  for (const steps of options.funnels ?? []) {
    const parameter = funnelSummaryParameter(steps);
    if (parameter) funnels.set(parameter, steps);
  }
  const summarized: [SummarizedParameter, SessionRollup][] = [
    ...SUMMARIZED,
    ...[...funnels.keys()].map((f): [SummarizedParameter, SessionRollup] => [f, 'session_paths']),
  ];
  const missing = await missingSummaries(ch, siteId, first, now, patterns, summarized);
  const read = (parameter: SummarizedParameter): Promise<unknown> =>
    parameter === 'goals'
      ? goalStats(ch, siteId, common, options.pathGoals ?? [])
      : parameter === 'sessions'
        ? listSessions(ch, siteId, common, { limit: 1, offset: 0 })
        : parameter === 'quarters'
          ? overviewBucketed(ch, siteId, common, 'day')
          : isJourneys(parameter)
            ? journeys(ch, siteId, common, { steps: JOURNEY_STEPS, limit: 1 })
            : isFunnel(parameter)
              ? buildFunnelSummaries(ch, siteId, common, funnels.get(parameter) ?? [])
              : metric(ch, siteId, common, metricOf(parameter), { limit: 1, offset: 0 });
  for (const [parameter] of summarized) {
    if (!missing.has(parameter) || (parameter === 'goals' && patterns.length === 0)) continue;
    // Each read builds a week of days at most: read until one stores nothing.
    for (let i = 0; i <= Math.ceil(options.days / DAYS_PER_READ); i++) {
      options.signal?.throwIfAborted();
      const before = await storedRows(ch, siteId, parameter);
      await read(parameter);
      report.reads++;
      const added = (await storedRows(ch, siteId, parameter)) - before;
      if (added <= 0) break;
      report.rows += added;
    }
  }
  report.pageDays = await buildSessionPages(ch, siteId, common, options.signal);
  return report;
}

/** The breakdown whose read builds a summary of `parameter`. */
const metricOf = (parameter: SummarizedParameter) =>
  (parameter === 'uncovered_sessions:2'
    ? 'page_title'
    : parameter.endsWith(':next_day')
      ? parameter.slice(0, -':next_day'.length)
      : parameter) as Parameters<typeof metric>[3];

const isJourneys = (parameter: SummarizedParameter): parameter is `journeys:${number}` =>
  parameter.startsWith('journeys:');

const isFunnel = (parameter: SummarizedParameter): parameter is `funnel:${string}` =>
  parameter.startsWith('funnel:');

const goalPattern = (goal: GoalDefinition) =>
  pathPatternRegex((goal as Extract<GoalDefinition, { goalType: 'path' }>).config.pathPattern);

/**
 * The summary rows of a parameter stored for this site, each key once: the engine's merges of
 * replaced rows (a day summarized again) do not make a read that stored rows look as if it
 * stored none.
 */
async function storedRows(ch: ClickHouse, siteId: number, parameter: SummarizedParameter): Promise<number> {
  const [row] = await ch.query<{ n: number }>(
    `SELECT uniqExact(partition, source_part, totals, value) AS n FROM metric_summaries
     WHERE site_id = {site:UInt32} AND parameter = {parameter:String}`,
    { site: siteId, parameter },
  );
  return Number(row?.n ?? 0);
}

/**
 * The summarized answers with a settled day of the window that has no summary of its current
 * part for this site (for the goals: one lacking a pattern; for the session totals: one of the
 * count alone, as they were first stored). A settled day is a partition alone
 * in one part, from `first` on, that ended an hour before `now`.
 */
async function missingSummaries(
  ch: ClickHouse,
  siteId: number,
  first: number,
  now: number,
  patterns: string[],
  summarized: [SummarizedParameter, SessionRollup][],
): Promise<Set<SummarizedParameter>> {
  const from = partitionOf(first);
  const settledBy = partitionOf(now - SETTLE_MS - DAY_MS);
  const eligible: { table: SessionRollup; part: string }[] = [];
  for (const table of new Set(summarized.map(([, t]) => t))) {
    const { partitions, parts } = await settledParts(ch, table);
    partitions.forEach((partition, i) => {
      if (/^\d{8}$/.test(partition) && partition >= from && partition <= settledBy)
        eligible.push({ table, part: parts[i]! });
    });
  }
  const stored = await ch.query<{ parameter: string; part: string; values: string[] }>(
    `SELECT parameter, source_part AS part,
       groupUniqArrayIf(value, parameter IN ('goals', 'sessions') AND totals = 0) AS values
     FROM metric_summaries
     WHERE site_id = {site:UInt32} AND source_part IN {parts:Array(String)}
     GROUP BY parameter, part
     HAVING countIf(totals = 1) > 0`,
    { site: siteId, parts: [...new Set(eligible.map((r) => r.part))] },
  );
  const held = new Map(stored.map((r) => [`${r.parameter}/${r.part}`, r.values]));
  // Values a summary must hold besides its totals: the goals' patterns, the session totals' row.
  const required = (parameter: SummarizedParameter) =>
    parameter === 'goals' ? patterns : parameter === 'sessions' ? [''] : [];
  const missing = new Set<SummarizedParameter>();
  for (const [parameter, table] of summarized) {
    for (const r of eligible) {
      if (r.table !== table) continue;
      const values = held.get(`${parameter}/${r.part}`);
      if (!values || required(parameter).some((v) => !values.includes(v))) {
        missing.add(parameter);
        break;
      }
    }
  }
  return missing;
}
