import { type CommonParams, rng, type StoredEvent } from '@trackhouse/clickhouse';
import { uuidv7FromSeed } from '@trackhouse/core';
import { compareEvents } from './reference';
import {
  type Bucket,
  bucketStart,
  bucketsBetween,
  byteOrder,
  localMidnight,
  ratio,
} from './traffic-reference';

/**
 * Brute-force answers of the error, web-vital and autocapture reads over generated events,
 * written from their definitions (docs/decisions.md), and the events themselves: what the
 * browser client sends for each type, added to the sessions of generated traffic.
 */

const ms = (e: StoredEvent) => Date.parse(`${e.timestamp.replace(' ', 'T')}Z`);
const chTime = (at: number) => new Date(at).toISOString().replace('T', ' ').slice(0, 23);

// ---- events ------------------------------------------------------------------------------

const ERRORS: [name: string, message: string, file?: string][] = [
  ['TypeError', "Cannot read properties of undefined (reading 'map')", 'https://example.com/app.js'],
  ['TypeError', 'x is not a function', 'https://example.com/vendor.js'],
  ['ReferenceError', 'gtag is not defined', 'https://example.com/index.html'],
  ['UnhandledRejection', 'Failed to fetch'],
  ['ChunkLoadError', 'Loading chunk 482 failed.', 'https://example.com/chunk-482.js'],
  ['Error', 'Script error.'],
];
const BUTTONS = ['Sign up', 'Add to cart', 'Buy now', 'Menu', 'Close', '€ Pay', '日本語'];
const COPIES = ['npm install @rybbit/js', 'support@example.com', 'SAVE20', 'x'.repeat(500)];
const FORMS = [
  { formId: 'signup', formName: 'signup-form', formAction: '/api/signup' },
  { formId: 'newsletter', formName: 'newsletter', formAction: '/subscribe' },
  { formId: 'login', formName: '', formAction: '/api/login' },
  { formId: '', formName: '', formAction: '/search' },
  { formId: '', formName: '', formAction: '' },
];
const FIELDS = ['email', 'password-confirm', 'q', 'Your name'];

/** One measured vital, or NULL (not measured): LCP 0..9 s, CLS 0 on most pages, …. */
function vitals(r: () => number): Partial<Record<'lcp' | 'cls' | 'inp' | 'fcp' | 'ttfb', number | null>> {
  const maybe = (value: () => number, missing: number) => (r() < missing ? null : value());
  return {
    lcp: maybe(() => Math.round(300 + 6000 * r() * r()), 0.1),
    cls: maybe(() => (r() < 0.4 ? 0 : Math.round(r() * r() * 5000) / 10_000), 0.15),
    inp: maybe(() => (r() < 0.05 ? 0 : 8 * Math.round(r() * 90)), 0.45),
    fcp: maybe(() => Math.round(200 + 4000 * r() * r()) + r(), 0.05),
    ttfb: maybe(() => r() * 2500, 0.05),
  };
}

/**
 * Errors, web vitals and autocapture events in the sessions of `base`, after some of its
 * pageviews (same session, visitor and page), as the browser client fills them.
 */
export function productEvents(base: StoredEvent[], seed: number): StoredEvent[] {
  const r = rng(seed);
  const out: StoredEvent[] = [];
  for (const pv of base) {
    if (pv.type !== 'pageview') continue;
    let at = ms(pv);
    const add = (
      type: StoredEvent['type'],
      name: string,
      properties: Record<string, unknown> | null,
      extra = {},
    ) => {
      at += 1 + Math.floor(r() * 20_000);
      const props: Record<string, string> = {};
      for (const [k, v] of Object.entries(properties ?? {}))
        props[k] = typeof v === 'string' ? v : JSON.stringify(v);
      out.push({
        ...pv,
        referrer: '',
        querystring: '',
        utm_source: '',
        utm_medium: '',
        utm_campaign: '',
        utm_term: '',
        utm_content: '',
        timestamp: chTime(at),
        event_id: uuidv7FromSeed(at, `${seed}-${out.length}`),
        type,
        event_name: name,
        properties: properties ? JSON.stringify(properties) : '{}',
        props,
        ...extra,
      });
    };
    if (r() < 0.6) add('performance', 'web-vitals', null, vitals(r));
    if (r() < 0.08) {
      const [name, message, file] = ERRORS[Math.floor(r() * r() * ERRORS.length)]!;
      const props: Record<string, unknown> = { error_name: name, message };
      if (r() < 0.8) props.stack = `${name}: ${message}\n    at render (${file ?? 'app.js'}:12:7)`;
      if (file) {
        props.filename = file;
        props.line_number = 1 + Math.floor(r() * 900);
        if (r() < 0.9) props.column_number = 1 + Math.floor(r() * 80);
      }
      add('error', name, props);
    }
    if (r() < 0.15) {
      const text = BUTTONS[Math.floor(r() * r() * BUTTONS.length)]!;
      add('button_click', '', r() < 0.1 ? { plan: 'pro' } : { text, ...(r() < 0.2 ? { plan: 'pro' } : {}) });
    }
    if (r() < 0.05) {
      const text = COPIES[Math.floor(r() * COPIES.length)]!;
      add('copy', '', { text, ...(text.length >= 500 ? { textLength: 1200 } : {}), sourceElement: 'code' });
    }
    if (r() < 0.05) {
      const form = FORMS[Math.floor(r() * FORMS.length)]!;
      add('input_change', '', {
        element: 'input',
        inputName: FIELDS[Math.floor(r() * FIELDS.length)]!,
        inputType: 'text',
        ...(form.formId ? { formId: form.formId } : {}),
      });
      add('form_submit', '', { ...form, method: 'POST', fieldCount: 3 });
    }
  }
  return out;
}

