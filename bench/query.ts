import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createClickHouse, type GoalDefinition } from '@trackhouse/clickhouse';
import { runEntry, type StartedServer, startEntry, startFlags } from '../test/processes';
import { makeEvents } from './payloads';

export function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
}

/** Metric parameters timed: a session attribute, entry page, page values, event names, referrers. */
const METRIC_BENCH = [
  'country',
  'browser',
  'channel',
  'referrer',
  'entry_page',
  'pathname',
  'page_title',
  'event_name',
];

/** The bench's goals: two path goals and two event goals, one with a property. */
export const BENCH_GOALS = [
  { name: 'docs', goalType: 'path', config: { pathPattern: '/docs/**' } },
  { name: 'checkout', goalType: 'path', config: { pathPattern: '/checkout/*' } },
  { name: 'purchase', goalType: 'event', config: { eventName: 'purchase' } },
  {
    name: 'pro purchase',
    goalType: 'event',
    config: { eventName: 'purchase', eventPropertyKey: 'plan', eventPropertyValue: 'pro' },
  },
] satisfies (GoalDefinition & { name: string })[];

/** A funnel of the seeded site: pricing page, signup page, signup event. */
const FUNNEL_STEPS = [
  { type: 'page', value: '/pricing' },
  { type: 'page', value: '/signup' },
  { type: 'event', value: 'signup' },
];
/**
 * The product analytics reads (funnels, retention, journeys, errors, web vitals, autocapture)
 * over the same range: 500 ms unfiltered, 1.5 s with the two filters.
 */
const PRODUCT_BENCH = (range: string): [string, string, number, number | undefined, unknown?][] => [
  ['funnel', `/funnels/analyze?${range}`, 500, 1500, { steps: FUNNEL_STEPS }],
  [
    'funnel step sessions',
    `/funnels/2/sessions?${range}`,
    500,
    1500,
    { steps: FUNNEL_STEPS, mode: 'dropped' },
  ],
  ['retention', `/retention?${range}&mode=week`, 500, 1500],
  ['journeys', `/journeys?${range}&steps=3`, 500, 1500],
  ['error names', `/errors/names?${range}`, 500, 1500],
  ['error time-series', `/errors/time-series?${range}&bucket=day&errorMessage=TypeError`, 500, 1500],
  ['performance overview', `/performance/overview?${range}`, 500, 1500],
  ['performance by pathname', `/performance/by-dimension?${range}&dimension=pathname`, 500, 1500],
  ['autocapture buttons', `/events/autocapture?${range}&type=button_click`, 500, 1500],
];

/** Resident set size of a process, in MB (Linux). */
function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/** What `bench/download.ts` counted: lines, bytes, seconds from request to last byte, its CPU time. */
interface Downloaded {
  lines: number;
  bytes: number;
  seconds: number;
  cpuSeconds: number;
}

/** One GET streamed to the end by `bench/download.ts`, a process of its own (a client as lean as curl). */
async function download(url: string, headers: Record<string, string>): Promise<Downloaded> {
  const run = await runEntry('bench/download.ts', [url, JSON.stringify(headers)], {});
  if (run.code !== 0) throw new Error(run.stderr.trim() || `download.ts exited with ${run.code}`);
  return JSON.parse(run.stdout) as Downloaded;
}

/** CPU time a process has used, user and system, in seconds (Linux: clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The server's peak RSS while `work` runs, sampled every 100 ms. */
async function peakRss<T>(pid: number, work: () => Promise<T>): Promise<[T, number]> {
  let peak = rssMb(pid);
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMb(pid));
  }, 100);
  try {
    const result = await work();
    return [result, Math.max(peak, rssMb(pid))];
  } finally {
    clearInterval(sampler);
  }
}

/**
 * Streams one whole day (the day before the range's last), then the whole range, as exports:
 * events per second of the range, and the server's RSS growth. The engine grows by a similar
 * amount (about 250 MB) on the first export of a process whatever its size (caches and
 * allocator arenas of the columns read), so the growth that tells whether memory stays flat is
 * the range's over the server that exported one day; the day's growth over a cold server is
 * printed beside it.
 */
