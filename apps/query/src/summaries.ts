import {
  buildSummaries,
  type ClickHouse,
  type GoalDefinition,
  mergeVisitorDays,
  mergeVisitorHours,
} from '@trackhouse/clickhouse';
import type { Config, Logger } from '@trackhouse/core';
import { listFunnels, listGoals, listSites, type Pool } from '@trackhouse/postgres';
import { Counter, Gauge, type Registry } from 'prom-client';
import { boundedReads, type ReadSettings } from './reads';

export type SummarySettings = ReadSettings & Pick<Config, 'SUMMARIES_INTERVAL_S' | 'SUMMARIES_DAYS'>;

export interface SummaryBuilderDeps {
  ch: ClickHouse;
  sql: Pool;
  log: Logger;
  registry: Registry;
  settings: SummarySettings;
}

/** A build reads a week of days per answer: it may take longer than a dashboard's read. */
const BUILD_READ_TIMEOUT_S = 600;
/** Queued for every site. */
const ALL_SITES = 0;

/**
 * Builds the per-day summaries of the unfiltered answers in the background
 * (`buildSummaries`), so that a dashboard's read finds its settled days summarized instead of
 * building a week of them while it waits: every site at start and every SUMMARIES_INTERVAL_S
 * seconds (0: never), and a site again when its goals or saved funnels change. One site at a
 * time, one read at a time, so the service's other reads keep the rest of the query pool. Each
 * run over every site first merges the recent windows of `visitor_days` and days of
 * `visitor_hours` (mergeVisitorDays, mergeVisitorHours).
 */
export class SummaryBuilder {
  private readonly queue = new Set<number>();
  private running: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly stopped = new AbortController();
  private readonly ch: ClickHouse;
  private readonly pending: Gauge;
  private readonly reads: Counter;
  private readonly rows: Counter;
  private readonly failures: Counter;

  constructor(private readonly deps: SummaryBuilderDeps) {
    this.ch = boundedReads(deps.ch, {
      ...deps.settings,
      CLICKHOUSE_READ_TIMEOUT_S: Math.max(deps.settings.CLICKHOUSE_READ_TIMEOUT_S, BUILD_READ_TIMEOUT_S),
    });
    const registers = [deps.registry];
    this.pending = new Gauge({
      name: 'trackhouse_summary_builds_pending',
      help: 'Background summary builds queued or running (one site, or every site)',
      registers,
    });
    this.reads = new Counter({
      name: 'trackhouse_summary_reads_total',
      help: 'Answers read by the background builder to build per-day summaries',
      registers,
    });
    this.rows = new Counter({
      name: 'trackhouse_summary_rows_total',
      help: 'Summary rows stored by the background builder',
      registers,
    });
    this.failures = new Counter({
      name: 'trackhouse_summary_build_failures_total',
      help: 'Background summary builds that failed (retried at the next run)',
      registers,
    });
  }

  /** Whether it builds at all: a cluster and QUERY_ROLLUPS=false read no summaries. */
  get enabled(): boolean {
    return this.deps.settings.SUMMARIES_INTERVAL_S > 0 && !this.ch.cluster && this.ch.rollups !== false;
  }

  /** Queues every site now and every SUMMARIES_INTERVAL_S seconds. */
  start(): this {
    if (!this.enabled) return this;
    this.schedule(ALL_SITES);
    this.timer = setInterval(() => this.schedule(ALL_SITES), this.deps.settings.SUMMARIES_INTERVAL_S * 1000);
    this.timer.unref();
    return this;
  }

  /** Queues one site (its goals or saved funnels changed), or every site. */
  schedule(siteId: number = ALL_SITES): void {
    if (!this.enabled || this.stopped.signal.aborted) return;
    this.queue.add(siteId);
    this.pending.set(this.queue.size + (this.running ? 1 : 0));
    this.running ??= this.drain().finally(() => {
      this.running = undefined;
      this.pending.set(this.queue.size);
      if (this.queue.size > 0) this.schedule([...this.queue][0]);
    });
  }

  /** Resolves once nothing is queued or running. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  /** Stops the timer and the run under way (between two reads). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.stopped.abort();
    this.queue.clear();
    await this.running;
  }

  private async drain(): Promise<void> {
    for (const next of this.queue) {
      this.queue.delete(next);
      this.pending.set(this.queue.size + 1);
      if (next === ALL_SITES) await this.mergeWindows();
      const sites = next === ALL_SITES ? await this.siteIds() : [next];
      for (const siteId of sites) {
        if (this.stopped.signal.aborted) return;
        // A site queued alone meanwhile is built here.
        if (next === ALL_SITES) this.queue.delete(siteId);
        await this.buildSite(siteId);
      }
    }
  }

  /**
   * The recent windows of `visitor_days` and days of `visitor_hours` merged, one part each
   * (mergeVisitorDays, mergeVisitorHours), at every run.
   */
  private async mergeWindows(): Promise<void> {
    try {
      const merged = await mergeVisitorDays(this.ch, this.deps.settings.SUMMARIES_DAYS);
      if (merged > 0) this.deps.log.info({ partitions: merged }, 'visitor days merged');
      const hours = await mergeVisitorHours(this.ch, this.deps.settings.SUMMARIES_DAYS);
      if (hours > 0) this.deps.log.info({ partitions: hours }, 'visitor hours merged');
    } catch (err) {
      this.failures.inc();
      this.deps.log.warn(
        { err },
        'summaries: merging the visitor days or hours failed (retried at the next run)',
      );
    }
  }

  private async siteIds(): Promise<number[]> {
    try {
      return (await listSites(this.deps.sql)).map((s) => s.siteId);
    } catch (err) {
      this.failures.inc();
      this.deps.log.warn({ err }, 'summaries: listing the sites failed');
      return [];
    }
  }

  private async buildSite(siteId: number): Promise<void> {
    const started = performance.now();
    try {
      const goals = await listGoals(this.deps.sql, siteId);
      const pathGoals = goals
        .filter((g) => g.goalType === 'path')
        .map((g) => ({ goalType: g.goalType, config: g.config }) as GoalDefinition);
      const funnels = (await listFunnels(this.deps.sql, siteId)).map((f) => f.steps);
      const report = await buildSummaries(this.ch, siteId, {
        days: this.deps.settings.SUMMARIES_DAYS,
        pathGoals,
        funnels,
        signal: this.stopped.signal,
      });
      this.reads.inc(report.reads);
      this.rows.inc(report.rows);
      if (report.reads > 0 || report.pageDays > 0) {
        this.deps.log.info(
          { siteId, ...report, ms: Math.round(performance.now() - started) },
          'summaries built',
        );
      }
    } catch (err) {
      if (this.stopped.signal.aborted) return;
      this.failures.inc();
      this.deps.log.warn({ err, siteId }, 'summaries: building a site failed (retried at the next run)');
    }
  }
}
