import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROME_UA, hasChromium, launchChromium, SKIP_REASON } from '../../../test/browser';
import { ROOT, type StartedServer, startStandaloneSite } from '../../../test/helpers';

/**
 * Every feature of the official browser client (`@rybbit/js`), switched on through the site
 * config, in headless Chromium: a page that navigates (SPA), clicks a button, copies text,
 * changes and submits a form, throws an error, reports web vitals, identifies the visitor and
 * records a replay. Each is read back through the read API.
 */

let server: StartedServer;
let site: { siteId: number; apiKey: string };
let stop: (() => Promise<void>) | undefined;

beforeAll(async () => {
  ({ server, site, stop } = await startStandaloneSite('browser-features', 'localhost'));
}, 60_000);
afterAll(async () => {
  await stop?.();
});

async function api<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
  const res = await fetch(`${server.url}/api${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${site.apiKey}`, 'content-type': 'application/json' },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

/** Polls a read until `done` holds (the ingest flushes every 100 ms), bounded to 20 s. */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 200));
  }
}

const PAGE = (apiBase: string, siteId: number) => `<!doctype html><html><head><title>Shop</title>
<script type="importmap">{"imports": {"rrweb": "/rrweb.mjs"}}</script></head><body>
<h1>Shop</h1>
<p id="quote">Copy this coupon: SAVE20</p>
<button id="buy" data-rybbit-prop-plan="pro">Buy now</button>
<form id="signup" name="signup" action="/signup" method="post">
  <input id="email" name="email" type="text" />
  <input type="submit" value="Sign up" />
</form>
<script type="module">
import rybbit from '/rybbit.mjs';
document.getElementById('signup').addEventListener('submit', (e) => e.preventDefault());
await rybbit.init({ analyticsHost: '${apiBase}', siteId: '${siteId}', debounceDuration: 0 });
rybbit.identify('customer-42', { plan: 'pro', seats: 3 });
// An uncaught error from the page's own code (the client skips errors of other origins).
window.fail = () => setTimeout(() => {
  throw new TypeError('coupon service unreachable');
});
// Registered after the client's own listener, so it runs once the client has sent the error.
window.addEventListener('error', () => { window.failed = true; });
window.ready = true;
</script></body></html>`;

