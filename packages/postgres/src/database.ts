import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import { type EmbeddedOptions, type EmbeddedServer, startEmbeddedPostgres } from './embedded';

/** A connection pool or a transaction: repositories work inside either. */
export type Sql = postgres.Sql | postgres.TransactionSql;
export type Pool = postgres.Sql;

export interface Database {
  readonly kind: 'server' | 'embedded';
  readonly sql: Pool;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export type DatabaseOptions =
  | { url: string; max?: number }
  | { dataDir: string; max?: number; embedded?: EmbeddedOptions };

export function connect(url: string, max = 10): Pool {
  return postgres(url, {
    max,
    transform: postgres.camel,
    onnotice: () => {},
    // count(*) and other int8 values as JS numbers: every count here stays below 2^53.
    types: {
      bigint: { to: 20, from: [20], serialize: (v: number) => String(v), parse: (v: string) => Number(v) },
    },
  });
}

/**
 * Errors of a server that is going away or not there yet: the embedded server a previous
 * process is stopping right now (cannot_connect_now, admin_shutdown, refused or cut connections).
 */
const TRANSIENT = new Set([
  '57P03',
  '57P01',
  'ECONNREFUSED',
  'ECONNRESET',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
]);

/** DATABASE_URL when given, else the embedded server under DATA_DIR (started or reused). */
export async function openDatabase(opts: DatabaseOptions): Promise<Database> {
  if ('url' in opts) return wrap(connect(opts.url, opts.max), undefined);
  const embedded = opts.embedded ?? {};
  const deadline = Date.now() + (embedded.waitMs ?? 30_000);
  for (;;) {
    const server = await startEmbeddedPostgres(opts.dataDir, {
      ...embedded,
      waitMs: Math.max(0, deadline - Date.now()),
    });
    const sql = connect(server.url, opts.max);
    try {
      await sql`select 1`;
      return wrap(sql, server);
    } catch (err) {
      await sql.end({ timeout: 1 }).catch(() => {});
      const code = (err as { code?: string }).code ?? '';
      // Found running, then stopped under us by the process it belonged to: start over, which
      // waits for that stop to finish and starts a server of our own.
      if (server.origin === 'started' || !TRANSIENT.has(code) || Date.now() >= deadline) {
        await server.stop();
        throw err;
      }
      embedded.onWait?.(`embedded PostgreSQL is shutting down (${code}), waiting…`);
      await server.stop(); // taken over: wait until it is down; shared: nothing to do
      await sleep(200, undefined, { signal: embedded.signal });
    }
  }
}

function wrap(sql: Pool, server: EmbeddedServer | undefined): Database {
  return {
    kind: server ? 'embedded' : 'server',
    sql,
    async ping() {
      await sql`select 1`;
    },
    async close() {
      await sql.end({ timeout: 5 });
      await server?.stop();
    },
  };
}
