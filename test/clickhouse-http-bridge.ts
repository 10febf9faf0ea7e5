import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGunzip, gzipSync } from 'node:zlib';
import { Session } from 'chdb';

/**
 * A test-only stand-in for a ClickHouse server: the subset of ClickHouse's HTTP interface that
 * `@clickhouse/client` uses, answered by the embedded engine. It lets the server form of
 * `createClickHouse` (HTTP, URL settings, `param_*` parameters, streamed insert bodies, error
 * headers) run against the real engine. It is not a server: one engine call at a time, no
 * sessions, no users beyond the one given, no progress headers (docs/scaling.md says what it
 * proves and what it does not).
 */
export interface ClickHouseBridge {
  url: string;
  /** Requests answered so far (a test can see that the HTTP path was really taken). */
  readonly requests: number;
  close(): Promise<void>;
}

/** URL parameters of the HTTP interface that are not query settings. */
const NOT_SETTINGS = new Set([
  'query',
  'query_id',
  'database',
  'default_format',
  'session_id',
  'session_timeout',
  'session_check',
  'role',
  'user',
  'password',
  'quota_key',
  'compress',
  'decompress',
  'buffer_size',
  'wait_end_of_query',
  'enable_http_compression',
  'http_zlib_compression_level',
  'send_progress_in_http_headers',
  'http_headers_progress_interval_ms',
  'output_format_parallel_formatting',
]);

// The server answers these with 4xx; everything else is a 500 (the client reads the body either way).
const STATUS_OF_CODE: Record<number, number> = { 62: 400, 60: 404, 81: 404, 516: 403, 456: 400 };

const VERSION = 'trackhouse test bridge over the embedded engine';