// ---- errors ------------------------------------------------------------------------------

export function errorNames(selected: StoredEvent[]) {
  const names = new Map<string, { count: number; sessions: Set<string> }>();
  for (const e of selected) {
    if (e.type !== 'error' || e.event_name === '') continue;
    const n = names.get(e.event_name) ?? { count: 0, sessions: new Set<string>() };
    n.count++;
    n.sessions.add(e.session_id);
    names.set(e.event_name, n);
  }
  const allSessions = [...names.values()].reduce((sum, n) => sum + n.sessions.size, 0);
  return [...names]
    .map(([name, n]) => ({
      value: name,
      errorName: name,
      count: n.count,
      sessionCount: n.sessions.size,
      percentage: ratio(n.sessions.size * 100, allSessions),
    }))
    .sort((a, b) => b.count - a.count || byteOrder(a.value, b.value));
}

const wholeNumber = (text: string | undefined) =>
  text !== undefined && /^-?\d{1,15}$/.test(text) ? Number(text) : undefined;

export function errorEvents(selected: StoredEvent[], name: string) {
  return selected
    .filter((e) => e.type === 'error' && e.event_name === name)
    .sort((a, b) => compareEvents(b, a))
    .map((e) => {
      const p = e.props;
      return {
        event_id: e.event_id,
        timestamp: new Date(ms(e)).toISOString(),
        session_id: e.session_id,
        user_id: e.user_id,
        identified_user_id: e.identified_user_id,
        pathname: e.pathname,
        hostname: e.hostname,
        page_title: e.page_title,
        referrer: e.referrer,
        browser: e.browser,
        browser_version: e.browser_version,
        operating_system: e.operating_system,
        operating_system_version: e.operating_system_version,
        device_type: e.device_type,
        country: e.country,
        region: e.region,
        city: e.city,
        message: p.message ?? '',
        stack: p.stack ?? null,
        fileName: p.filename ?? p.fileName ?? null,
        lineNumber: wholeNumber(p.line_number) ?? wholeNumber(p.lineno) ?? wholeNumber(p.lineNumber) ?? null,
        columnNumber:
          wholeNumber(p.column_number) ?? wholeNumber(p.colno) ?? wholeNumber(p.columnNumber) ?? null,
        properties: e.properties,
      };
    });
}

/** Bucket starts of a range: its local days, or on an open side the rows' first bucket / now. */
function rangeBuckets(c: CommonParams, bucket: Bucket, rows: StoredEvent[], now: number): number[] {
  const tz = c.timeZone;
  if (!c.startDate && rows.length === 0) return [];
  const first = c.startDate ? localMidnight(c.startDate, tz) : Math.min(...rows.map(ms));
  const last = c.endDate
    ? localMidnight(new Date(Date.parse(c.endDate) + 86_400_000).toISOString().slice(0, 10), tz) - 1
    : Math.max(now, ...rows.map(ms));
  return bucketsBetween(first, last, bucket, tz);
}

function perBucket(c: CommonParams, bucket: Bucket, rows: StoredEvent[], now: number) {
  const byBucket = new Map<number, StoredEvent[]>();
  for (const e of rows) {
    const b = bucketStart(ms(e), bucket, c.timeZone);
    byBucket.set(b, [...(byBucket.get(b) ?? []), e]);
  }
  return rangeBuckets(c, bucket, rows, now).map((b) => ({ b, events: byBucket.get(b) ?? [] }));
}

export function errorBucketed(
  selected: StoredEvent[],
  c: CommonParams,
  name: string,
  bucket: Bucket,
  now: number,
) {
  const rows = selected.filter((e) => e.type === 'error' && e.event_name === name);
  return perBucket(c, bucket, rows, now).map(({ b, events }) => ({
    time: new Date(b).toISOString(),
    error_count: events.length,
  }));
}

// ---- web vitals --------------------------------------------------------------------------

