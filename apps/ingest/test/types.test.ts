import { listEvents } from '@trackhouse/clickhouse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from './harness';

const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

/** Every browser-client feature on: the switches each test turns off are named there. */
const ALL_ON = {
  trackErrors: true,
  webVitals: true,
  trackButtonClicks: true,
  trackCopy: true,
  trackFormInteractions: true,
};

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h.close();
});

const track = (body: unknown) =>
  h.app.request('/api/track', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'user-agent': CHROME },
    body: JSON.stringify(body),
  });

async function json(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

interface Row {
  type: string;
  event_name: string;
  properties: string;
  lcp: number | null;
  cls: number | null;
  inp: number | null;
  fcp: number | null;
  ttfb: number | null;
}

/** The autocapture payloads the browser client builds (its bundle, docs/decisions.md). */
const AUTOCAPTURE = {
  button_click: { text: 'Buy now', plan: 'pro' },
  copy: { text: 'ssh-ed25519 AAAA', textLength: 812, sourceElement: 'code' },
  form_submit: {
    formId: 'signup',
    formName: '',
    formAction: '/register',
    method: 'POST',
    fieldCount: 3,
    ariaLabel: 'Sign up',
  },
  input_change: { element: 'input', inputName: 'email', inputType: 'email', formId: 'signup' },
} as const;

describe('performance events (web vitals)', () => {
  it('stores each vital in its own column, keeps 0 and null apart, and names the event web-vitals', async () => {
    const s = await h.site(ALL_ON);
    const vitals = { lcp: 1834.5, cls: 0, inp: 96, fcp: 812.25, ttfb: null };
    expect(await json(await track({ site_id: s.siteId, type: 'performance', ...vitals }))).toEqual({
      success: true,
    });
    const named = {
      site_id: s.siteId,
      type: 'performance',
      event_name: 'web-vitals',
      lcp: 600_000,
      cls: 100,
    };
    expect((await track(named)).status).toBe(200);
    await h.flush();
    const rows = await h.rows<Row>(s.siteId);
    expect(rows.map((r) => [r.type, r.event_name, r.lcp, r.cls, r.inp, r.fcp, r.ttfb])).toEqual([
      ['performance', 'web-vitals', 1834.5, 0, 96, 812.25, null],
      ['performance', 'web-vitals', 600_000, 100, null, null, null],
    ]);
  });

  it.each([
    ['"lcp":-1', 'lcp'],
    ['"fcp":600001', 'fcp'],
    ['"cls":100.5', 'cls'],
    ['"inp":"96"', 'inp'],
    ['"ttfb":1e400', 'ttfb'],
  ])('400 INVALID_PAYLOAD for a vital out of range or not a finite number: %s', async (vital, field) => {
    const s = await h.site(ALL_ON);
    // Raw JSON text: 1e400 parses to Infinity, which no JavaScript value serializes to.
    const body = `{"site_id":${s.siteId},"type":"performance",${vital}}`;
    const res = await h.app.request('/api/track', { method: 'POST', body });
    expect(res.status).toBe(400);
    const err = await json(res);
    expect(err.code).toBe('INVALID_PAYLOAD');
    expect(Object.keys((err.details as { fieldErrors: object }).fieldErrors)).toEqual([field]);
  });

  it('400 for vitals on another event type; nothing stored', async () => {
    const s = await h.site(ALL_ON);
    const res = await track({ site_id: s.siteId, type: 'pageview', lcp: 100 });
    expect(res.status).toBe(400);
    expect((await json(res)).details).toMatchObject({
      fieldErrors: { lcp: ['only allowed when type is performance'] },
    });
    await h.flush();
    expect(await h.rows(s.siteId)).toEqual([]);
  });

  it('never count as pageviews: a site at its pageview limit still takes them while under it', async () => {
    const s = await h.site({ ...ALL_ON, monthlyPageviewLimit: 2 });
    for (let i = 0; i < 3; i++)
      expect((await track({ site_id: s.siteId, type: 'performance', lcp: i })).status).toBe(200);
    expect((await track({ site_id: s.siteId, type: 'error', event_name: 'E' })).status).toBe(200);
    expect((await track({ site_id: s.siteId })).status).toBe(200);
    expect((await track({ site_id: s.siteId })).status).toBe(200);
    expect((await track({ site_id: s.siteId })).status).toBe(429);
    await h.flush();
    expect((await h.rows<Row>(s.siteId)).filter((r) => r.type === 'pageview')).toHaveLength(2);
  });
});

describe('autocapture events', () => {
  it.each(Object.entries(AUTOCAPTURE))(
    'stores %s with its properties as the client sends them',
    async (type, props) => {
      const s = await h.site(ALL_ON);
      const res = await track({
        site_id: s.siteId,
        type,
        pathname: '/signup',
        properties: JSON.stringify(props),
      });
      expect(await json(res)).toEqual({ success: true });
      await h.flush();
      const [row] = await h.rows<Row & { pathname: string; props: Record<string, string> }>(s.siteId);
      expect(row).toMatchObject({ type, event_name: '', pathname: '/signup', lcp: null });
      expect(JSON.parse(row!.properties)).toEqual(props);
    },
  );

  it.each([
    ['a nested object', { text: 'x', target: { id: 1 } }],
    ['an array', { text: ['a'] }],
    ['more than 50 keys', Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i]))],
    ['a value over 1024 characters', { text: 'x'.repeat(1025) }],
    ['a key over 128 characters', { ['k'.repeat(129)]: 'v' }],
  ])('400 INVALID_PROPERTIES for properties with %s', async (_what, props) => {
    const s = await h.site(ALL_ON);
    for (const type of Object.keys(AUTOCAPTURE)) {
      const res = await track({ site_id: s.siteId, type, properties: JSON.stringify(props) });
      expect(res.status, type).toBe(400);
      expect((await json(res)).code).toBe('INVALID_PROPERTIES');
    }
    // The same properties on a custom event are its own business.
    expect(
      (
        await track({
          site_id: s.siteId,
          type: 'custom_event',
          event_name: 'e',
          properties: JSON.stringify(props),
        })
      ).status,
    ).toBe(200);
  });
});