async function measureExport(
  base: string,
  oneDay: string,
  range: string,
  headers: Record<string, string>,
  pid: number,
) {
  const cold = rssMb(pid);
  const [, afterDay] = await peakRss(pid, () => download(`${base}/export?${oneDay}`, headers));
  const before = rssMb(pid);
  const serverCpu0 = cpuSeconds(pid);
  const [{ lines, bytes, seconds, cpuSeconds: clientCpu }, peak] = await peakRss(pid, () =>
    download(`${base}/export?${range}`, headers),
  );
  const perSecond = Math.round(lines / seconds);
  const growth = Math.round(peak - before);
  return {
    events: lines,
    mb: Math.round(bytes / 1_048_576),
    seconds: Number(seconds.toFixed(1)),
    events_per_s: perSecond,
    rss_before_mb: Math.round(before),
    first_day_growth_mb: Math.round(afterDay - cold),
    rss_growth_mb: growth,
    server_cpu_s: Number((cpuSeconds(pid) - serverCpu0).toFixed(1)),
    client_cpu_s: Number(clientCpu.toFixed(1)),
    ok: perSecond >= 500_000 && growth <= 100,
  };
}

/**
 * Waits for the server's background builds of summaries (the settled days at start, and those of
 * the goals just added) to finish, as on a server that has been up a while, and prints how long
 * they took and the longest the server took to answer meanwhile. Gives up after half an hour.
 */
