import type { ClickHouse } from '@trackhouse/clickhouse';
import { ConfigError, loadConfig } from '@trackhouse/core';
import type { Hono } from 'hono';
import { openClickHouse, openRuntime, type Runtime } from './index';
import { listen, onShutdownSignal } from './serve';

export interface ServiceOptions {
  service: string;
  /** Refuse to start without SECRET (ingest replicas must agree on visitor ids). */
  requireSecret?: boolean;
  // biome-ignore lint/suspicious/noExplicitAny: any Hono app, whatever its env type
  build: (runtime: Runtime, ch: ClickHouse) => Hono<any> | Promise<Hono<any>>;
  /** Runs after the listener has stopped accepting, before the stores close. */
  beforeClose?: () => Promise<void>;
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
  const app = await opts.build(runtime, ch);
  const served = await listen(app, config.HOST, config.PORT);
  runtime.log.info({ url: served.url }, `${opts.service} listening`);
  console.log(`trackhouse ${opts.service} listening on ${served.url}`);
  onShutdownSignal(runtime.log, async () => {
    await served.close();
    await opts.beforeClose?.();
    await ch.close();
    await runtime.close();
  });
}
