import { join } from 'node:path';
import { generateEvents, insertEvents } from '@trackhouse/clickhouse';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasChromium, SKIP_REASON } from '../../../test/browser';
import type { QueryHarness } from '../../query/test/harness';
import { openPage, SHOTS, serveDashboard } from './served';

const SKIP = SKIP_REASON;

let h: QueryHarness;
let served: Awaited<ReturnType<typeof serveDashboard>> | undefined;
let base: string;
let browser: Browser | undefined;

beforeAll(async () => {
  served = await serveDashboard();
  ({ h, base, browser } = served);
}, 120_000);

afterAll(async () => {
  await served?.close();
});

/** The API's own answer, with the given key. */
async function api<T = Record<string, unknown>>(path: string, key?: string, init: RequestInit = {}) {
  const res = await fetch(`${base}${path}`, {
    ...init,
    headers: {
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...(init.body ? { 'content-type': 'application/json' } : {}),
    },
  });
  return { status: res.status, body: (await res.json()) as T };
}

type Site = { name: string; domain: string; public: boolean; trackErrors: boolean; isOwner: boolean };
type GoalList = {
  data: { goalId: number; name: string; goalType: string; config: Record<string, unknown> }[];
};

const newPage = (width?: number, height?: number) => openPage(browser!, width, height);

/** Signs in through the form, as a person would, then opens the site's settings from its dashboard. */
async function openSettings(page: Page, key: string, siteId: number): Promise<void> {
  await page.goto(base);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Your sites' }).waitFor();
  await page.goto(`${base}/sites/${siteId}`);
  await page.getByRole('link', { name: 'Settings' }).click();
  expect(new URL(page.url()).pathname).toBe(`/sites/${siteId}/settings`);
  await page.waitForSelector('[data-goals]');
}

const section = (page: Page, name: string) => page.getByRole('region', { name, exact: true });

