import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClickHouse, embeddedClickHousePath } from '@trackhouse/clickhouse';
import { runEntry, type StartedServer, startEntry, startFlags } from '../test/processes';
import { makeEvents } from './payloads';

const HERE = fileURLToPath(new URL('.', import.meta.url));

interface WrkResult {
  requests: number;
  duration_us: number;
  non2xx: number;
  socket_errors: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  max_us: number;
}

function ensureWrk(): string {
  const found = spawnSync('sh', ['-c', 'command -v wrk']).stdout.toString().trim();
  if (found) return found;
  console.log('installing wrk (apt-get install wrk)…');
  execFileSync('sh', [
    '-c',
    'apt-get install -y wrk >/dev/null 2>&1 || (apt-get update >/dev/null && apt-get install -y wrk >/dev/null)',
  ]);
  return 'wrk';
}

function runWrk(
  url: string,
  opts: { bodiesFile: string; path: string; seconds: number; connections: number; auth?: string },
): WrkResult {
  const out = execFileSync(
    ensureWrk(),
    [
      '-t1',
      `-c${opts.connections}`,
      `-d${opts.seconds}s`,
      '--timeout',
      '5s',
      '-s',
      join(HERE, 'wrk-bodies.lua'),
      url,
    ],
    {
      env: {
        ...process.env,
        BODIES_FILE: opts.bodiesFile,
        TARGET_PATH: opts.path,
        AUTH_HEADER: opts.auth ?? '',
        FORWARDED_FOR: '1',
      },
    },
  ).toString();
  const line = out.split('\n').find((l) => l.startsWith('WRK_RESULT '));
  if (!line) throw new Error(`wrk printed no result:\n${out}`);
  return JSON.parse(line.slice('WRK_RESULT '.length)) as WrkResult;
}

const ms = (us: number) => (us / 1000).toFixed(2);

/**
 * `pnpm bench ingest [--batch] [--seconds N] [--connections N]`: the standalone server and a
 * trivial Hono handler, driven by wrk with the same realistic mix; prints throughput, latency,
 * non-2xx, acknowledged vs stored, and the ratio to the trivial handler.
 */
export async function benchIngest(args: string[]): Promise<void> {
  const batch = args.includes('--batch');
  const seconds = Number(args[args.indexOf('--seconds') + 1]) || 15;
  const connections = Number(args[args.indexOf('--connections') + 1]) || 50;
  const batchSize = 100;
  const dataDir = mkdtempSync(join(tmpdir(), 'trackhouse-bench-'));
  // The same runtime settings as `pnpm start` (package.json), its Node flags with startFlags().
  const env = { DATA_DIR: dataDir, LOG_LEVEL: 'info', UV_THREADPOOL_SIZE: '16' };
  let server: StartedServer | undefined;
  let trivial: StartedServer | undefined;
  try {
    const init = await runEntry('apps/cli/src/main.ts', ['init', '--domain', 'bench.test', '--json'], env);
    if (init.code !== 0) throw new Error(`init failed: ${init.stderr}${init.stdout}`);
    const { siteId, apiKey } = JSON.parse(init.stdout) as { siteId: number; apiKey: string };

    const events = makeEvents(siteId, batch ? 20_000 : 5_000);
    const bodiesFile = join(dataDir, 'bodies.ndjson');
    const lines: string[] = [];
    if (batch) {
      for (let i = 0; i < events.length; i += batchSize)
        lines.push(JSON.stringify({ events: events.slice(i, i + batchSize) }));
    } else {
      for (const e of events) lines.push(JSON.stringify(e));
    }
    writeFileSync(bodiesFile, `${lines.join('\n')}\n`);
    const path = batch ? '/api/track/batch' : '/api/track';
    const auth = batch ? `Bearer ${apiKey}` : undefined;
    const perRequest = batch ? batchSize : 1;
    // A batch request counts once against the per-key rate limit: lift it for the run. Keyless
    // requests come as from the shipped proxy (TRUST_PROXY=1), each visitor with its address,
    // and keep the default per-address budget.
    const limits = { TRACK_RATE_LIMIT_MAX: '100000000', TRUST_PROXY: '1' };

    trivial = await startEntry('bench/trivial-server.ts', {});
    runWrk(trivial.url, { bodiesFile, path, seconds: 2, connections, auth }); // warm-up
    const base = runWrk(trivial.url, { bodiesFile, path, seconds, connections, auth });
    await trivial.stop();
    trivial = undefined;

    server = await startEntry('apps/server/src/main.ts', { ...env, ...limits }, startFlags());
    await enableEveryFeature(server.url, siteId, apiKey);
    runWrk(server.url, { bodiesFile, path, seconds: 2, connections, auth }); // warm-up: caches, JIT
    const warmup = await countStored(server, dataDir, siteId, true);
    server = await startEntry('apps/server/src/main.ts', { ...env, ...limits }, startFlags());
    const run = runWrk(server.url, { bodiesFile, path, seconds, connections, auth });
    const stored = (await countStored(server, dataDir, siteId, false)) - warmup;
    server = undefined;

    const acknowledged = (run.requests - run.non2xx - run.socket_errors) * perRequest;
    const rate = (r: WrkResult) => (r.requests * perRequest) / (r.duration_us / 1e6);
    const unit = batch ? 'events/s' : 'requests/s';
    const report = {
      mode: batch ? `batch (${batchSize} events per request)` : 'single events',
      connections,
      seconds,
      trackhouse: {
        [unit]: Math.round(rate(run)),
        p50_ms: ms(run.p50_us),
        p99_ms: ms(run.p99_us),
        non2xx: run.non2xx,
        socketErrors: run.socket_errors,
      },
      trivialHono: { [unit]: Math.round(rate(base)), p50_ms: ms(base.p50_us), p99_ms: ms(base.p99_us) },
      ratio: Number((rate(run) / rate(base)).toFixed(3)),
      acknowledgedEvents: acknowledged,
      storedEvents: stored,
      everyAcknowledgedStored: stored >= acknowledged,
    };
    console.log(JSON.stringify(report, null, 2));
  } finally {
    await server?.stop('SIGKILL');
    await trivial?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Every event type of the mix is recorded (none is answered `tracked: false`). */
async function enableEveryFeature(url: string, siteId: number, apiKey: string): Promise<void> {
  const res = await fetch(`${url}/api/sites/${siteId}/config`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      trackErrors: true,
      webVitals: true,
      trackButtonClicks: true,
      trackCopy: true,
      trackFormInteractions: true,
    }),
  });
  if (!res.ok) throw new Error(`enabling the site's features failed: ${res.status} ${await res.text()}`);
}

/** Stops the server with SIGTERM (it drains its buffer), then counts the site's rows. */
async function countStored(
  server: StartedServer,
  dataDir: string,
  siteId: number,
  _warmup: boolean,
): Promise<number> {
  const code = await server.stop('SIGTERM');
  if (code !== 0) throw new Error(`server exited with ${code}:\n${server.output()}`);
  const ch = createClickHouse({
    kind: 'embedded',
    dataDir: embeddedClickHousePath(dataDir),
    queryPoolSize: 1,
  });
  try {
    const [row] = await ch.query<{ n: number }>(
      'SELECT count() AS n FROM events WHERE site_id = {s:UInt32}',
      { s: siteId },
    );
    return row?.n ?? 0;
  } finally {
    await ch.close();
  }
}
