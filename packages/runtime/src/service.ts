import type { ClickHouse } from '@trackhouse/clickhouse';
import { ConfigError, loadConfig } from '@trackhouse/core';
import type { Hono } from 'hono';
import { openClickHouse, openRuntime, type Runtime } from './index';
import { listen, onShutdownSignal, type Served } from './serve';

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
  close?: () => Promise<void>;
}

/** main() of a service process: config, clients, migrations, listen, clean shutdown. */
export function runService(opts: ServiceOptions): void {
  start(opts).catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}

async function start(opts: ServiceOptions): Promise<void> {
  const config = loadConfig(process.env);
  if (opts.requireSecret && !config.SECRET) {
    throw new ConfigError([
      `SECRET: required when the ${opts.service} service runs on its own (replicas share it)`,
    ]);
  }
  const runtime = await openRuntime(config, opts.service);
  const ch = await openClickHouse(config).catch(async (err: unknown) => {
    await runtime.close();
    throw err;
  });
  const built = await opts.build(runtime, ch);
  let served: Served | undefined;
  // Installed before the URL is printed: whoever saw it may signal at once.
  onShutdownSignal(runtime.log, async () => {
    await served?.close();
    await built.close?.();
    await ch.close();
    await runtime.close();
  });
  served = await listen(built.app, config.HOST, config.PORT);
  runtime.log.info({ url: served.url }, `${opts.service} listening`);
  console.log(`trackhouse ${opts.service} listening on ${served.url}`);
}
