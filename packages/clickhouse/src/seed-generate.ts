import type { StoredEvent } from './rows';
import {
  CLIENTS,
  CUSTOM_EVENTS,
  ERRORS,
  OUTBOUND,
  PAGES,
  type Page,
  PLACES,
  PLANS,
  picker,
  SOURCES,
  type Source,
} from './seed-catalog';

export interface SeedOptions {
  siteId: number;
  events: number;
  days: number;
  /** End of the generated period (default: now). */
  end?: Date;
  seed?: number;
  /** Chance that an event reuses the previous event's millisecond (paging ties). */
  tieRate?: number;
  /**
   * Also what the browser client captures when a site turns it on: web vitals on page loads,
   * button clicks, copies and form interactions. Off by default (the same events as before);
   * `seedEvents` turns it on.
   */
  product?: boolean;
}

/** A small deterministic PRNG (mulberry32): the same seed, the same data. */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const chTime = (ms: number) => {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
};

/** A UUID v7 of `ms` whose random bits come from `r`, so that ids are reproducible too. */
function uuid7(ms: number, r: () => number): string {
  const hex = ms.toString(16).padStart(12, '0');
  const bits = (n: number) =>
    Math.floor(r() * 16 ** n)
      .toString(16)
      .padStart(n, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8)}-7${bits(3)}-${(8 + Math.floor(r() * 4)).toString(16)}${bits(3)}-${bits(6)}${bits(6)}`;
}

const pickPage = picker(PAGES);
const pickSource = picker(SOURCES);
const pickPlace = picker(PLACES);
const pickClient = picker(CLIENTS);
const pickPlan = picker(PLANS);
const pickOutbound = picker(OUTBOUND);
const pickError = picker(ERRORS);
const pageByPath = new Map(PAGES.map(([p]) => [p.path, p]));

/** Relative traffic by UTC hour (a global audience, Europe and the Americas awake) and weekday. */
const HOURLY = [3, 2.5, 2, 2, 2.5, 3, 4, 5.5, 7, 8, 8.5, 9, 9.5, 10, 10, 10, 9.5, 9, 8, 7, 6, 5, 4.5, 3.5];
const WEEKDAY = [0.7, 1, 1.05, 1.05, 1, 0.95, 0.7]; // Sunday first

/** Maps a fraction of all sessions to its start time, following the daily and weekly rhythm. */
function startTimes(startMs: number, days: number): (fraction: number) => number {
  const hours = days * 24;
  const first = Math.floor(startMs / 3_600_000);
  const cumulative: number[] = [];
  let total = 0;
  for (let h = 0; h < hours; h++) {
    const at = (first + h) * 3_600_000;
    total += HOURLY[new Date(at).getUTCHours()]! * WEEKDAY[new Date(at).getUTCDay()]!;
    cumulative.push(total);
  }
  return (fraction) => {
    const x = fraction * total;
    let lo = 0;
    let hi = hours - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! > x) hi = mid;
      else lo = mid + 1;
    }
    const before = lo === 0 ? 0 : cumulative[lo - 1]!;
    const within = (x - before) / (cumulative[lo]! - before);
    return Math.max(startMs, Math.floor((first + lo + within) * 3_600_000));
  };
}

const pickers = new WeakMap<object, (u: number) => string>();
/** One picker per weighted list of strings, built on first use. */
function pickFrom(list: readonly (readonly [string, number])[], u: number): string {
  let pick = pickers.get(list);
  if (!pick) {
    pick = picker(list);
    pickers.set(list, pick);
  }
  return pick(u);
}

const MASK64 = (1n << 64n) - 1n;

/**
 * A visitor's anonymous id as the ingest service makes them (16 hex characters of a hash): the
 * visitor's number (from 1: the mix keeps 0 as 0) mixed by a bijection of 64 bits (SplitMix64's
 * finalizer), so ids stay distinct and spread over the whole key space as real ones do.
 * Sequential ids would flatter every distinct count and every table sorted by visitor: their
 * keys are dense.
 */
export function seedUserId(visitor: number): string {
  let z = BigInt(visitor + 1);
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  z ^= z >> 31n;
  return z.toString(16).padStart(16, '0');
}

/** A visitor's lasting traits, drawn from their own number (the same visitor, the same device). */
function visitorTraits(visitor: number, seed: number) {
  const r = rng((visitor * 2654435761) ^ seed);
  const userId = seedUserId(visitor);
  const place = pickPlace(r());
  const client = pickClient(r());
  const [width, height] = client.screens[Math.floor(r() * client.screens.length)]!;
  return {
    place,
    client,
    language: pickFrom(place.languages, r()),
    browserVersion: pickFrom(client.versions, r()),
    osVersion: pickFrom(client.osVersions, r()),
    width,
    height,
    identified: visitor % 9 === 0 ? `customer-${visitor}` : '',
    userId,
  };
}

/** Seconds a visitor spends on a page: log-normal, median half a minute, at most 20 minutes. */
function dwellMs(r: () => number): number {
  const normal = Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  return Math.min(1_200_000, Math.max(1_000, Math.round(30_000 * Math.exp(1.1 * normal))));
}

function landingQuery(source: Source, r: () => number): string {
  const keys = ['utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content'];
  const params = source.utm.flatMap((v, i) => (v ? [`${keys[i]}=${encodeURIComponent(v)}`] : []));
  if (source.clickId) params.push(`${source.clickId}=${Math.floor(r() * 2 ** 40).toString(36)}`);
  return params.length ? `?${params.join('&')}` : '';
}

/** Events that may follow a pageview on the same page: conversions, clicks away, errors. */
function followUps(
  page: Page,
  r: () => number,
): { type: StoredEvent['type']; name: string; properties: object }[] {
  const out: { type: StoredEvent['type']; name: string; properties: object }[] = [];
  for (const [name, path] of Object.entries(CUSTOM_EVENTS)) {
    if (page.path === path && r() < 0.45)
      out.push({
        type: 'custom_event',
        name,
        properties: { plan: pickPlan(r()), value: Math.floor(r() * 5), trial: r() < 0.3 },
      });
  }
  if (page.path.startsWith('/blog/') && r() < 0.08)
    out.push({
      type: 'custom_event',
      name: r() < 0.6 ? 'share' : 'play',
      properties: { plan: pickPlan(r()), value: 1, trial: false },
    });
  if (page.path.startsWith('/docs/') && r() < 0.12)
    out.push({
      type: 'custom_event',
      name: 'copy_code',
      properties: { plan: 'free', value: 0, trial: false },
    });
  if (r() < 0.035)
    out.push({ type: 'outbound', name: '', properties: { url: pickOutbound(r()), text: 'link' } });
  if (r() < 0.006) {
    const [name, message] = pickError(r());
    out.push({ type: 'error', name, properties: { message, lineno: 1 + Math.floor(r() * 400) } });
  }
  return out;
}

/** A log-normal draw around `median` (spread `sigma`), rounded to `digits` decimals. */
function logNormal(r: () => number, median: number, sigma: number, digits = 0): number {
  const normal = Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  const f = 10 ** digits;
  return Math.round(median * Math.exp(sigma * normal) * f) / f;
}

/** Button texts by page, as the browser client reads them (text, else aria-label or title). */
const BUTTONS: Record<string, readonly string[]> = {
  '/': ['Start free trial', 'See the demo', 'Menu'],
  '/pricing': ['Start free trial', 'Monthly', 'Yearly', 'Contact sales'],
  '/signup': ['Create account', 'Sign up with Google'],
  '/login': ['Log in', 'Forgot password?'],
  '/checkout/cart': ['Continue to payment', 'Apply coupon'],
  '/checkout/pay': ['Pay now'],
};
const COPIED = [
  'npm install @rybbit/js',
  '<script src="https://acme.example/script.js" defer></script>',
  'SAVE20',
];
/** Forms by page: id, name, action and the fields changed before submitting. */
const FORMS: Record<string, { formId: string; formName: string; formAction: string; fields: string[] }> = {
  '/signup': { formId: 'signup', formName: 'signup', formAction: '/api/signup', fields: ['email', 'name'] },
  '/login': { formId: 'login', formName: '', formAction: '/api/login', fields: ['email'] },
  '/contact': { formId: '', formName: 'contact', formAction: '/api/contact', fields: ['email', 'message'] },
  '/checkout/pay': { formId: 'payment', formName: '', formAction: '', fields: ['card-name', 'country'] },
};

type Step = {
  type: StoredEvent['type'];
  name: string;
  properties: object;
  vitals?: Record<string, number | null>;
};

/**
 * What the browser client captures on a page beyond pageviews, from its own draws `x` (so the
 * other events stay as they are): web vitals after a full page load (the session's landing page;
 * INP only after an interaction, CLS often 0, slower on phones), clicks on the page's buttons,
 * copied snippets on docs pages, field changes and submits of its form.
 */
function productSteps(page: Page, landing: boolean, device: string, x: () => number): Step[] {
  const out: Step[] = [];
  const slow = device === 'mobile' ? 1.6 : 1;
  if (landing ? x() < 0.6 : x() < 0.05) {
    const ttfb = x() < 0.03 ? null : logNormal(x, 350 * slow, 0.7);
    const fcp = logNormal(x, 1100 * slow, 0.5) + (ttfb ?? 0);
    out.push({
      type: 'performance',
      name: 'web-vitals',
      properties: {},
      vitals: {
        lcp: x() < 0.04 ? null : Math.round(fcp + logNormal(x, 500 * slow, 0.8)),
        cls: x() < 0.05 ? null : x() < 0.55 ? 0 : logNormal(x, 0.05, 1.1, 4),
        inp: x() < 0.4 ? null : 8 * Math.max(1, Math.round(logNormal(x, 120 * slow, 0.8) / 8)),
        fcp: Math.round(fcp * 10) / 10,
        ttfb,
      },
    });
  }
  const buttons = BUTTONS[page.path];
  if (buttons && x() < 0.12)
    out.push({
      type: 'button_click',
      name: '',
      properties: { text: buttons[Math.floor(x() * buttons.length)]! },
    });
  if (page.path.startsWith('/docs/') && x() < 0.05)
    out.push({
      type: 'copy',
      name: '',
      properties: { text: COPIED[Math.floor(x() * COPIED.length)]!, sourceElement: 'code' },
    });
  const form = FORMS[page.path];
  if (form && x() < 0.3) {
    const { fields, ...ids } = form;
    for (const field of fields)
      out.push({
        type: 'input_change',
        name: '',
        properties: {
          element: 'input',
          inputName: field,
          inputType: 'text',
          ...(ids.formId ? { formId: ids.formId } : {}),
        },
      });
    if (x() < 0.7)
      out.push({
        type: 'form_submit',
        name: '',
        properties: { ...ids, method: 'POST', fieldCount: fields.length + 1 },
      });
  }
  return out;
}

/**
 * Realistic traffic, reproducible from `seed`: returning visitors (a few come often, most once)
 * with lasting devices, places and languages; sessions from skewed sources with their UTM values
 * and click ids, landing where such visitors land; about four in ten sessions a single pageview,
 * the others a few pages with log-normal dwell times; conversions on the pages where they
 * happen, outbound clicks and a few JavaScript errors. Sessions start in time order following
 * the daily and weekly rhythm; ids carry their start time as the ingest service's do. As ingest
 * stores them, referrer and UTM values sit on a session's landing pageview only.
 */
export function* generateEvents(opts: SeedOptions): Generator<StoredEvent> {
  const seed = opts.seed ?? 1;
  const r = rng(seed);
  const end = (opts.end ?? new Date()).getTime();
  const startAt = startTimes(end - opts.days * 86_400_000, opts.days);
  const visitors = Math.max(1, Math.floor(opts.events / 14));
  const tieRate = opts.tieRate ?? 0;
  const x = rng(seed ^ 0x5bd1e995);
  let produced = 0;
  while (produced < opts.events) {
    // Squaring the draw makes low numbers (returning visitors) far likelier than high ones.
    const u = r();
    const visitor = Math.floor(u * u * visitors);
    const traits = visitorTraits(visitor, seed);
    const source = pickSource(r());
    const loggedIn = traits.identified !== '' && r() < 0.6;
    const pageviews = r() < 0.42 ? 1 : 2 + Math.min(28, Math.floor(Math.log(1 - r()) / Math.log(0.7)));
    let ms = startAt((produced + r()) / opts.events);
    const sessionId = uuid7(ms, r);
    let page = source.lands
      ? pageByPath.get(source.lands[Math.floor(r() * source.lands.length)]!)!
      : pickPage(r());
    let identified = loggedIn ? traits.identified : '';
    let first = true;
    // A session still going at the end of the period stops there: its later events have not
    // happened yet (piled on the last millisecond, they made ties no real session has).
    visit: for (let n = 0; n < pageviews && produced < opts.events; n++) {
      if (n > 0) {
        let next = pickPage(r());
        if (next === page) next = pickPage(r());
        page = next;
      }
      if (traits.identified && (page.path === '/login' || page.path === '/signup'))
        identified = traits.identified;
      const steps: Step[] = [
        { type: 'pageview', name: '', properties: {} },
        ...followUps(page, r),
        ...(opts.product ? productSteps(page, n === 0, traits.client.device, x) : []),
      ];
      for (const step of steps) {
        if (produced >= opts.events) break;
        if (!first && r() >= tieRate)
          ms += step.type === 'pageview' ? dwellMs(r) : 2_000 + Math.floor(r() * 40_000);
        if (ms >= end) {
          if (first) ms = end - 1;
          else break visit;
        }
        const props: Record<string, string> = {};
        for (const [k, v] of Object.entries(step.properties))
          props[k] = typeof v === 'string' ? v : JSON.stringify(v);
        const { place, client } = traits;
        yield {
          site_id: opts.siteId,
          timestamp: chTime(ms),
          event_id: uuid7(ms, r),
          type: step.type,
          event_name: step.name,
          properties: JSON.stringify(step.properties),
          props,
          session_id: sessionId,
          user_id: traits.userId,
          identified_user_id: identified,
          pathname: page.path,
          querystring: first ? landingQuery(source, r) : '',
          hostname: page.host,
          page_title: page.title,
          referrer: first ? source.referrer : '',
          channel: first ? source.channel : 'Direct',
          utm_source: first ? source.utm[0] : '',
          utm_medium: first ? source.utm[1] : '',
          utm_campaign: first ? source.utm[2] : '',
          utm_term: first ? source.utm[3] : '',
          utm_content: first ? source.utm[4] : '',
          browser: client.browser,
          browser_version: traits.browserVersion,
          operating_system: client.os,
          operating_system_version: traits.osVersion,
          device_type: client.device,
          language: traits.language,
          country: place.country,
          region: place.region,
          city: place.city,
          lat: place.lat,
          lon: place.lon,
          screen_width: traits.width,
          screen_height: traits.height,
          ...step.vitals,
        };
        first = false;
        produced++;
      }
    }
  }
}
