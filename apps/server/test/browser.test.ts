import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { ClickHouse } from '@trackhouse/clickhouse';
import { createLogger, loadConfig } from '@trackhouse/core';
import { openIngest } from '@trackhouse/ingest';
import { createMemoryStores } from '@trackhouse/limits';
import { createApiKey, createOrganization, getOrCreateUser, setMembership } from '@trackhouse/postgres';
import { listen, type Served } from '@trackhouse/runtime';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestClickHouse, createTestDatabase, ROOT, tempDir } from '../../../test/helpers';
import { createStandaloneApp } from '../src/app';

const CHROMIUM = '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
const CHROME_UA =
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

/**
 * The standalone app in this process (so the test reads its embedded ClickHouse directly), on a
 * real port, and @rybbit/js with rrweb in headless Chromium on a page of another origin.
 */
let db: Awaited<ReturnType<typeof createTestDatabase>>;
let chHandle: Awaited<ReturnType<typeof createTestClickHouse>>;
let buffer: Awaited<ReturnType<typeof tempDir>>;
let ingest: Awaited<ReturnType<typeof openIngest>>;
let api: Served;
let ch: ClickHouse;

beforeAll(async () => {
  [db, chHandle, buffer] = await Promise.all([
    createTestDatabase(),
    createTestClickHouse(),
    tempDir('browser'),
  ]);
  ch = chHandle.ch;
  const settings = loadConfig({
    DATA_DIR: buffer.path,
    INGEST_BUFFER_DIR: buffer.path,
    INGEST_FLUSH_INTERVAL_MS: '100',
  });
  const stores = createMemoryStores();
  const common = { log: createLogger('silent'), registry: new Registry(), ch, stores, readiness: [] };
  ingest = await openIngest({ ...common, sql: db.sql, secret: 'browser-test-secret-0123', settings });
  const app = createStandaloneApp(ingest, { ...common, sql: db.sql, settings });
  api = await listen(app, '127.0.0.1', 0);
}, 60_000);
afterAll(async () => {
  await api?.close();
  await ingest?.close();
  await Promise.all([db?.drop(), chHandle?.close(), buffer?.remove()]);
});

