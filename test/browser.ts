import { existsSync } from 'node:fs';
import type { Browser } from 'playwright-core';

/** Debian's Chromium, driven by playwright-core in the browser tests and `pnpm bench dashboard`. */
export const CHROMIUM = '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);
/** A desktop Chrome's user agent, so that pages are classified as a real visitor's. */
export const CHROME_UA =
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
/** Appended to a browser test's name when it cannot run here, so the skip says why. */
export const SKIP_REASON = hasChromium ? '' : ' — skipped: /usr/bin/chromium is not installed';

/** A headless Chromium for tests and benchmarks (no sandbox: CI runs as root). */
export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-dev-shm-usage',
    ],
  });
}