export async function startClickHouseBridge(opts: {
  dataDir: string;
  username?: string;
  password?: string;
  /**
   * Stand in for one node of a cluster of that name: the engine is given a one-shard,
   * one-replica cluster pointing at itself (so `Distributed` tables read and insert through
   * the engine's distributed code path, locally), and the cluster DDL is reduced to what one
   * engine without Keeper can run (singleHostForm). The engine runs in this process: one
   * cluster configuration per process.
   */
  cluster?: string;
}): Promise<ClickHouseBridge> {
  const scratch = join(opts.dataDir, 'bridge-bodies');
  await mkdir(scratch, { recursive: true });
  const connectionArgs: string[] = [];
  if (opts.cluster) {
    const config = join(opts.dataDir, 'bridge-cluster.xml');
    await writeFile(config, clusterConfig(opts.cluster));
    connectionArgs.push(`--config-file=${config}`);
  }
  const session = new Session(join(opts.dataDir, 'engine'), { connectionArgs });
  const cluster = opts.cluster;
  const username = opts.username ?? 'default';
  const password = opts.password ?? '';
  // Settings and parameters are session state in the engine: what one request set is reset
  // before the next, so that each request sees only its own (as on a server).
  let sticky = new Set<string>();
  let queue: Promise<unknown> = Promise.resolve();
  let requests = 0;
  const exclusive = <T>(work: () => Promise<T>): Promise<T> => {
    const run = queue.then(work, work);
    queue = run.catch(() => {});
    return run;
  };

  const answer = async (req: IncomingMessage, res: ServerResponse) => {
    requests++;
    const url = new URL(req.url ?? '/', 'http://bridge');
    if (url.pathname === '/ping') {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=UTF-8' }).end('Ok.\n');
      return;
    }
    if (!authorized(req, username, password)) {
      fail(res, 516, `Code: 516. DB::Exception: ${username}: Authentication failed. (AUTHENTICATION_FAILED)`);
      return;
    }
    const queryId = url.searchParams.get('query_id') ?? randomUUID();
    const body = req.headers['content-encoding'] === 'gzip' ? req.pipe(createGunzip()) : req;
    const urlQuery = url.searchParams.get('query');
    const bodyPath = join(scratch, `${queryId}-${randomUUID()}`);
    try {
      let sql: string;
      if (urlQuery === null) {
        sql = await text(body);
      } else {
        // The body is data: an insert reads it from a file (as the server streams it into
        // the table); any other statement gets it appended, as the server does.
        await pipeline(body, createWriteStream(bodyPath));
        const insert = /^\s*(INSERT\s+INTO\s+[\s\S]+?)(\s+SETTINGS\s+[\s\S]+?)?\s+FORMAT\s+(\w+)\s*$/i.exec(
          urlQuery,
        );
        const size = (await stat(bodyPath)).size;
        if (insert) {
          sql = `${insert[1]} FROM INFILE ${literal(bodyPath)}${insert[2] ?? ''} FORMAT ${insert[3]}`;
        } else if (size > 0) {
          sql = `${urlQuery}\n${await text(createReadStream(bodyPath))}`;
        } else {
          sql = urlQuery;
        }
      }
      const params = new Map<string, string>();
      const settings = new Map<string, string>();
      for (const [key, value] of url.searchParams) {
        if (key.startsWith('param_')) params.set(key.slice(6), value);
        else if (!NOT_SETTINGS.has(key)) settings.set(key, value);
      }
      if (cluster) sql = singleHostForm(sql, cluster);
      const missing = [...sql.matchAll(/\{(\w+):/g)].map((m) => m[1]!).find((name) => !params.has(name));
      if (missing !== undefined) {
        fail(
          res,
          456,
          `Code: 456. DB::Exception: Substitution \`${missing}\` is not set. (UNKNOWN_QUERY_PARAMETER)`,
        );
        return;
      }
      const format = url.searchParams.get('default_format') ?? 'TabSeparated';
      const database = url.searchParams.get('database') ?? 'default';
      const result = await exclusive(async () => {
        const prefix: string[] = [`USE ${identifier(database)}`];
        for (const name of sticky) if (!settings.has(name)) prefix.push(`SET ${name} = DEFAULT`);
        for (const [name, value] of settings) prefix.push(`SET ${identifier(name)} = ${settingValue(value)}`);
        for (const [name, value] of params) prefix.push(`SET param_${identifier(name)} = ${literal(value)}`);
        sticky = new Set(settings.keys());
        return session.queryAsync(`${prefix.join('; ')}; ${sql}`, { format });
      });
      const bytes = Buffer.from(result.bytes());
      const isInsert = /^\s*INSERT\b/i.test(sql);
      const rows = String(result.rowsRead ?? 0);
      const summary = {
        read_rows: rows,
        read_bytes: String(result.bytesRead ?? 0),
        written_rows: isInsert ? rows : '0',
        written_bytes: isInsert ? String(result.bytesRead ?? 0) : '0',
        total_rows_to_read: '0',
        result_rows: isInsert ? '0' : rows,
        result_bytes: String(bytes.length),
        elapsed_ns: String(Math.round((result.elapsed ?? 0) * 1e9)),
      };
      const compress =
        url.searchParams.get('enable_http_compression') === '1' &&
        /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
      res.writeHead(200, {
        'Content-Type': 'text/plain; charset=UTF-8',
        'X-ClickHouse-Query-Id': queryId,
        'X-ClickHouse-Format': format,
        'X-ClickHouse-Summary': JSON.stringify(summary),
        ...(compress ? { 'Content-Encoding': 'gzip' } : {}),
      });
      res.end(compress ? gzipSync(bytes) : bytes);
    } catch (err) {
      const code = Number(
        (err as { clickhouseCode?: unknown }).clickhouseCode ??
          /Code: (\d+)\./.exec(String(err))?.[1] ??
          1002,
      );
      fail(res, code, err instanceof Error ? err.message : String(err));
    } finally {
      await rm(bodyPath, { force: true });
    }
  };

  // A ClickHouse server takes URLs up to 1 MiB (`http_max_uri_size`); bound parameters travel
  // in the URL. Node's default (16 KiB of headers) would refuse requests the server answers.
  const server = createServer({ maxHeaderSize: 1024 * 1024 }, (req, res) => {
    answer(req, res).catch((err) => {
      if (!res.headersSent) fail(res, 1002, String(err));
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get requests() {
      return requests;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await queue;
      session.close();
      await rm(scratch, { recursive: true, force: true });
    },
  };
}

function fail(res: ServerResponse, code: number, message: string): void {
  res
    .writeHead(STATUS_OF_CODE[code] ?? 500, {
      'Content-Type': 'text/plain; charset=UTF-8',
      'X-ClickHouse-Exception-Code': String(code),
    })
    .end(`${message} (version ${VERSION})\n`);
}

function authorized(req: IncomingMessage, username: string, password: string): boolean {
  const header = req.headers.authorization;
  const given = header?.startsWith('Basic ')
    ? Buffer.from(header.slice(6), 'base64').toString('utf8')
    : `${req.headers['x-clickhouse-user'] ?? 'default'}:${req.headers['x-clickhouse-key'] ?? ''}`;
  return given === `${username}:${password}`;
}

async function text(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

function literal(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

function identifier(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`bad identifier ${JSON.stringify(name)}`);
  return name;
}

/** A setting's URL value as SQL: numbers as they are, anything else as a string literal. */
function settingValue(value: string): string {
  return /^-?\d+(\.\d+)?$/.test(value) ? value : literal(value);
}

/**
 * A cluster of one node that is this engine: a replica on the engine's own TCP port counts as
 * local, so queries on it run in-process (nothing listens on the port).
 */
function clusterConfig(cluster: string): string {
  return `<clickhouse>
  <tcp_port>9000</tcp_port>
  <macros><shard>01</shard><replica>bridge</replica></macros>
  <remote_servers>
    <${cluster}>
      <shard><internal_replication>true</internal_replication>
        <replica><host>localhost</host><port>9000</port></replica>
      </shard>
    </${cluster}>
  </remote_servers>
</clickhouse>
`;
}

/**
 * What one engine without Keeper and without a DDL queue can run of the cluster DDL: no
 * `ON CLUSTER`, and `Replicated*MergeTree` as the same engine unreplicated (with its own
 * deduplication window). Tables, Distributed tables, views and queries are otherwise as generated.
 */
export function singleHostForm(sql: string, cluster: string): string {
  return sql
    .replace(new RegExp(`\\s+ON\\s+CLUSTER\\s+'?${cluster}'?`, 'gi'), '')
    .replace(/\bReplicated(\w*MergeTree)\('[^']*',\s*'[^']*'(?:,\s*)?/g, '$1(')
    .replace(/\b(\w*MergeTree)\(\)/g, '$1')
    .replace(/\breplicated_deduplication_window\b/g, 'non_replicated_deduplication_window');
}