/** A tenant whose site has every browser-client feature switched on through the site config API. */
async function siteWithEverythingOn(): Promise<number> {
  const org = await createOrganization(db.sql, 'Browser');
  const user = await getOrCreateUser(db.sql, `browser-${Date.now()}@example.com`);
  await setMembership(db.sql, org.id, user.id, 'owner');
  const { key } = await createApiKey(db.sql, { userId: user.id, name: 'browser' });
  const call = async (path: string, method: string, body: unknown) => {
    const res = await fetch(`${api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.ok, `${method} ${path}: ${res.status}`).toBe(true);
    return (await res.json()) as Record<string, unknown>;
  };
  const site = await call(`/api/organizations/${org.id}/sites`, 'POST', {
    name: 'Local',
    domain: 'localhost',
  });
  const siteId = site.siteId as number;
  await call(`/api/sites/${siteId}/config`, 'PUT', {
    trackErrors: true,
    webVitals: true,
    sessionReplay: true,
    trackButtonClicks: true,
    trackCopy: true,
    trackFormInteractions: true,
  });
  return siteId;
}

function page(siteId: number): string {
  return `<!doctype html><html><head><title>Shop</title>
<script type="importmap">{"imports": {"rrweb": "/rrweb.mjs"}}</script></head><body>
<h1>Shop</h1>
<button id="buy" data-rybbit-prop-plan="pro">Buy now</button>
<p id="quote">Copy this text</p>
<form id="signup" action="/register" method="post">
  <input id="email" name="email" type="email"><button type="submit">Sign up</button>
</form>
<button id="boom">Break</button>
<button id="next">Checkout</button>
<script type="module">
import rybbit from '/rybbit.mjs';
await rybbit.init({ analyticsHost: '${api.url}/api', siteId: '${siteId}' });
rybbit.identify('user-42', { plan: 'pro', seats: 3 });
// A slow handler, so the click counts as an interaction for INP (40 ms and more).
document.getElementById('buy').addEventListener('click', () => { const t = performance.now(); while (performance.now() - t < 80); });
document.getElementById('signup').addEventListener('submit', (e) => e.preventDefault());
document.getElementById('boom').addEventListener('click', () => { throw new TypeError('boom from the page'); });
document.getElementById('next').addEventListener('click', () => history.pushState({}, '', '/checkout'));
window.ready = true;
</script></body></html>`;
}

/** Rows of a table for the site, polled until `done` holds (bounded). */
async function until<T>(sql: string, siteId: number, done: (rows: T[]) => boolean): Promise<T[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const rows = await ch.query<T>(sql, { s: siteId });
    if (done(rows) || Date.now() > deadline) return rows;
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface EventRow {
  type: string;
  event_name: string;
  pathname: string;
  properties: string;
  user_id: string;
  identified_user_id: string;
  session_id: string;
  lcp: number | null;
  cls: number | null;
  inp: number | null;
  fcp: number | null;
  ttfb: number | null;
}

describe('every feature of @rybbit/js', () => {
  it.skipIf(!hasChromium)(
    `in headless Chromium lands in ClickHouse with the right fields${hasChromium ? '' : ' — skipped: /usr/bin/chromium is not installed'}`,
    async () => {
      const siteId = await siteWithEverythingOn();
      const files: Record<string, Buffer> = {
        '/rybbit.mjs': readFileSync(join(ROOT, 'node_modules/@rybbit/js/dist/index.mjs')),
        '/rrweb.mjs': readFileSync(join(ROOT, 'node_modules/rrweb/dist/rrweb.js')),
      };
      // The page comes from another origin than the API (localhost vs 127.0.0.1): real CORS.
      const pages: Server = createServer((req, res) => {
        const file = files[req.url ?? ''];
        res.writeHead(200, { 'content-type': file ? 'text/javascript' : 'text/html' });
        res.end(file ?? page(siteId));
      });
      await new Promise<void>((r) => pages.listen(0, '127.0.0.1', r));
      const port = (pages.address() as AddressInfo).port;
      const { chromium } = await import('playwright-core');
      const browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-sync'],
      });
      try {
        const context = await browser.newContext({
          userAgent: CHROME_UA,
          viewport: { width: 1280, height: 800 },
        });
        await context.grantPermissions(['clipboard-read', 'clipboard-write']);
        const tab = await context.newPage();
        await tab.goto(`http://localhost:${port}/`);
        await tab.waitForFunction('window.ready === true', undefined, { timeout: 15_000 });
        await tab.click('#buy');
        // Page scripts as text: this file is compiled without the DOM library.
        await tab.evaluate(`{
          const range = document.createRange();
          range.selectNodeContents(document.getElementById('quote'));
          getSelection().removeAllRanges();
          getSelection().addRange(range);
        }`);
        await tab.keyboard.press('Control+C');
        await tab.fill('#email', 'ada@example.com');
        await tab.press('#email', 'Tab');
        await tab.click('#signup button');
        await tab.click('#boom');
        await tab.click('#next');
        await tab.waitForURL('**/checkout');

        const events = await until<EventRow>(
          `SELECT type, event_name, pathname, properties, user_id, identified_user_id,
             toString(session_id) AS session_id, lcp, cls, inp, fcp, ttfb
           FROM events WHERE site_id = {s:UInt32} ORDER BY timestamp`,
          siteId,
          (rows) =>
            ['button_click', 'copy', 'input_change', 'form_submit', 'error'].every((t) =>
              rows.some((r) => r.type === t),
            ) && rows.filter((r) => r.type === 'pageview').length >= 2,
        );
        const one = (type: string) => events.find((e) => e.type === type);
        const props = (type: string) =>
          JSON.parse(one(type)?.properties ?? 'null') as Record<string, unknown>;
        expect(events.filter((e) => e.type === 'pageview').map((e) => e.pathname)).toEqual([
          '/',
          '/checkout',
        ]);
        expect(props('button_click')).toMatchObject({ text: 'Buy now', plan: 'pro' });
        expect(props('copy')).toEqual({ text: 'Copy this text', sourceElement: 'p' });
        expect(props('input_change')).toMatchObject({
          element: 'input',
          inputName: 'email',
          inputType: 'email',
          formId: 'signup',
        });
        expect(props('form_submit')).toMatchObject({
          formId: 'signup',
          formAction: '/register',
          method: 'POST',
          fieldCount: 2,
        });
        expect(one('error')?.event_name).toBe('TypeError');
        expect(props('error')).toMatchObject({ message: expect.stringContaining('boom from the page') });
        // Identified: every event after identify() carries the id; one visitor, one session.
        expect(one('copy')?.identified_user_id).toBe('user-42');
        expect(new Set(events.map((e) => e.user_id)).size).toBe(1);
        expect(new Set(events.map((e) => e.session_id)).size).toBe(1);

        // Web vitals are sent once every one is known: CLS and INP when the page is hidden.
        await tab.evaluate(`{
          Object.defineProperty(document, 'visibilityState', { value: 'hidden', configurable: true });
          document.dispatchEvent(new Event('visibilitychange'));
        }`);
        const [vitals] = await until<EventRow>(
          `SELECT type, event_name, lcp, cls, inp, fcp, ttfb FROM events
           WHERE site_id = {s:UInt32} AND type = 'performance'`,
          siteId,
          (rows) => rows.length > 0,
        );
        expect(vitals?.event_name).toBe('web-vitals');
        for (const vital of ['lcp', 'fcp', 'ttfb'] as const)
          expect(vitals?.[vital], vital).toBeGreaterThan(0);
        expect(vitals?.cls).toBe(0);
        expect(vitals?.inp).toBeGreaterThanOrEqual(40);

        const [profile] = await until<{ user_id: string; traits: Record<string, string> }>(
          'SELECT user_id, traits FROM identifies WHERE site_id = {s:UInt32}',
          siteId,
          (rows) => rows.length > 0,
        );
        expect(profile).toEqual({ user_id: events[0]!.user_id, traits: { plan: '"pro"', seats: '3' } });

        const replays = await until<{ session_id: string; identified_user_id: string; events: string }>(
          `SELECT toString(session_id) AS session_id, identified_user_id, events FROM session_replay
           WHERE site_id = {s:UInt32} ORDER BY timestamp`,
          siteId,
          (rows) => rows.length > 0,
        );
        expect(replays[0]).toMatchObject({
          session_id: events[0]!.session_id,
          identified_user_id: 'user-42',
        });
        const rrweb = replays.flatMap((r) => JSON.parse(r.events) as { type: number }[]);
        // rrweb's Meta (4) and FullSnapshot (2) open every recording.
        expect(rrweb.map((e) => e.type)).toEqual(expect.arrayContaining([4, 2]));
      } finally {
        await browser.close();
        await new Promise<void>((r) => pages.close(() => r()));
      }
    },
    90_000,
  );
});
