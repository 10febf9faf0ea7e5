import { resolve } from 'node:path';
import { CHROMIUM, hasChromium, launchChromium } from '../test/browser';
import { runEntry, type StartedServer, startEntry, startFlags } from '../test/processes';

function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

/**
 * `pnpm bench dashboard --data-dir DIR [--runs R]`: on a DATA_DIR seeded by `pnpm bench query`
 * (or `pnpm trackhouse seed`), starts the standalone server and opens the site's dashboard in
 * headless Chromium, signed in, R times (a fresh browser context each: no cache). Prints the time
 * from navigation to the first chart drawn and to the whole page filled (figures, chart, lists,
 * goals, sessions, events), p50 and p95.
 */
export async function benchDashboard(args: string[]): Promise<void> {
  const given = option(args, 'data-dir');
  if (!given) throw new Error('--data-dir is required (a directory seeded by `pnpm bench query`)');
  if (!hasChromium) throw new Error(`${CHROMIUM} is not installed (apt-get install chromium)`);
  const runs = Number(option(args, 'runs') ?? 5);
  const env = { DATA_DIR: resolve(given), LOG_LEVEL: 'warn', QUERY_RATE_LIMIT_MAX: '100000000' };
  const init = await runEntry('apps/cli/src/main.ts', ['init', '--domain', 'bench.test', '--json'], env);
  if (init.code !== 0) throw new Error(init.stderr || init.stdout);
  const { siteId, apiKey } = JSON.parse(init.stdout) as { siteId: number; apiKey: string };
  let server: StartedServer | undefined;
  const browser = await launchChromium();
  try {
    server = await startEntry('apps/server/src/main.ts', env, startFlags());
    const firstChart: number[] = [];
    const filled: number[] = [];
    for (let i = 0; i < runs + 1; i++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      // Signed in as the page keeps it (apps/dashboard/src/api.ts): the key in the origin's storage.
      await context.addInitScript(`localStorage.setItem('trackhouse.apiKey', ${JSON.stringify(apiKey)})`);
      const page = await context.newPage();
      page.setDefaultTimeout(120_000);
      const t0 = performance.now();
      await page.goto(`${server.url}/sites/${siteId}`);
      await page.waitForSelector('.chart canvas');
      const chart = performance.now() - t0;
      await page.waitForSelector('main[data-loaded]');
      const all = performance.now() - t0;
      await context.close();
      // The first visit warms the engine's caches, as any earlier visit would have.
      if (i === 0) continue;
      firstChart.push(chart);
      filled.push(all);
    }
    firstChart.sort((a, b) => a - b);
    filled.sort((a, b) => a - b);
    console.log(`\ndashboard of site ${siteId} (default range), ${runs} visits after a warm-up\n`);
    console.table([
      {
        measure: 'first chart',
        p50_ms: Math.round(percentile(firstChart, 50)),
        p95_ms: Math.round(percentile(firstChart, 95)),
      },
      {
        measure: 'whole page',
        p50_ms: Math.round(percentile(filled, 50)),
        p95_ms: Math.round(percentile(filled, 95)),
      },
    ]);
  } finally {
    await browser.close();
    await server?.stop('SIGTERM');
  }
}