async function summariesBuilt(url: string): Promise<void> {
  const started = performance.now();
  const deadline = started + 30 * 60_000;
  const gauge = (text: string, name: string) =>
    Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  // The longest the server took to answer meanwhile: builds that hold its event loop hold
  // every request (on a standalone server, ingest too).
  let longest = 0;
  let resets = 0;
  for (;;) {
    const asked = performance.now();
    // A build can hold the server's event loop for seconds; at 100 M events a poll's connection
    // was reset during the builds, the server still up (the first start on two seeds): asked again.
    const text = await fetch(`${url}/metrics`).then(
      (res) => res.text(),
      (error: Error) => {
        resets++;
        if (resets > 10) throw error;
        return undefined;
      },
    );
    longest = Math.max(longest, performance.now() - asked);
    if (text === undefined) continue;
    if (gauge(text, 'trackhouse_summary_builds_pending') === 0) {
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      console.log(
        `background summary builds done after ${seconds} s (${gauge(text, 'trackhouse_summary_reads_total')} reads, ${gauge(text, 'trackhouse_summary_rows_total')} rows; the server's longest answer meanwhile ${Math.round(longest)} ms, ${resets} polls reset)`,
      );
      return;
    }
    if (performance.now() > deadline) throw new Error('the background summary builds took over 30 minutes');
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The share of one core the server used over the last `seconds`, idle between requests. */
async function idleCpuShare(pid: number, seconds: number): Promise<number> {
  const before = cpuSeconds(pid);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  return (cpuSeconds(pid) - before) / seconds;
}

/**
 * Waits for the server to go idle with no request in flight (under 5 % of a core over 10 s), as on
 * a server that has been up a while: the engine's background merges of a new seed's parts (the
 * events' monthly partitions hold tens of millions of rows at 100 M events) must not be timed
 * beside the answers. Prints how long it waited and the CPU time used meanwhile (on the 100 M
 * seed of 2026-12-06, 20 s and 4 s: its merges were done during the summary builds). Gives up
 * waiting after half an hour and says so.
 */
async function serverIdle(pid: number): Promise<void> {
  const started = performance.now();
  const cpu0 = cpuSeconds(pid);
  for (;;) {
    const share = await idleCpuShare(pid, 10);
    const seconds = (performance.now() - started) / 1000;
    if (share < 0.05 || seconds > 30 * 60) {
      console.log(
        `${share < 0.05 ? 'server idle' : 'SERVER STILL BUSY'} after ${seconds.toFixed(0)} s of waiting (${(cpuSeconds(pid) - cpu0).toFixed(1)} s of its CPU meanwhile, ${Math.round(share * 100)} % of a core over the last 10 s)`,
      );
      return;
    }
  }
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

/**
 * Milliseconds a fixed piece of work takes this process now (sorting 2 M pseudo-random numbers,
 * best of three). Answers of unchanged code move by 20-40 % between runs an hour apart; this
 * tells whether the speed of one core moved with them (docs/benchmarks.md).
 */
export function machineCheckMs(): number {
  const numbers = new Float64Array(2_000_000);
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 3; round++) {
    let x = 12345;
    for (let i = 0; i < numbers.length; i++) {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      numbers[i] = x;
    }
    const t0 = performance.now();
    numbers.sort();
    best = Math.min(best, performance.now() - t0);
  }
  return Math.round(best);
}

/**
 * `pnpm bench query [--events N] [--days D] [--runs R] [--data-dir DIR] [--only REGEX] [--unfiltered] [--times] [--rebuild-summaries] [--writing N]`: seeds a site with
 * realistic events (default 10 M over 30 days; a given --data-dir is seeded once and reused),
 * starts the standalone server, waits for its background builds and then for it to go idle (the
 * engine's merges of the seed's parts done), and times every read endpoint over the 30-day range, with and
 * without two filters. Prints p50/p95 per endpoint against the targets, then streams the whole
 * range as an export: events per second and the server's RSS growth. `--only` times the
 * endpoints (and `export`) whose name matches, `--unfiltered` skips the filtered runs, `--times` prints every run's time in order; QUERY_ROLLUPS=false in the environment times the
 * answers computed from the events alone; `--rebuild-summaries` drops the stored per-day summaries first, so
 * that the server builds them again as on a new seed. `--writing N` sends N events through the
 * tracking API (one batch, not timed) before every request, as a site being visited meanwhile:
 * today's partitions gain parts between the reads.
 */
export async function benchQuery(args: string[]): Promise<void> {
  const events = Number(option(args, 'events') ?? 10_000_000);
  const days = Number(option(args, 'days') ?? 30);
  const runs = Number(option(args, 'runs') ?? 30);
  const given = option(args, 'data-dir');
  const dataDir = given ? resolve(given) : mkdtempSync(join(tmpdir(), 'trackhouse-bench-query-'));
  const writing = Number(option(args, 'writing') ?? 0);
  const env = {
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    QUERY_RATE_LIMIT_MAX: '100000000',
    UV_THREADPOOL_SIZE: '16',
    ...(writing > 0 ? { TRACK_RATE_LIMIT_MAX: '100000000' } : {}),
  };
  let server: StartedServer | undefined;
  try {
    const marker = join(dataDir, `seeded-${events}-${days}`);
    const init = await runEntry('apps/cli/src/main.ts', ['init', '--domain', 'bench.test', '--json'], env);
    if (init.code !== 0) throw new Error(init.stderr || init.stdout);
    const { siteId, apiKey } = JSON.parse(init.stdout) as { siteId: number; apiKey: string };
    if (!existsSync(marker)) {
      console.log(`seeding ${events} events over ${days} days…`);
      const seeded = await runEntry(
        'apps/cli/src/main.ts',
        ['seed', '--site', String(siteId), '--events', String(events), '--days', String(days), '--json'],
        env,
      );
      if (seeded.code !== 0) throw new Error(seeded.stderr || seeded.stdout);
      console.log(`seeded: ${seeded.stdout.trim()}`);
      rmSync(marker, { force: true });
      writeFileSync(marker, seeded.stdout);
    }
    if (args.includes('--rebuild-summaries')) {
      // The server builds them all again at start, as on a new seed: times those builds.
      const ch = createClickHouse({
        kind: 'embedded',
        dataDir: join(dataDir, 'clickhouse'),
        queryPoolSize: 1,
      });
      try {
        await ch.command('TRUNCATE TABLE metric_summaries');
      } finally {
        await ch.close();
      }
    }
    server = await startEntry('apps/server/src/main.ts', env, startFlags());
    const base = `${server.url}/api/sites/${siteId}`;
    const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
    // The bench's goals, made once per data directory: a second run reuses them, so the goal
    // list times the same four goals however often the bench ran against the seed.
    const existing = (await (await fetch(`${base}/goals?page_size=100`, { headers })).json()) as {
      data: { goalId: number; name: string }[];
    };
    const goalIds: number[] = [];
    for (const goal of BENCH_GOALS) {
      const made = existing.data.find((g) => g.name === goal.name);
      if (made) {
        goalIds.push(made.goalId);
        continue;
      }
      const res = await fetch(`${base}/goals`, { method: 'POST', headers, body: JSON.stringify(goal) });
      goalIds.push(((await res.json()) as { goalId: number }).goalId);
    }
    // The bench's funnel saved, as a dashboard keeps the funnels it shows (the background
    // builder then summarizes it); once per data directory, as the goals.
    const funnels = (await (await fetch(`${base}/funnels`, { headers })).json()) as {
      data: { name: string }[];
    };
    if (!funnels.data.some((f) => f.name === 'signup')) {
      const res = await fetch(`${base}/funnels`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: 'signup', steps: FUNNEL_STEPS }),
      });
      if (res.status !== 201) throw new Error(`saving the funnel: HTTP ${res.status}`);
    }
    await summariesBuilt(server.url);
    await serverIdle(server.child.pid!);
    const end = new Date();
    const start = new Date(end.getTime() - (days - 1) * 86_400_000);
    const range = `start_date=${start.toISOString().slice(0, 10)}&end_date=${end.toISOString().slice(0, 10)}&time_zone=Europe/Berlin`;
    // Two filters, as a dashboard applies them: a place and a part of the site.
    const filters = `filters=${encodeURIComponent(
      JSON.stringify([
        { parameter: 'country', type: 'equals', value: ['US', 'DE'] },
        { parameter: 'pathname', type: 'contains', value: ['docs', 'checkout', 'pricing'] },
      ]),
    )}`;
    const first = async <T>(path: string) => (await (await fetch(`${base}${path}`, { headers })).json()) as T;
    const firstPage = await first<{ cursor: { next: string } }>(`/events?${range}&page_size=50`);
    const session = await first<{ data: { session_id: string }[] }>(`/sessions?${range}&limit=1`);
    const user = await first<{ data: { user_id: string }[] }>(`/users?${range}&limit=1`);
    // The latest visitor is any visitor (most have a few events); the one with the most events
    // is the profile read that has to visit every part of the table.
    const heaviest = await first<{ data: { user_id: string }[] }>(
      `/users?${range}&limit=1&sort=events&order=desc`,
    );
    // [name, path, target ms unfiltered, target ms filtered (undefined: filters do not apply),
    // a JSON body (sent with POST)]
    const endpoints: [string, string, number, number | undefined, unknown?][] = [
      ['GET site', '', 200, undefined],
      ['goals', `/goals?${range}`, 100, 300],
      ['goal sessions', `/goals/${goalIds[2]}/sessions?${range}`, 100, 300],
      ['events page', `/events?${range}&page_size=50`, 50, 50],
      ['events next page', `/events?${range}&page_size=50&cursor=${firstPage.cursor.next}`, 50, 50],
      ['event names', `/events/names?${range}`, 200, 200],
      ['event properties', `/events/properties?${range}&event_name=purchase`, 200, 200],
      ['outbound', `/events/outbound?${range}`, 200, 200],
      ['overview', `/overview?${range}`, 100, 300],
      ['overview compare', `/overview?${range}&compare=previous`, 100, 300],
      ['overview-bucketed day', `/overview-bucketed?${range}&bucket=day`, 100, 300],
      ['overview-bucketed hour', `/overview-bucketed?${range}&bucket=hour`, 100, 300],
      ...METRIC_BENCH.map((m): [string, string, number, number] => [
        `metric ${m}`,
        `/metric?${range}&parameter=${m}`,
        100,
        300,
      ]),
      ['sessions', `/sessions?${range}`, 100, 300],
      ['session', `/sessions/${session.data[0]?.session_id}?${range}`, 100, undefined],
      ['users', `/users?${range}`, 100, 300],
      ['user', `/users/${user.data[0]?.user_id}?${range}`, 100, undefined],
      ['user most events', `/users/${heaviest.data[0]?.user_id}?${range}`, 100, undefined],
      ['live-user-count', `/live-user-count?${range}`, 100, 300],
      ...PRODUCT_BENCH(range),
    ];
    const only = option(args, 'only');
    const picked = only ? endpoints.filter(([name]) => new RegExp(only).test(name)) : endpoints;
    const rows: Record<string, string | number | boolean>[] = [];
    // The events sent meanwhile with --writing: a batch before each request.
    const sent = writing > 0 ? makeEvents(siteId, writing * 1000, 11) : [];
    let batches = 0;
    const write = async () => {
      if (writing === 0) return;
      const from = (batches++ * writing) % sent.length;
      const res = await fetch(`${server!.url}/api/track/batch`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ events: sent.slice(from, from + writing) }),
      });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`writing: HTTP ${res.status}`);
    };
    const checkBefore = machineCheckMs();
    for (const [name, path, unfiltered, filteredTarget, body] of picked) {
      for (const filtered of [false, true]) {
        if (filtered && (filteredTarget === undefined || args.includes('--unfiltered'))) continue;
        const url = `${base}${path}${filtered ? `&${filters}` : ''}`;
        const times: number[] = [];
        for (let i = 0; i < runs + 3; i++) {
          await write();
          const t0 = performance.now();
          const res = await fetch(
            url,
            body === undefined ? { headers } : { method: 'POST', headers, body: JSON.stringify(body) },
          );
          await res.arrayBuffer();
          if (res.status !== 200) throw new Error(`${name}: HTTP ${res.status}`);
          if (i >= 3) times.push(performance.now() - t0);
        }
        if (args.includes('--times')) console.log(name, filtered, times.map((t) => Math.round(t)).join(' '));
        times.sort((a, b) => a - b);
        const p95 = percentile(times, 95);
        const target = filtered ? filteredTarget! : unfiltered;
        rows.push({
          endpoint: name,
          filters: filtered,
          p50_ms: Number(percentile(times, 50).toFixed(1)),
          p95_ms: Number(p95.toFixed(1)),
          target_ms: target,
          ok: p95 <= target,
        });
      }
    }
    const rollups = process.env.QUERY_ROLLUPS ?? 'true';
    console.log(
      `\n${events} events over ${days} days, ${runs} runs per endpoint (embedded engine, QUERY_ROLLUPS=${rollups}${writing > 0 ? `, ${writing} events written before each request` : ''})\n`,
    );
    console.table(rows);
    console.log(
      `machine check (a fixed sort, docs/benchmarks.md): ${checkBefore} ms before the runs, ${machineCheckMs()} ms after`,
    );
    // Background work that began during the runs (a merge) shows as CPU used with no request.
    console.log(
      `the server idle after the runs: ${Math.round((await idleCpuShare(server.child.pid!, 10)) * 100)} % of a core over 10 s`,
    );
    let exportOk = true;
    if (!only || new RegExp(only).test('export')) {
      // Yesterday: a whole day of events, whatever the hour of the run.
      const day = new Date(end.getTime() - 86_400_000).toISOString().slice(0, 10);
      const oneDay = `start_date=${day}&end_date=${day}&time_zone=Europe/Berlin`;
      const exported = await measureExport(base, oneDay, range, headers, server.child.pid!);
      console.log('\nexport (NDJSON, the whole range, one request)\n');
      console.table([exported]);
      exportOk = exported.ok;
    }
    const ok = rows.every((r) => r.ok) && exportOk;
    console.log(ok ? 'every endpoint within its target' : 'SOME ENDPOINTS MISS THEIR TARGET');
  } catch (error) {
    // A server that died mid-run says why only in its own output.
    const child = server?.child;
    if (server && child && (child.exitCode !== null || child.signalCode !== null)) {
      console.error(
        `the server exited (${child.exitCode ?? child.signalCode}); its last output:\n${server.output().slice(-8_000)}`,
      );
    }
    throw error;
  } finally {
    await server?.stop('SIGTERM');
    if (!given) rmSync(dataDir, { recursive: true, force: true });
  }
}