const VITALS = ['lcp', 'cls', 'inp', 'fcp', 'ttfb'] as const;
const LEVELS = [
  ['p50', 0.5],
  ['p75', 0.75],
  ['p90', 0.9],
  ['p99', 0.99],
] as const;
const THRESHOLDS: Record<(typeof VITALS)[number], [number, number]> = {
  lcp: [2500, 4000],
  cls: [0.1, 0.25],
  inp: [200, 500],
  fcp: [1800, 3000],
  ttfb: [800, 1800],
};

/** Linear interpolation between closest ranks: h = (n − 1)·q + 1 over 1-based sorted values. */
export function percentile(sorted: number[], q: number): number {
  const h = (sorted.length - 1) * q + 1;
  const k = Math.floor(h);
  if (k >= sorted.length) return sorted[sorted.length - 1]!;
  return sorted[k - 1]! + (h - k) * (sorted[k]! - sorted[k - 1]!);
}

function stats(events: StoredEvent[]) {
  const out: Record<string, number | string | null> = {};
  for (const v of VITALS) {
    const values = events
      .map((e) => e[v])
      .filter((x): x is number => x !== null && x !== undefined)
      .sort((a, b) => a - b);
    for (const [name, q] of LEVELS) out[`${v}_${name}`] = values.length === 0 ? null : percentile(values, q);
    out[`${v}_samples`] = values.length;
    const p75 = out[`${v}_p75`] as number | null;
    const [good, poor] = THRESHOLDS[v];
    out[`${v}_rating`] =
      p75 === null ? null : p75 <= good ? 'good' : p75 <= poor ? 'needs-improvement' : 'poor';
  }
  return out;
}

const performanceOf = (selected: StoredEvent[]) => selected.filter((e) => e.type === 'performance');

export function performanceOverview(selected: StoredEvent[]) {
  const events = performanceOf(selected);
  return { ...stats(events), total_performance_events: events.length, thresholds: THRESHOLDS };
}

export function performanceBucketed(selected: StoredEvent[], c: CommonParams, bucket: Bucket, now: number) {
  return perBucket(c, bucket, performanceOf(selected), now).map(({ b, events }) => ({
    time: new Date(b).toISOString(),
    event_count: events.length,
    ...stats(events),
  }));
}

/** Per value: the stats, and the mean of each vital (compared with a tolerance: sums differ in order). */
export function performanceByDimension(selected: StoredEvent[], dimension: keyof StoredEvent) {
  const groups = new Map<string, StoredEvent[]>();
  for (const e of performanceOf(selected)) {
    const v = String(e[dimension]);
    if (v !== '') groups.set(v, [...(groups.get(v) ?? []), e]);
  }
  return [...groups]
    .map(([value, events]) => {
      const item: Record<string, number | string | null> = {
        value,
        [dimension]: value,
        event_count: events.length,
        ...stats(events),
      };
      for (const v of VITALS) {
        const values = events.map((e) => e[v]).filter((x): x is number => x !== null && x !== undefined);
        item[`${v}_avg`] = values.length === 0 ? null : values.reduce((a, b) => a + b, 0) / values.length;
      }
      return item;
    })
    .sort(
      (a, b) =>
        (b.event_count as number) - (a.event_count as number) ||
        byteOrder(a.value as string, b.value as string),
    );
}

// ---- autocapture -------------------------------------------------------------------------

const VALUE_KEYS: Record<string, string[]> = {
  button_click: ['text'],
  copy: ['text'],
  form_submit: ['formName', 'formId', 'formAction'],
  input_change: ['inputName'],
  outbound: ['url'],
};

export function autocapture(selected: StoredEvent[], type: string) {
  const values = new Map<string, StoredEvent[]>();
  for (const e of selected) {
    if (e.type !== type) continue;
    const value = VALUE_KEYS[type]!.map((k) => e.props[k] ?? '').find((v) => v !== '') ?? '';
    if (value !== '') values.set(value, [...(values.get(value) ?? []), e]);
  }
  return [...values]
    .map(([value, events]) => ({
      value,
      count: events.length,
      sessionCount: new Set(events.map((e) => e.session_id)).size,
      lastOccurred: new Date(Math.max(...events.map(ms))).toISOString(),
    }))
    .sort((a, b) => b.count - a.count || byteOrder(a.value, b.value));
}

/** Every key's value counts, once per event. */
export function autocaptureValues(selected: StoredEvent[], type: string) {
  const counts = new Map<string, number>();
  for (const e of selected) {
    if (e.type !== type) continue;
    const values = new Set(VALUE_KEYS[type]!.map((k) => e.props[k] ?? '').filter((v) => v !== ''));
    for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  }
  return [...counts]
    .map(([value, count]) => ({ value, count }))
    .sort((a, b) => b.count - a.count || byteOrder(a.value, b.value));
}
