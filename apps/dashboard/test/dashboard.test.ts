import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generateEvents, insertEvents } from '@trackhouse/clickhouse';
import { createGoal, setPrivateLinkKey, updateSiteConfig } from '@trackhouse/postgres';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasChromium, SKIP_REASON } from '../../../test/browser';
import type { QueryHarness } from '../../query/test/harness';
import { openPage, SHOTS, serveDashboard } from './served';

const SKIP = SKIP_REASON;
const LISTS = [
  'pathname',
  'entry_page',
  'exit_page',
  'referrer',
  'channel',
  'country',
  'browser',
  'operating_system',
  'device_type',
  'event_name',
];
const FIGURES = ['users', 'sessions', 'pageviews', 'pages_per_session', 'bounce_rate', 'session_duration'];

let h: QueryHarness;
let served: Awaited<ReturnType<typeof serveDashboard>> | undefined;
let base: string;
let owner: Awaited<ReturnType<QueryHarness['tenant']>>;
let publicSite: Awaited<ReturnType<QueryHarness['tenant']>>;
let privateSite: Awaited<ReturnType<QueryHarness['tenant']>>;
const PRIVATE_KEY = '0123456789abcdef0123456789abcdef';
let browser: Browser | undefined;

const utcDay = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);

beforeAll(async () => {
  served = await serveDashboard();
  ({ h, base, browser } = served);
  owner = await h.tenant('owner');
  publicSite = await h.tenant('owner');
  privateSite = await h.tenant('owner');
  await updateSiteConfig(h.db.sql, publicSite.siteId, { public: true });
  await setPrivateLinkKey(h.db.sql, privateSite.siteId, PRIVATE_KEY);
  await createGoal(h.db.sql, owner.siteId, {
    name: 'Saw pricing',
    goalType: 'path',
    config: { pathPattern: '/pricing' },
  });
  await insertEvents(h.ch, [
    ...generateEvents({ siteId: owner.siteId, events: 4000, days: 40, seed: 12 }),
    ...generateEvents({ siteId: publicSite.siteId, events: 800, days: 10, seed: 13 }),
    ...generateEvents({ siteId: privateSite.siteId, events: 600, days: 10, seed: 14 }),
  ]);
}, 120_000);

afterAll(async () => {
  await served?.close();
});

/** The API's answer for the same site, range and filters the page asked for. */
async function api<T>(
  siteId: number,
  path: string,
  q: Record<string, string>,
  headers: Record<string, string> = {},
) {
  const res = await fetch(
    `${base}/api/sites/${siteId}/${path}?${new URLSearchParams({ time_zone: 'UTC', ...q })}`,
    {
      headers,
    },
  );
  expect(res.status).toBe(200);
  return (await res.json()) as T;
}

type Summary = Record<string, number>;
type Metric = { data: { data: { value: string; count: number }[] } };

const newPage = (width?: number, height?: number) => openPage(browser!, width, height);

/** Waits until the page has drawn the answers for this range and these filters. */
async function loaded(page: Page, start: string, end: string, filters: unknown[] = []) {
  await page.waitForSelector(`main[data-loaded='${start}/${end}/${JSON.stringify(filters)}']`);
}

async function shownFigures(page: Page): Promise<Summary> {
  return page.$$eval('[data-metric]', (els) =>
    Object.fromEntries(els.map((e) => [e.getAttribute('data-metric'), Number(e.getAttribute('data-value'))])),
  );
}

async function expectFiguresEqualApi(page: Page, siteId: number, q: Record<string, string>, headers = {}) {
  const { data, previous } = await api<{ data: Summary; previous: Summary }>(
    siteId,
    'overview',
    { ...q, compare: 'previous' },
    headers,
  );
  expect(await shownFigures(page)).toEqual(Object.fromEntries(FIGURES.map((f) => [f, data[f]])));
  const text = await page.$eval("[data-metric='sessions'] .num", (e) => e.textContent);
  expect(text).toBe(new Intl.NumberFormat('en-US').format(data.sessions!));
  const change = await page.$eval("[data-metric='pageviews'] .change", (e) => e.textContent ?? '');
  expect(change).toMatch(
    data.pageviews === previous.pageviews ? /^= / : data.pageviews! > previous.pageviews! ? /^▲/ : /^▼/,
  );
  return data;
}

