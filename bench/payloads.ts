import { rng } from '@trackhouse/clickhouse';

/**
 * A realistic, reproducible mix of tracking payloads: many UAs and IPs, every event type the
 * browser client sends (the bench turns every feature of its site on).
 */

const USER_AGENTS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36 Edg/130.0.0.0',
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:132.0) Gecko/20100101 Firefox/132.0',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Safari/605.1.15',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Safari/537.36',
  'Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:131.0) Gecko/20100101 Firefox/131.0',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.39 Mobile Safari/537.36',
  'Mozilla/5.0 (Linux; Android 13; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36',
  'Mozilla/5.0 (Linux; Android 12; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36',
  'Mozilla/5.0 (SMART-TV; Linux; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/4.0 Chrome/76.0.3809.146 TV Safari/537.36',
  'Mozilla/5.0 (PlayStation 5 3.20) AppleWebKit/605.1.15 (KHTML, like Gecko)',
  'Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Safari/537.36',
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/114.0.0.0',
  'Mozilla/5.0 (Linux; Android 14; moto g84 5G) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Mobile Safari/537.36',
];
const PATHS = [
  '/',
  '/pricing',
  '/blog',
  '/blog/launch',
  '/docs',
  '/docs/getting-started',
  '/signup',
  '/login',
  '/about',
  '/contact',
];
const REFERRERS = [
  '',
  '',
  '',
  'https://www.google.com/',
  'https://duckduckgo.com/',
  'https://t.co/abc',
  'https://news.ycombinator.com/',
  'https://chatgpt.com/',
  'https://blog.partner.io/post',
];
const QUERIES = [
  '',
  '',
  '',
  '?utm_source=newsletter&utm_medium=email',
  '?gclid=abc123',
  '?utm_source=facebook&utm_medium=paid_social&utm_campaign=fall',
];
const LANGS = ['en-US', 'en-GB', 'de-DE', 'fr-FR', 'es-ES', 'ja-JP', 'pt-BR'];

/** Shares of each type: pageviews first, then what the browser client sends beside them. */
const MIX: [string, number][] = [
  ['pageview', 0.6],
  ['performance', 0.1],
  ['custom_event', 0.12],
  ['outbound', 0.05],
  ['error', 0.03],
  ['button_click', 0.04],
  ['copy', 0.02],
  ['form_submit', 0.02],
  ['input_change', 0.02],
];

function pickType(roll: number): string {
  let sum = 0;
  for (const [type, share] of MIX) {
    sum += share;
    if (roll < sum) return type;
  }
  return 'pageview';
}

/** Properties as the browser client builds them for autocaptured events. */
const AUTOCAPTURE: Record<string, Record<string, unknown>> = {
  button_click: { text: 'Start free trial', plan: 'pro' },
  copy: { text: 'npm install trackhouse', sourceElement: 'code' },
  form_submit: { formId: 'signup', formName: '', formAction: '/signup', method: 'POST', fieldCount: 3 },
  input_change: { element: 'input', inputName: 'email', inputType: 'email', formId: 'signup' },
};

/**
 * `count` events from `count / 5` visitors (each with its own address and browser), as real
 * traffic has: visitors send several events, so addresses and user agents repeat.
 */
export function makeEvents(siteId: number, count: number, seed = 7): Record<string, unknown>[] {
  const r = rng(seed);
  const pick = <T>(list: readonly T[]) => list[Math.floor(r() * list.length)]!;
  // Public unicast addresses spread over many networks.
  const visitors = Array.from({ length: Math.max(1, Math.floor(count / 5)) }, () => ({
    ip: `${1 + Math.floor(r() * 223)}.${Math.floor(r() * 256)}.${Math.floor(r() * 256)}.${1 + Math.floor(r() * 254)}`,
    ua: pick(USER_AGENTS),
  }));
  const events: Record<string, unknown>[] = [];
  for (let i = 0; i < count; i++) {
    const type = pickType(r());
    const visitor = pick(visitors);
    const ip = visitor.ip;
    const event: Record<string, unknown> = {
      site_id: siteId,
      type,
      hostname: 'bench.test',
      pathname: pick(PATHS),
      page_title: 'Bench page',
      querystring: pick(QUERIES),
      referrer: pick(REFERRERS),
      user_agent: visitor.ua,
      ip_address: ip === '127.0.0.1' ? '8.8.8.8' : ip,
      language: pick(LANGS),
      screenWidth: pick([390, 414, 768, 1280, 1440, 1920]),
      screenHeight: pick([844, 896, 1024, 800, 900, 1080]),
    };
    if (type === 'custom_event') {
      event.event_name = pick(['signup', 'add_to_cart', 'purchase', 'play']);
      event.properties = JSON.stringify({
        plan: pick(['free', 'pro', 'team']),
        value: Math.floor(r() * 100),
      });
    } else if (type === 'outbound') {
      event.properties = JSON.stringify({ url: 'https://github.com/x', text: 'GitHub', target: '_blank' });
    } else if (type === 'error') {
      event.event_name = 'TypeError';
      event.properties = JSON.stringify({
        message: 'x is undefined',
        stack: 'at f (app.js:1:2)',
        fileName: 'app.js',
        lineNumber: 1,
      });
    } else if (type === 'performance') {
      event.event_name = 'web-vitals';
      Object.assign(event, {
        lcp: Math.round(800 + r() * 3000),
        cls: Math.round(r() * 30) / 100,
        inp: r() < 0.3 ? null : Math.round(40 + r() * 400),
        fcp: Math.round(400 + r() * 2000),
        ttfb: Math.round(50 + r() * 700),
      });
    } else if (type !== 'pageview') {
      event.properties = JSON.stringify(AUTOCAPTURE[type]);
    }
    events.push(event);
  }
  return events;
}
