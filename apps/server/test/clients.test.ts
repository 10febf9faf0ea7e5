import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Rybbit } from '@rybbit/node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Trackhouse } from '../../../packages/node/src';
import { CHROME_UA, hasChromium, launchChromium, SKIP_REASON } from '../../../test/browser';
import { ROOT, type StartedServer, startStandaloneSite } from '../../../test/helpers';

let server: StartedServer;
let site: { siteId: number; apiKey: string };
let stop: (() => Promise<void>) | undefined;

beforeAll(async () => {
  ({ server, site, stop } = await startStandaloneSite('clients', 'localhost'));
}, 60_000);
afterAll(async () => {
  await stop?.();
});

interface EventRow {
  type: string;
  country: string;
  event_name: string;
  pathname: string;
  properties: string;
  hostname: string;
  browser: string;
  screen_width: number;
  language: string;
  page_title: string;
}

/** Events of the site read back through the query API, waiting (bounded) for the flush. */
async function eventsWhere(match: (e: EventRow) => boolean, count: number): Promise<EventRow[]> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const res = await fetch(`${server.url}/api/sites/${site.siteId}/events?page_size=1000`, {
      headers: { authorization: `Bearer ${site.apiKey}` },
    });
    const rows = ((await res.json()) as { data: EventRow[] }).data.filter(match);
    if (rows.length >= count || Date.now() > deadline) return rows;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('official and own clients against the standalone server', () => {
  it('@rybbit/node (key in the body) lands pageviews and events', async () => {
    const client = new Rybbit({
      analyticsHost: `${server.url}/api`,
      siteId: String(site.siteId),
      apiKey: site.apiKey,
    });
    await client.pageview({ pathname: '/rybbit-node', hostname: 'localhost', ip_address: '8.8.8.8' });
    await client.event('rn-event', { pathname: '/rybbit-node' }, { n: 1, s: 'x' });
    const rows = await eventsWhere((e) => e.pathname === '/rybbit-node', 2);
    expect(rows.map((e) => [e.type, e.event_name]).sort()).toEqual([
      ['custom_event', 'rn-event'],
      ['pageview', ''],
    ]);
    expect(JSON.parse(rows.find((e) => e.type === 'custom_event')!.properties)).toEqual({ n: 1, s: 'x' });
    expect(rows.find((e) => e.type === 'pageview')!.country).toBe('US');
  });

  it('@trackhouse/node (Bearer, batching) lands pageviews and events', async () => {
    const client = new Trackhouse({
      analyticsHost: `${server.url}/api`,
      siteId: site.siteId,
      apiKey: site.apiKey,
      batch: { maxEvents: 10 },
    });
    const results = [
      client.pageview({ pathname: '/th-node' }),
      client.event('th-event', { pathname: '/th-node' }, { ok: true }),
    ];
    await client.close();
    expect(await Promise.all(results)).toEqual([
      { ok: true, status: 200 },
      { ok: true, status: 200 },
    ]);
    const rows = await eventsWhere((e) => e.pathname === '/th-node', 2);
    expect(rows.map((e) => e.type).sort()).toEqual(['custom_event', 'pageview']);
  });

  it.skipIf(!hasChromium)(
    `@rybbit/js in headless Chromium (beacons, CORS, tracking config)${SKIP_REASON}`,
    async () => {
      const script = readFileSync(join(ROOT, 'node_modules/@rybbit/js/dist/index.mjs'));
      const page = `<!doctype html><html><head><title>Browser page</title></head><body>
<a id="out" href="https://example.org/elsewhere">out</a>
<script type="module">
import rybbit from '/rybbit.mjs';
await rybbit.init({ analyticsHost: '${server.url}/api', siteId: '${site.siteId}' });
rybbit.event('browser-event', { plan: 'pro', seats: 2 });
document.getElementById('out').addEventListener('click', (e) => e.preventDefault());
window.ready = true;
</script></body></html>`;
      // The page comes from another origin than the API (localhost vs 127.0.0.1): real CORS.
      const pages: Server = createServer((req, res) => {
        if (req.url === '/rybbit.mjs') {
          res.writeHead(200, { 'content-type': 'text/javascript' });
          res.end(script);
        } else {
          res.writeHead(200, { 'content-type': 'text/html' });
          res.end(page);
        }
      });
      await new Promise<void>((r) => pages.listen(0, '127.0.0.1', r));
      const port = (pages.address() as AddressInfo).port;
      const browser = await launchChromium();
      try {
        const context = await browser.newContext({
          userAgent: CHROME_UA,
          viewport: { width: 1280, height: 800 },
          locale: 'de-DE',
        });
        const tab = await context.newPage();
        await tab.goto(`http://localhost:${port}/pricing`);
        await tab.waitForFunction('window.ready === true', undefined, { timeout: 10_000 });
        await tab.click('#out');
        const rows = await eventsWhere((e) => e.hostname === 'localhost' && e.browser === 'Chrome', 3);
        const pageview = rows.find((e) => e.type === 'pageview');
        expect(pageview).toMatchObject({
          pathname: '/pricing',
          page_title: 'Browser page',
          screen_width: 1280,
          language: 'de-DE',
        });
        const event = rows.find((e) => e.type === 'custom_event');
        expect(event?.event_name).toBe('browser-event');
        expect(JSON.parse(event!.properties)).toEqual({ plan: 'pro', seats: 2 });
        const outbound = rows.find((e) => e.type === 'outbound');
        expect(JSON.parse(outbound!.properties)).toMatchObject({ url: 'https://example.org/elsewhere' });
      } finally {
        await browser.close();
        await new Promise<void>((r) => pages.close(() => r()));
      }
    },
    60_000,
  );
});
