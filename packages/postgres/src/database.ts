import postgres from 'postgres';
import { type EmbeddedServer, startEmbeddedPostgres } from './embedded';

/** A connection pool or a transaction: repositories work inside either. */
export type Sql = postgres.Sql | postgres.TransactionSql;
export type Pool = postgres.Sql;

export interface Database {
  readonly kind: 'server' | 'embedded';
  readonly sql: Pool;
  ping(): Promise<void>;
  close(): Promise<void>;
}

export type DatabaseOptions = { url: string; max?: number } | { dataDir: string; max?: number };

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

/** DATABASE_URL when given, else the embedded server under DATA_DIR (started or reused). */
export async function openDatabase(opts: DatabaseOptions): Promise<Database> {
  let server: EmbeddedServer | undefined;
  let url: string;
  if ('url' in opts) {
    url = opts.url;
  } else {
    server = await startEmbeddedPostgres(opts.dataDir);
    url = server.url;
  }
  const sql = connect(url, opts.max);
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
