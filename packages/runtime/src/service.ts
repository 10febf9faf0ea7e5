import type { ClickHouse } from '@trackhouse/clickhouse';
import { type Config, ConfigError, createLogger, type Logger, loadConfig } from '@trackhouse/core';
import type { Hono } from 'hono';
import { openClickHouse, openRuntime, type Runtime } from './index';
import { listen, onShutdownSignal, type ShutdownReport } from './serve';

export interface ServiceOptions {
  service: string;
  /** Refuse to start without SECRET (ingest replicas must agree on visitor ids). */
  requireSecret?: boolean;
  /** The app, and what to close after the listener stops and before the stores close. */
  build: (runtime: Runtime, ch: ClickHouse) => Promise<BuiltService> | BuiltService;
}

export interface BuiltService {
  // biome-ignore lint/suspicious/noExplicitAny: any Hono app, whatever its env type
  app: Hono<any>;
  // biome-ignore lint/suspicious/noConfusingVoidType: closers that have nothing to report return Promise<void>
  close?: () => Promise<ShutdownReport | void>;
}

/** How long a start waits for what a previous process on the same DATA_DIR still holds. */
const START_WAIT_MS = 30_000;

/** A failure's reason, never empty: its message, else its name, with the causes it wraps. */
export function describeError(err: unknown): string {
  const parts: string[] = [];
  let current: unknown = err;
  for (let depth = 0; current !== undefined && current !== null && depth < 4; depth++) {
    if (current instanceof AggregateError && !current.message) {
      parts.push(current.errors.map((e) => describeError(e)).join('; '));
    } else if (current instanceof Error) {
      parts.push(current.message || current.name);
    } else {
      parts.push(String(current));
    }
    current = current instanceof Error ? current.cause : undefined;
  }
  return parts.filter(Boolean).join(': ') || 'no reason given (an empty error)';
}

/**
 * main() of a service process: config, clients, migrations, listen, clean shutdown.
 *
 * A stop may come at any moment, start-up included: the signal handlers are installed first,
 * and everything opened so far is closed in reverse order, so the embedded PostgreSQL this
 * process started is down before it exits (the next start must not find it still stopping).
 * The embedded ClickHouse engine is opened first and closed last: while a process holds it, it
 * may still be using or stopping its PostgreSQL, so a new start waits for it before anything else.
 */
export function runService(opts: ServiceOptions): void {
  let config: Config;
  try {
    config = loadConfig(process.env);
    if (opts.requireSecret && !config.SECRET) {
      throw new ConfigError([
        `SECRET: required when the ${opts.service} service runs on its own (replicas share it)`,
      ]);
    }
  } catch (err) {
    console.error(describeError(err));
    process.exit(1);
  }
  const log = createLogger(config.LOG_LEVEL, { service: opts.service });
  const stop = new AbortController();
  const closers: (() => Promise<void>)[] = [];
  let closing: Promise<void> | undefined;
  const closeAll = () => (closing ??= closeInReverse(closers));
  // Installed before the URL is printed, and before anything is opened: whoever started the
  // process may signal it at once.
  let starting: Promise<void> = Promise.resolve();
  const report: ShutdownReport = {};
  onShutdownSignal(log, async () => {
    stop.abort();
    await starting.catch(() => {});
    await closeAll();
    return report;
  });
  starting = start(opts, config, log, stop.signal, closers, report);
  starting.catch(async (err: unknown) => {
    // A stop asked for during start-up: the shutdown handler closes and exits.
    if (stop.signal.aborted) return;
    const reason = describeError(err);
    log.error({ err }, `start failed: ${reason}`);
    console.error(`trackhouse ${opts.service}: start failed: ${reason}`);
    await closeAll().catch((closeErr: unknown) =>
      log.error({ err: closeErr }, 'closing after a failed start'),
    );
    process.exit(1);
  });
}

/** Runs every closer, the last opened first, even when one fails; then throws the first failure. */
async function closeInReverse(closers: (() => Promise<void>)[]): Promise<void> {
  let failure: unknown;
  for (const close of [...closers].reverse()) {
    try {
      await close();
    } catch (err) {
      failure ??= err;
    }
  }
  if (failure !== undefined) throw failure;
}

async function start(
  opts: ServiceOptions,
  config: Config,
  log: Logger,
  signal: AbortSignal,
  closers: (() => Promise<void>)[],
  report: ShutdownReport,
): Promise<void> {
  const waits = {
    waitMs: START_WAIT_MS,
    signal,
    onWait: (message: string) => {
      log.warn(message);
      console.error(`trackhouse ${opts.service}: ${message}`);
    },
  };
  const ch = await openClickHouse(config, waits);
  closers.push(() => ch.close());
  signal.throwIfAborted();
  const runtime = await openRuntime(config, opts.service, { ...waits, log });
  closers.push(() => runtime.close());
  signal.throwIfAborted();
  const built = await opts.build(runtime, ch);
  const close = built.close;
  // What the service could not finish (rows left in the ingest buffer) is told at exit.
  if (close) closers.push(async () => void Object.assign(report, await close()));
  signal.throwIfAborted();
  const served = await listen(built.app, config.HOST, config.PORT);
  closers.push(() => served.close());
  signal.throwIfAborted();
  runtime.log.info({ url: served.url }, `${opts.service} listening`);
  console.log(`trackhouse ${opts.service} listening on ${served.url}`);
}