describe('site settings in headless Chromium', { timeout: 180_000 }, () => {
  it.skipIf(!hasChromium)(
    `an owner renames the site, makes it public and changes a switch; the API and a reload agree${SKIP}`,
    async () => {
      const t = await h.tenant('owner');
      const { context, page } = await newPage();
      await openSettings(page, t.key, t.siteId);
      expect(await page.getByLabel('Name', { exact: true }).inputValue()).toBe('Site');

      // A value the API refuses: its message is shown and nothing changes.
      await page.getByLabel('Domain').fill('not a domain');
      await page.getByRole('button', { name: 'Save site settings' }).click();
      const alert = section(page, 'Site').getByRole('alert');
      await expect(alert.textContent()).resolves.toBe('Invalid payload — domain: not a domain name');
      expect((await api<Site>(`/api/sites/${t.siteId}`, t.key)).body.domain).toBe('example.com');

      await page.getByLabel('Name', { exact: true }).fill('Docs site');
      await page.getByLabel('Domain').fill('docs.example.org');
      await page.getByLabel('Public dashboard').check();
      await page.getByLabel('Track JavaScript errors').check();
      await page.getByLabel('Monthly pageview limit').fill('50000');
      await page.getByRole('button', { name: 'Save site settings' }).click();
      await section(page, 'Site').getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
      const saved = (await api<Site & { monthlyPageviewLimit: number }>(`/api/sites/${t.siteId}`, t.key))
        .body;
      expect(saved).toMatchObject({
        name: 'Docs site',
        domain: 'docs.example.org',
        public: true,
        trackErrors: true,
        monthlyPageviewLimit: 50000,
      });
      await expect(page.locator('h1 .site-name').textContent()).resolves.toBe('Docs site');

      await page.reload();
      await page.waitForSelector('[data-goals]');
      expect(await page.getByLabel('Name', { exact: true }).inputValue()).toBe('Docs site');
      expect(await page.getByLabel('Domain').inputValue()).toBe('docs.example.org');
      expect(await page.getByLabel('Public dashboard').isChecked()).toBe(true);
      expect(await page.getByLabel('Track JavaScript errors').isChecked()).toBe(true);
      expect(await page.getByLabel('Track copied text').isChecked()).toBe(false);

      // Back off again: the unchecked box reaches the API as false.
      await page.getByLabel('Public dashboard').uncheck();
      await page.getByRole('button', { name: 'Save site settings' }).click();
      await section(page, 'Site').getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
      expect((await api<Site>(`/api/sites/${t.siteId}`, t.key)).body.public).toBe(false);
      await context.close();
    },
  );

  it.skipIf(!hasChromium)(`edits the exclusion lists; the API has each change${SKIP}`, async () => {
    const t = await h.tenant('owner');
    const { context, page } = await newPage();
    await openSettings(page, t.key, t.siteId);
    const ips = () => api<{ excludedIPs: string[] }>(`/api/sites/${t.siteId}/excluded-ips`, t.key);
    const add = async (label: string, value: string) => {
      await page.getByLabel(label).fill(value);
      await page.getByLabel(label).press('Enter');
    };
    const card = section(page, 'Exclusions');

    await add('Add: IP address or CIDR range', '203.0.113.7');
    await page.waitForSelector("[data-list='excludedIPs'] li[data-value='203.0.113.7']");
    expect((await ips()).body.excludedIPs).toEqual(['203.0.113.7']);
    await add('Add: IP address or CIDR range', '10.1.2.3/8');
    // The API normalizes a range; the page shows what the API stored.
    await page.waitForSelector("[data-list='excludedIPs'] li[data-value='10.0.0.0/8']");
    expect((await ips()).body.excludedIPs).toEqual(['203.0.113.7', '10.0.0.0/8']);

    await add('Add: IP address or CIDR range', 'nope');
    await expect(card.getByRole('alert').textContent()).resolves.toBe(
      'Invalid payload — excludedIPs: not an IP address or CIDR range: nope',
    );
    expect((await ips()).body.excludedIPs).toEqual(['203.0.113.7', '10.0.0.0/8']);

    await add('Add: Country code', 'de');
    await page.waitForSelector("[data-list='excludedCountries'] li[data-value='DE']");
    expect(
      (await api<{ excludedCountries: string[] }>(`/api/sites/${t.siteId}/excluded-countries`, t.key)).body
        .excludedCountries,
    ).toEqual(['DE']);

    await page.getByRole('button', { name: 'Remove 203.0.113.7' }).click();
    await page.waitForSelector("[data-list='excludedIPs'] li[data-value='203.0.113.7']", {
      state: 'detached',
    });
    expect((await ips()).body.excludedIPs).toEqual(['10.0.0.0/8']);
    await context.close();
  });

  it.skipIf(!hasChromium)(
    `creates a private link that opens the dashboard without a key, then revokes it${SKIP}`,
    async () => {
      const t = await h.tenant('owner');
      await insertEvents(h.ch, generateEvents({ siteId: t.siteId, events: 300, days: 5, seed: 21 }));
      const { context, page } = await newPage();
      await openSettings(page, t.key, t.siteId);
      const card = section(page, 'Private link');
      await expect(card.locator('.link-state').textContent()).resolves.toMatch(/^No private link/);
      await page.getByRole('button', { name: 'Create private link' }).click();
      await page.waitForSelector("[data-exists='true']");
      const url = await page.getByLabel('Private link address').inputValue();
      const config = await api<{ data: { privateLinkKey: string } }>(
        `/api/sites/${t.siteId}/private-link-config`,
        t.key,
      );
      expect(config.body.data.privateLinkKey).toMatch(/\S{16,}/);
      expect(url).toBe(`${base}/sites/${t.siteId}?private_key=${config.body.data.privateLinkKey}`);
      await context.grantPermissions(['clipboard-read', 'clipboard-write']);
      await page.getByRole('button', { name: 'Copy link' }).click();
      await card.getByRole('status').filter({ hasText: 'Link copied.' }).waitFor();
      expect(await page.evaluate('navigator.clipboard.readText()')).toBe(url);
      await page.screenshot({ path: join(SHOTS, 'settings.png'), fullPage: true });

      // A fresh browser with no stored key sees the dashboard through the link.
      const visitor = await newPage();
      await visitor.page.goto(url);
      await visitor.page.waitForSelector('main[data-loaded]');
      expect(await visitor.page.locator('[data-metric]').count()).toBe(6);
      expect(
        Number(await visitor.page.getAttribute("[data-metric='pageviews']", 'data-value')),
      ).toBeGreaterThan(0);
      // Not signed in: no way to the settings.
      expect(await visitor.page.getByRole('link', { name: 'Settings' }).count()).toBe(0);
      await visitor.context.close();

      // Rotating replaces the key; revoking removes it, and the old address then says so.
      await page.getByRole('button', { name: 'Rotate private link' }).click();
      await expect.poll(() => page.getByLabel('Private link address').inputValue()).not.toBe(url);
      const rotated = await page.getByLabel('Private link address').inputValue();
      await page.getByRole('button', { name: 'Revoke private link' }).click();
      await page.waitForSelector("[data-exists='false']");
      expect(
        (await api<{ data: { privateLinkKey: null } }>(`/api/sites/${t.siteId}/private-link-config`, t.key))
          .body.data.privateLinkKey,
      ).toBeNull();
      const late = await newPage();
      await late.page.goto(rotated);
      await expect(late.page.getByRole('alert').textContent()).resolves.toBe(
        'This private link no longer works: it was revoked or replaced. Sign in to see this site.',
      );
      expect(await late.page.locator('[data-metric]').count()).toBe(0);
      await late.context.close();
      await context.close();
    },
  );

  it.skipIf(!hasChromium)(`creates, edits and deletes goals; the goal list API follows${SKIP}`, async () => {
    const t = await h.tenant('owner');
    const { context, page } = await newPage();
    await openSettings(page, t.key, t.siteId);
    const goals = async () =>
      (await api<GoalList>(`/api/sites/${t.siteId}/goals?page_size=100&order=asc`, t.key)).body.data.map(
        ({ name, goalType, config }) => ({ name, goalType, config }),
      );
    const card = section(page, 'Goals');

    await page.getByLabel('Goal name').fill('Saw pricing');
    await page.getByLabel('Path pattern').fill('pricing');
    await page.getByRole('button', { name: 'Add goal' }).click();
    await expect(card.getByRole('alert').textContent()).resolves.toBe(
      'Invalid payload — config: must start with /',
    );
    expect(await goals()).toEqual([]);
    await page.getByLabel('Path pattern').fill('/pricing');
    await page.getByRole('button', { name: 'Add goal' }).click();
    await page.waitForSelector("[data-goals='1']");

    await page.getByLabel('Goal name').fill('Signed up (pro)');
    await page.getByLabel('A custom event').check();
    expect(await page.getByLabel('Path pattern').isVisible()).toBe(false);
    await page.getByLabel('Event name').fill('signup');
    await page.getByLabel('Property (optional)').fill('plan');
    await page.getByLabel('Property value').fill('pro');
    await page.getByRole('button', { name: 'Add goal' }).click();
    await page.waitForSelector("[data-goals='2']");
    expect(await goals()).toEqual([
      { name: 'Saw pricing', goalType: 'path', config: { pathPattern: '/pricing' } },
      {
        name: 'Signed up (pro)',
        goalType: 'event',
        config: { eventName: 'signup', eventPropertyKey: 'plan', eventPropertyValue: 'pro' },
      },
    ]);
    await expect(card.locator('li').nth(1).textContent()).resolves.toContain(
      'Event signup where plan = "pro"',
    );

    // Edit: the form takes the goal's values and saves it in place.
    await page.getByRole('button', { name: 'Edit goal Saw pricing' }).click();
    expect(await page.getByLabel('Path pattern').inputValue()).toBe('/pricing');
    await page.getByLabel('Path pattern').fill('/pricing/**');
    await page.getByRole('button', { name: 'Save goal' }).click();
    await card.getByRole('status').filter({ hasText: 'Goal saved.' }).waitFor();
    expect((await goals())[0]).toEqual({
      name: 'Saw pricing',
      goalType: 'path',
      config: { pathPattern: '/pricing/**' },
    });

    await page.getByRole('button', { name: 'Delete goal Signed up (pro)' }).click();
    await page.waitForSelector("[data-goals='1']");
    expect((await goals()).map((g) => g.name)).toEqual(['Saw pricing']);

    // A property compared as a number reaches the API as a number.
    await page.getByLabel('Goal name').fill('Three items');
    await page.getByLabel('A custom event').check();
    await page.getByLabel('Event name').fill('add_to_cart');
    await page.getByLabel('Property (optional)').fill('items');
    await page.getByLabel('Property value').fill('3');
    await page.getByLabel('Compare the value as a number').check();
    await page.getByRole('button', { name: 'Add goal' }).click();
    await page.waitForSelector("[data-goals='2']");
    expect((await goals())[1]!.config).toEqual({
      eventName: 'add_to_cart',
      eventPropertyKey: 'items',
      eventPropertyValue: 3,
    });
    await context.close();
  });

  it.skipIf(!hasChromium)(
    `a member sees the config read only, the private link refused by the API, and may manage goals${SKIP}`,
    async () => {
      const t = await h.tenant('owner');
      await api(`/api/sites/${t.siteId}/config`, t.key, {
        method: 'PUT',
        body: JSON.stringify({ excludedIPs: ['192.0.2.1'] }),
      });
      const member = await h.member(t.organizationId, 'member');
      // The spec's rule, from the API itself: a member is not an owner and may not change the config.
      expect((await api<Site>(`/api/sites/${t.siteId}`, member.key)).body.isOwner).toBe(false);
      const refused = await api<{ code: string; error: string }>(
        `/api/sites/${t.siteId}/config`,
        member.key,
        {
          method: 'PUT',
          body: JSON.stringify({ name: 'Mine' }),
        },
      );
      expect([refused.status, refused.body.code]).toEqual([403, 'FORBIDDEN_ROLE']);

      const { context, page } = await newPage();
      await openSettings(page, member.key, t.siteId);
      await expect(page.locator('#readonly-note').textContent()).resolves.toMatch(/^Read only/);
      expect(await page.getByLabel('Name', { exact: true }).isDisabled()).toBe(true);
      expect(await page.getByLabel('Public dashboard').isDisabled()).toBe(true);
      expect(await page.getByRole('button', { name: 'Save site settings' }).count()).toBe(0);
      // The exclusions are shown, not editable.
      await page.waitForSelector("[data-list='excludedIPs'] li[data-value='192.0.2.1']");
      expect(await page.getByRole('button', { name: 'Remove 192.0.2.1' }).count()).toBe(0);
      expect(await page.getByLabel('Add: IP address or CIDR range').count()).toBe(0);
      // The private link: the API's refusal, in its words.
      const link = await api<{ error: string }>(`/api/sites/${t.siteId}/private-link-config`, member.key);
      expect(link.status).toBe(403);
      await expect(section(page, 'Private link').locator('[data-refused]').textContent()).resolves.toBe(
        link.body.error,
      );
      expect(await page.getByRole('button', { name: 'Create private link' }).count()).toBe(0);

      // Goals are any member's to change (SPEC section 4).
      await page.getByLabel('Goal name').fill('Read the docs');
      await page.getByLabel('Path pattern').fill('/docs/**');
      await page.getByRole('button', { name: 'Add goal' }).click();
      await page.waitForSelector("[data-goals='1']");
      const list = await api<GoalList>(`/api/sites/${t.siteId}/goals`, t.key);
      expect(list.body.data.map((g) => [g.name, g.config])).toEqual([
        ['Read the docs', { pathPattern: '/docs/**' }],
      ]);
      await page.screenshot({ path: join(SHOTS, 'settings-member.png'), fullPage: true });
      await context.close();
    },
  );

  it.skipIf(!hasChromium)(`fits a phone's width${SKIP}`, async () => {
    const t = await h.tenant('owner');
    const { context, page } = await newPage(390, 844);
    await openSettings(page, t.key, t.siteId);
    await page.getByRole('button', { name: 'Create private link' }).click();
    await page.waitForSelector("[data-exists='true']");
    await page.evaluate('window.scrollTo(0, 0)');
    await page.screenshot({ path: join(SHOTS, 'settings-phone.png') });
    expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await context.close();
  });
});