describe('site switches', () => {
  it.each([
    ['performance', { webVitals: false }, { lcp: 1 }],
    ['error', { trackErrors: false }, { event_name: 'TypeError' }],
    ['button_click', { trackButtonClicks: false }, {}],
    ['copy', { trackCopy: false }, {}],
    ['form_submit', { trackFormInteractions: false }, {}],
    ['input_change', { trackFormInteractions: false }, {}],
    ['outbound', { trackOutbound: false }, {}],
  ])('%s while its switch is off: 200 tracked false, nothing stored', async (type, off, fields) => {
    const s = await h.site({ ...ALL_ON, ...off });
    const res = await track({ site_id: s.siteId, type, ...fields });
    expect(await json(res)).toEqual({ success: true, tracked: false, reason: `${type}_disabled` });
    await h.flush();
    expect(await h.rows(s.siteId)).toEqual([]);
  });

  it('errors are off for new sites, as the browser client and the reference product ship', async () => {
    const s = await h.site();
    expect(await json(await track({ site_id: s.siteId, type: 'error', event_name: 'E' }))).toMatchObject({
      reason: 'error_disabled',
    });
  });

  it('batches report disabled items by index and store the rest', async () => {
    const s = await h.site({ ...ALL_ON, trackCopy: false });
    const res = await h.app.request('/api/track/batch', {
      method: 'POST',
      headers: { authorization: `Bearer ${s.apiKey}` },
      body: JSON.stringify({
        events: [
          { site_id: s.siteId, type: 'performance', lcp: 1200, cls: 0.05 },
          { site_id: s.siteId, type: 'copy', properties: '{"text":"x"}' },
          { site_id: s.siteId, type: 'button_click', properties: '{"text":"Go"}' },
          { site_id: s.siteId, type: 'form_submit', properties: '{"deep":{"x":1}}' },
        ],
      }),
    });
    expect(await json(res)).toMatchObject({
      accepted: 3,
      rejected: 1,
      results: [
        { index: 0, success: true },
        { index: 1, success: true, tracked: false, reason: 'copy_disabled' },
        { index: 2, success: true },
        { index: 3, success: false, code: 'INVALID_PROPERTIES' },
      ],
    });
    await h.flush();
    const rows = await h.rows<Row>(s.siteId);
    expect(rows.map((r) => [r.type, r.lcp, r.cls]).sort()).toEqual([
      ['button_click', null, null],
      ['performance', 1200, 0.05],
    ]);
  });
});

describe('the events list', () => {
  it('keeps listing pageviews, custom events and outbound clicks only', async () => {
    const s = await h.site(ALL_ON);
    const sent = [
      { type: 'pageview' },
      { type: 'custom_event', event_name: 'signup' },
      { type: 'outbound', properties: '{"url":"https://example.org/"}' },
      { type: 'error', event_name: 'TypeError' },
      { type: 'performance', lcp: 1 },
      ...Object.entries(AUTOCAPTURE).map(([type, p]) => ({ type, properties: JSON.stringify(p) })),
    ];
    for (const e of sent) expect((await track({ site_id: s.siteId, ...e })).status).toBe(200);
    await h.flush();
    expect(await h.rows(s.siteId)).toHaveLength(sent.length);
    const page = await listEvents(h.ch, s.siteId, { timeZone: 'UTC', filters: [] }, { pageSize: 100 });
    expect(page.events.map((e) => e.type).sort()).toEqual(['custom_event', 'outbound', 'pageview']);
  });
});
