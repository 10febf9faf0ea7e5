import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { runEntry, type StartedServer, startEntry } from '../test/processes';

function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

/**
 * `pnpm bench query [--events N] [--days D] [--runs R] [--data-dir DIR]`: seeds a site with
 * realistic events (default 10 M over 30 days; a given --data-dir is seeded once and reused),
 * starts the standalone server and times every read endpoint over the 30-day range, with and
 * without filters. Prints p50/p95 per endpoint against the targets.
 */
export async function benchQuery(args: string[]): Promise<void> {
  const events = Number(option(args, 'events') ?? 10_000_000);
  const days = Number(option(args, 'days') ?? 30);
  const runs = Number(option(args, 'runs') ?? 30);
  const given = option(args, 'data-dir');
  const dataDir = given ? resolve(given) : mkdtempSync(join(tmpdir(), 'trackhouse-bench-query-'));
  const env = {
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    QUERY_RATE_LIMIT_MAX: '100000000',
    UV_THREADPOOL_SIZE: '16',
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
      (await import('node:fs')).writeFileSync(marker, seeded.stdout);
    }
    server = await startEntry('apps/server/src/main.ts', env);
    const base = `${server.url}/api/sites/${siteId}`;
    const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
    const goalIds: number[] = [];
    for (const goal of [
      { name: 'docs', goalType: 'path', config: { pathPattern: '/docs/**' } },
      { name: 'checkout', goalType: 'path', config: { pathPattern: '/checkout/*' } },
      { name: 'purchase', goalType: 'event', config: { eventName: 'purchase' } },
      {
        name: 'pro purchase',
        goalType: 'event',
        config: { eventName: 'purchase', eventPropertyKey: 'plan', eventPropertyValue: 'pro' },
      },
    ]) {
      const res = await fetch(`${base}/goals`, { method: 'POST', headers, body: JSON.stringify(goal) });
      goalIds.push(((await res.json()) as { goalId: number }).goalId);
    }
    const end = new Date();
    const start = new Date(end.getTime() - (days - 1) * 86_400_000);
    const range = `start_date=${start.toISOString().slice(0, 10)}&end_date=${end.toISOString().slice(0, 10)}&time_zone=Europe/Berlin`;
    const filters = `filters=${encodeURIComponent(
      JSON.stringify([
        { parameter: 'country', type: 'equals', value: ['US', 'DE'] },
        { parameter: 'pathname', type: 'contains', value: ['docs', 'checkout', 'pricing'] },
        { parameter: 'device_type', type: 'not_equals', value: ['tablet'] },
      ]),
    )}`;
    const firstPage = (await (await fetch(`${base}/events?${range}&page_size=50`, { headers })).json()) as {
      cursor: { next: string };
    };
    const endpoints: [string, string, number][] = [
      ['GET site', '', 200],
      ['goals', `/goals?${range}`, 200],
      ['goal sessions', `/goals/${goalIds[2]}/sessions?${range}`, 200],
      ['events page', `/events?${range}&page_size=50`, 50],
      ['events next page', `/events?${range}&page_size=50&cursor=${firstPage.cursor.next}`, 50],
      ['event names', `/events/names?${range}`, 200],
      ['event properties', `/events/properties?${range}&event_name=purchase`, 200],
      ['outbound', `/events/outbound?${range}`, 200],
    ];
    const rows: Record<string, string | number | boolean>[] = [];
    for (const [name, path, target] of endpoints) {
      for (const filtered of [false, true]) {
        if (filtered && path === '') continue;
        const url = `${base}${path}${filtered ? `&${filters}` : ''}`;
        const times: number[] = [];
        for (let i = 0; i < runs + 3; i++) {
          const t0 = performance.now();
          const res = await fetch(url, { headers });
          await res.arrayBuffer();
          if (res.status !== 200) throw new Error(`${name}: HTTP ${res.status}`);
          if (i >= 3) times.push(performance.now() - t0);
        }
        times.sort((a, b) => a - b);
        const p95 = percentile(times, 95);
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
    console.log(`\n${events} events over ${days} days, ${runs} runs per endpoint (embedded engine)\n`);
    console.table(rows);
    console.log(
      rows.every((r) => r.ok) ? 'every endpoint within its target' : 'SOME ENDPOINTS MISS THEIR TARGET',
    );
  } finally {
    await server?.stop('SIGTERM');
    if (!given) rmSync(dataDir, { recursive: true, force: true });
  }
}
