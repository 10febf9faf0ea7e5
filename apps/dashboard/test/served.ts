import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { hasChromium, launchChromium } from '../../../test/browser';
import { ROOT } from '../../../test/helpers';
import { createQueryHarness, type QueryHarness } from '../../query/test/harness';

/** Test artifacts (ignored by git); a few are copied to docs/screenshots by hand. */
export const SHOTS = join(ROOT, '.tmp/screenshots');

/** The query service (which serves the dashboard) on a local port, and Chromium when installed. */
export async function serveDashboard(): Promise<{
  h: QueryHarness;
  base: string;
  browser: Browser | undefined;
  close: () => Promise<void>;
}> {
  const h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '100000' });
  let server: ReturnType<typeof serve> | undefined;
  await new Promise<void>((resolve) => {
    server = serve({ fetch: h.app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve());
  });
  const base = `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
  mkdirSync(SHOTS, { recursive: true });
  const browser = hasChromium ? await launchChromium() : undefined;
  return {
    h,
    base,
    browser,
    async close() {
      await browser?.close();
      await new Promise((r) => server?.close(r));
      await h.close();
    },
  };
}

/** A page in a fresh context (UTC, en-US), failing the test on any error the page throws. */
export async function openPage(
  browser: Browser,
  width = 1280,
  height = 900,
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({
    viewport: { width, height },
    timezoneId: 'UTC',
    locale: 'en-US',
  });
  const page = await context.newPage();
  page.setDefaultTimeout(90_000);
  page.on('pageerror', (err) => {
    throw err;
  });
  return { context, page };
}
