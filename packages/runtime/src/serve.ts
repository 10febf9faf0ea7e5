import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Logger } from '@trackhouse/core';
import type { Hono } from 'hono';

export interface Served {
  url: string;
  /** Stops accepting connections and waits for open requests to finish. */
  close(): Promise<void>;
}

// biome-ignore lint/suspicious/noExplicitAny: any Hono app, whatever its env type
type AnyHono = Hono<any>;

export async function listen(app: AnyHono, host: string, port: number): Promise<Served> {
  return new Promise((resolveServed, reject) => {
    const server = serve({ fetch: app.fetch, hostname: host, port }, (info: AddressInfo) => {
      const shownHost = info.family === 'IPv6' ? `[${info.address}]` : info.address;
      resolveServed({
        url: `http://${shownHost}:${info.port}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            // Idle keep-alive sockets would hold close() open until they time out.
            if ('closeIdleConnections' in server) server.closeIdleConnections();
          }),
      });
    });
    server.once('error', reject);
  });
}

/** What a stopping service could not finish; it is picked up again at the next start. */
export interface ShutdownReport {
  /** Acknowledged events still in the ingest write-ahead buffer, not in ClickHouse. */
  leftInBuffer?: { segments: number; rows: number; bytes: number };
}

/**
 * Runs `shutdown` once on SIGTERM or SIGINT, then exits: 0 when it completed, 1 when it threw.
 * Launchers (pnpm, tsx) and terminals deliver one signal several times in a burst, so repeats
 * are ignored; a signal sent again after 3 seconds forces an immediate exit.
 */
export function onShutdownSignal(
  log: Logger,
  // biome-ignore lint/suspicious/noConfusingVoidType: shutdowns that have nothing to report return Promise<void>
  shutdown: () => Promise<ShutdownReport | void>,
): void {
  let firstAt = 0;
  const handler = (signal: NodeJS.Signals) => {
    if (firstAt > 0) {
      if (Date.now() - firstAt < 3000) return;
      log.warn({ signal }, 'signal repeated during shutdown, exiting now');
      process.exit(1);
    }
    firstAt = Date.now();
    log.info({ signal }, 'shutting down');
    shutdown().then(
      (report) => {
        const left = report?.leftInBuffer;
        if (left && left.segments > 0) {
          log.warn(left, `stopped; ${left.rows} rows left in the buffer, replayed at next start`);
        } else {
          log.info('stopped cleanly');
        }
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}