describe('@rybbit/js with every feature on', () => {
  it.skipIf(!hasChromium)(
    `navigates, clicks, copies, submits, fails, measures, identifies and records, all read back${SKIP_REASON}`,
    async () => {
      const id = site.siteId;
      await api(`/sites/${id}/config`, {
        method: 'PUT',
        body: {
          webVitals: true,
          trackErrors: true,
          sessionReplay: true,
          trackButtonClicks: true,
          trackCopy: true,
          trackFormInteractions: true,
        },
      });
      const config = await api<Record<string, boolean>>(`/site/tracking-config/${id}`);
      expect(config).toMatchObject({ webVitals: true, sessionReplay: true, trackCopy: true });

      const rybbitJs = readFileSync(join(ROOT, 'node_modules/@rybbit/js/dist/index.mjs'));
      const rrwebJs = readFileSync(join(ROOT, 'node_modules/rrweb/dist/rrweb.js'));
      const html = PAGE(`${server.url}/api`, id);
      // The page comes from another origin than the API (localhost vs 127.0.0.1): real CORS.
      const pages: Server = createServer((req, res) => {
        const script = req.url === '/rybbit.mjs' ? rybbitJs : req.url === '/rrweb.mjs' ? rrwebJs : undefined;
        res.writeHead(200, { 'content-type': script ? 'text/javascript' : 'text/html' });
        res.end(script ?? html);
      });
      await new Promise<void>((r) => pages.listen(0, '127.0.0.1', r));

      const port = (pages.address() as AddressInfo).port;
      const browser = await launchChromium();
      try {
        const context = await browser.newContext({
          userAgent: CHROME_UA,
          viewport: { width: 1280, height: 800 },
        });
        await context.grantPermissions(['clipboard-read', 'clipboard-write'], {
          origin: `http://localhost:${port}`,
        });
        const tab = await context.newPage();
        await tab.goto(`http://localhost:${port}/shop`);
        await tab.waitForFunction('window.ready === true', undefined, { timeout: 10_000 });
        await tab.click('#buy');
        // Select the coupon paragraph and copy it as a person would.
        await tab.evaluate(`{
          const range = document.createRange();
          range.selectNodeContents(document.getElementById('quote'));
          const selection = window.getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
        }`);
        await tab.keyboard.press('Control+C');
        await tab.fill('#email', 'someone@example.org');
        await tab.press('#email', 'Tab');
        await tab.click('input[type=submit]');
        await tab.evaluate('window.fail()');
        // The error is thrown on /shop: navigate only once it has been reported there.
        await tab.waitForFunction('window.failed === true', undefined, { timeout: 10_000 });
        // A client-side navigation.
        await tab.evaluate("history.pushState({}, '', '/checkout')");
        // Replay batches leave every 5 s.
        await tab.waitForTimeout(5_500);
        // Leaving the page sends the web vitals measured so far.
        await tab.goto('about:blank');
      } finally {
        await browser.close();
        await new Promise<void>((r) => pages.close(() => r()));
      }

      // Pageviews (the initial one and the SPA one) in the events list.
      type EventRow = { type: string; pathname: string; user_id: string; identified_user_id?: string };
      const events = await until(
        () => api<{ data: EventRow[] }>(`/sites/${id}/events?page_size=100`),
        (r) => r.data.filter((e) => e.type === 'pageview').length >= 2,
      );
      expect(
        events.data
          .filter((e) => e.type === 'pageview')
          .map((e) => e.pathname)
          .sort(),
      ).toEqual(['/checkout', '/shop']);
      // The events list keeps to pageviews, custom events and outbound clicks.
      expect(events.data.every((e) => ['pageview', 'custom_event', 'outbound'].includes(e.type))).toBe(true);

      // Autocapture: the button, the copied text, the form.
      type Top = { value: string; count: number };
      const autocapture = (type: string) =>
        until(
          () => api<{ data: { data: Top[] } }>(`/sites/${id}/events/autocapture?type=${type}`),
          (r) => r.data.data.length > 0,
        );
      // The form's submit input is a button too.
      expect((await autocapture('button_click')).data.data).toEqual([
        expect.objectContaining({ value: 'Buy now', count: 1 }),
        expect.objectContaining({ value: 'Sign up', count: 1 }),
      ]);
      expect((await autocapture('copy')).data.data).toEqual([
        expect.objectContaining({ value: 'Copy this coupon: SAVE20', count: 1 }),
      ]);
      expect((await autocapture('form_submit')).data.data).toEqual([
        expect.objectContaining({ value: 'signup', count: 1 }),
      ]);
      expect((await autocapture('input_change')).data.data).toEqual([
        expect.objectContaining({ value: 'email', count: 1 }),
      ]);

      // The error, by name and as an event with its message.
      const names = await until(
        () => api<{ data: { data: { value: string; count: number }[] } }>(`/sites/${id}/errors/names`),
        (r) => r.data.data.length > 0,
      );
      expect(names.data.data).toEqual([expect.objectContaining({ value: 'TypeError', count: 1 })]);
      const errorEvents = await api<{ data: { data: { message: string; pathname: string }[] } }>(
        `/sites/${id}/errors/events?errorMessage=TypeError`,
      );
      // The browser's own message for an uncaught error, and a stack into the page's code.
      expect(errorEvents.data.data).toEqual([
        expect.objectContaining({
          message: 'Uncaught TypeError: coupon service unreachable',
          pathname: '/shop',
          identified_user_id: 'customer-42',
          stack: expect.stringContaining(`http://localhost:${port}/shop`),
        }),
      ]);

      // Web vitals: the load measures time to first byte and first paint at least.
      const vitals = await until(
        () => api<{ data: Record<string, number | string | null> }>(`/sites/${id}/performance/overview`),
        (r) => Number(r.data.ttfb_samples ?? 0) > 0,
      );
      expect(vitals.data).toMatchObject({ total_performance_events: 1, ttfb_samples: 1, fcp_samples: 1 });
      expect(vitals.data.ttfb_p50).toBeGreaterThan(0);
      expect(['good', 'needs-improvement', 'poor']).toContain(vitals.data.ttfb_rating);

      // The identified visitor, with traits.
      const user = await until(
        () =>
          api<{ data: { traits?: Record<string, unknown> } }>(`/sites/${id}/users/customer-42`).catch(
            () => null,
          ),
        (r) => r !== null && r.data.traits?.plan === 'pro',
      );
      expect(user?.data.traits).toEqual({ plan: 'pro', seats: 3 });

      // The replay: listed, and its events (a full snapshot among them) in order.
      type Replay = { session_id: string; event_count: number };
      const replays = await until(
        () => api<{ data: Replay[] }>(`/sites/${id}/session-replay/list`),
        (r) => r.data.length > 0,
      );
      expect(replays.data).toHaveLength(1);
      const replay = await api<{ events: { type: number; timestamp: number }[]; hasMore: boolean }>(
        `/sites/${id}/session-replay/${replays.data[0]!.session_id}`,
      );
      const stamps = replay.events.map((e) => e.timestamp);
      expect(replay.events.length).toBe(replays.data[0]!.event_count);
      expect(replay.hasMore).toBe(false);
      expect(replay.events.some((e) => e.type === 2)).toBe(true);
      expect(stamps).toEqual([...stamps].sort((a, b) => a - b));
    },
    90_000,
  );
});