async function expectListsEqualApi(page: Page, siteId: number, q: Record<string, string>, headers = {}) {
  for (const parameter of LISTS) {
    const answer = await api<Metric>(siteId, 'metric', { ...q, parameter, limit: '10' }, headers);
    const shown = await page.$$eval(`[data-list='${parameter}'] li`, (els) =>
      els.map((e) => ({ value: e.getAttribute('data-value'), count: Number(e.getAttribute('data-count')) })),
    );
    expect(shown, parameter).toEqual(answer.data.data.map((i) => ({ value: i.value, count: i.count })));
  }
}

describe('dashboard files served by the query service', () => {
  it('serves index.html uncached with a strict CSP at / and app routes, hashed assets immutable, API untouched', async () => {
    for (const path of [
      '/',
      `/sites/${owner.siteId}`,
      `/sites/${owner.siteId}/`,
      `/sites/${owner.siteId}/settings`,
    ]) {
      const res = await fetch(`${base}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/html');
      expect(res.headers.get('cache-control')).toBe('no-cache');
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("default-src 'none'");
      expect(csp).not.toContain('unsafe');
      const html = await res.text();
      expect(html).toMatch(/<script type="module" crossorigin src="\/assets\/index-[\w-]+\.js">/);
    }
    const html = await (await fetch(base)).text();
    const js = /src="(\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    const asset = await fetch(`${base}${js}`);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(asset.headers.get('content-type')).toContain('text/javascript');
    expect((await asset.text()).length).toBeGreaterThan(1000);
    const zipped = await fetch(`${base}${js}`, { headers: { 'accept-encoding': 'gzip' } });
    expect(zipped.headers.get('content-encoding')).toBe('gzip');
    expect(zipped.headers.get('vary')).toBe('Accept-Encoding');
    expect(await zipped.text()).toBe(
      await (await fetch(`${base}${js}`, { headers: { 'accept-encoding': 'identity' } })).text(),
    );
    for (const path of ['/assets/nope.js', '/assets/..%2F..%2Fpackage.json', '/sites/1/x', '/elsewhere']) {
      const res = await fetch(`${base}${path}`);
      expect(res.status, path).toBe(404);
      expect(((await res.json()) as { code: string }).code).toBe('NOT_FOUND');
    }
    const apiRes = await fetch(`${base}/api/sites/${owner.siteId}/overview`);
    expect(apiRes.status).toBe(401);
    expect(((await apiRes.json()) as { code: string }).code).toBe('MISSING_API_KEY');
  });
});

// A whole user journey of page loads and API answers: generous for a loaded CI machine.
describe('dashboard in headless Chromium', { timeout: 180_000 }, () => {
  it.skipIf(!hasChromium)(
    `signs in, shows the API's figures and top lists, filters by a clicked value, changes the range, opens a session${SKIP}`,
    async () => {
      const { context, page } = await newPage();
      const requested: string[] = [];
      page.on('request', (r) => requested.push(r.url()));
      await page.goto(base);
      // A key the API refuses is not kept.
      await page.getByLabel('API key').fill('th_not_a_real_key');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await expect(page.getByRole('alert').textContent()).resolves.toContain('not accepted');
      expect(await page.evaluate('localStorage.getItem("trackhouse.apiKey")')).toBeNull();
      await page.getByLabel('API key').fill(owner.key);
      await page.screenshot({ path: join(SHOTS, 'sign-in.png') });
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('link', { name: 'Site' }).first().waitFor();
      await page.screenshot({ path: join(SHOTS, 'sites.png') });
      expect(await page.evaluate('localStorage.getItem("trackhouse.apiKey")')).toBe(owner.key);
      await page.click(`a[href='/sites/${owner.siteId}']`);
      expect(new URL(page.url()).pathname).toBe(`/sites/${owner.siteId}`);

      const week = { start_date: utcDay(-6), end_date: utcDay(0) };
      await loaded(page, week.start_date, week.end_date);
      const auth = { authorization: `Bearer ${owner.key}` };
      const overview = await expectFiguresEqualApi(page, owner.siteId, week, auth);
      expect(overview.sessions).toBeGreaterThan(0);
      await expectListsEqualApi(page, owner.siteId, week, auth);
      const buckets = await api<{ data: unknown[] }>(
        owner.siteId,
        'overview-bucketed',
        { ...week, bucket: 'day' },
        auth,
      );
      expect(await page.getAttribute('.chart', 'data-points')).toBe(String(buckets.data.length));
      expect(await page.locator('.chart canvas').count()).toBe(1);
      const goals = await api<{
        data: { goalId: number; total_conversions: number; conversion_rate: number }[];
      }>(owner.siteId, 'goals', week, auth);
      expect(await page.locator(`[data-goal='${goals.data[0]!.goalId}'] td`).nth(1).textContent()).toBe(
        String(goals.data[0]!.total_conversions),
      );
      expect(await page.locator(`[data-goal='${goals.data[0]!.goalId}'] td`).nth(2).textContent()).toBe(
        `${(goals.data[0]!.conversion_rate * 100).toFixed(2)}%`,
      );
      const live = await api<{ count: number }>(owner.siteId, 'live-user-count', {}, auth);
      expect(await page.getAttribute('.live', 'data-value')).toBe(String(live.count));
      const latest = await api<{ data: { event_id: string }[] }>(
        owner.siteId,
        'events',
        { ...week, page_size: '30' },
        auth,
      );
      expect(await page.$$eval('.events li', (els) => els.map((e) => e.getAttribute('data-event')))).toEqual(
        latest.data.map((e) => e.event_id),
      );
      await page.screenshot({ path: join(SHOTS, 'site.png') });
      await page.screenshot({ path: join(SHOTS, 'site-full.png'), fullPage: true });

      // Click the top browser: a chip appears and every figure is the filtered answer.
      const browserValue = (await page.getAttribute("[data-list='browser'] li", 'data-value'))!;
      await page.click("[data-list='browser'] li button");
      const filters = [{ parameter: 'browser', type: 'equals', value: [browserValue] }];
      await loaded(page, week.start_date, week.end_date, filters);
      await expect(page.locator('.chip').textContent()).resolves.toContain(`Browsers is ${browserValue}`);
      const filtered = await expectFiguresEqualApi(
        page,
        owner.siteId,
        { ...week, filters: JSON.stringify(filters) },
        auth,
      );
      expect(filtered.sessions).toBeLessThan(overview.sessions!);
      await expectListsEqualApi(page, owner.siteId, { ...week, filters: JSON.stringify(filters) }, auth);
      await page.evaluate('window.scrollTo(0, 0)');
      await page.screenshot({ path: join(SHOTS, 'site-filtered.png') });
      await page.getByRole('button', { name: `Remove filter Browsers is ${browserValue}` }).click();
      await loaded(page, week.start_date, week.end_date);
      expect(await page.locator('.chip').count()).toBe(0);
      expect(await shownFigures(page)).toEqual(Object.fromEntries(FIGURES.map((f) => [f, overview[f]])));

      // A longer range: new figures, one chart point per day.
      await page.getByRole('button', { name: '30 days' }).click();
      const month = { start_date: utcDay(-29), end_date: utcDay(0) };
      await loaded(page, month.start_date, month.end_date);
      const monthly = await expectFiguresEqualApi(page, owner.siteId, month, auth);
      expect(monthly.sessions).toBeGreaterThan(overview.sessions!);
      expect(await page.getAttribute('.chart', 'data-points')).toBe('30');
      await expect(page.getAttribute('.preset[aria-pressed=true]', 'class')).resolves.toBe('preset');

      // Two dates of one's own.
      const custom = { start_date: utcDay(-13), end_date: utcDay(-2) };
      await page.getByLabel('Start date').fill(custom.start_date);
      await page.getByLabel('End date').fill(custom.end_date);
      await loaded(page, custom.start_date, custom.end_date);
      await expectFiguresEqualApi(page, owner.siteId, custom, auth);
      await expectListsEqualApi(page, owner.siteId, custom, auth);
      expect(await page.locator('.preset[aria-pressed=true]').count()).toBe(0);

      // Export: the file is the API's export of the same range.
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('button', { name: 'CSV' }).click(),
      ]);
      const csv = await readFile((await download.path())!, 'utf8');
      const expected = await fetch(
        `${base}/api/sites/${owner.siteId}/export?${new URLSearchParams({ ...custom, time_zone: 'UTC', format: 'csv' })}`,
        { headers: auth },
      );
      expect(csv).toBe(await expected.text());
      expect(csv.split('\n').length).toBeGreaterThan(100);
      expect(download.suggestedFilename()).toBe(
        `trackhouse-site-${owner.siteId}-${custom.start_date}-${custom.end_date}.csv`,
      );

      // A session's timeline is the session's events from the API.
      const first = (await page.getAttribute('[data-session]', 'data-session'))!;
      await page.click(`[data-session='${first}']`);
      await page.waitForSelector('#session-detail .timeline');
      const session = await api<{ data: { events: { pathname: string; type: string }[] } }>(
        owner.siteId,
        `sessions/${first}`,
        { limit: '200' },
        auth,
      );
      expect(await page.locator('#session-detail .timeline li').count()).toBe(session.data.events.length);
      expect(
        await page.$$eval('#session-detail .timeline li', (els) =>
          els.map((e) => e.getAttribute('data-type')),
        ),
      ).toEqual(session.data.events.map((e) => e.type));
      await page.locator('#session-detail').screenshot({ path: join(SHOTS, 'session.png') });

      // The key went only in headers, never in an address.
      expect(requested.some((u) => u.includes(owner.key))).toBe(false);
      await page.getByRole('button', { name: 'Sign out' }).click();
      expect(await page.evaluate('localStorage.getItem("trackhouse.apiKey")')).toBeNull();
      await page.getByLabel('API key').waitFor();
      await context.close();
    },
  );

  it.skipIf(!hasChromium)(`opens a public site without signing in, at phone width${SKIP}`, async () => {
    const { context, page } = await newPage(390, 844);
    await page.goto(`${base}/sites/${publicSite.siteId}`);
    const week = { start_date: utcDay(-6), end_date: utcDay(0) };
    await loaded(page, week.start_date, week.end_date);
    const data = await expectFiguresEqualApi(page, publicSite.siteId, week);
    expect(data.pageviews).toBeGreaterThan(0);
    await expectListsEqualApi(page, publicSite.siteId, week);
    await page.screenshot({ path: join(SHOTS, 'public-phone.png') });
    // Nothing overflows sideways at phone width.
    expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await context.close();
  });

  it.skipIf(!hasChromium)(
    `opens a private link, takes its key out of the address, and refuses without it${SKIP}`,
    async () => {
      const { context, page } = await newPage();
      const requests: Record<string, string>[] = [];
      page.on('request', (r) => {
        if (r.url().includes('/overview?')) requests.push(r.headers());
      });
      await page.goto(`${base}/sites/${privateSite.siteId}?private_key=${PRIVATE_KEY}`);
      const week = { start_date: utcDay(-6), end_date: utcDay(0) };
      await loaded(page, week.start_date, week.end_date);
      expect(page.url()).toBe(`${base}/sites/${privateSite.siteId}`);
      expect(requests[0]!['x-private-key']).toBe(PRIVATE_KEY);
      await expectFiguresEqualApi(page, privateSite.siteId, week, { 'x-private-key': PRIVATE_KEY });
      await page.screenshot({ path: join(SHOTS, 'private-link.png') });
      await context.close();

      const other = await newPage();
      await other.page.goto(`${base}/sites/${privateSite.siteId}`);
      await other.page.getByLabel('API key').waitFor();
      expect(await other.page.locator('[data-metric]').count()).toBe(0);
      await other.context.close();
    },
  );
});
