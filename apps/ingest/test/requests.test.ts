import { REPLACEMENT } from '@trackhouse/core';
import type { Stores } from '@trackhouse/limits';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type IngestDeps } from '../src';
import { requestInfo } from '../src/request';
import { OverloadedError } from '../src/writer/writer';
import { createHarness, type Harness } from './harness';

let h: Harness;
beforeAll(async () => {
  h = await createHarness({
    env: { TRUST_PROXY: '1', TRACK_ANON_RATE_LIMIT_MAX: '3', TRACK_ANON_RATE_LIMIT_WINDOW_S: '600' },
  });
});
afterAll(async () => {
  await h.close();
});

type App = ReturnType<typeof createApp>;
const post = (app: App, path: string, body: unknown, headers: Record<string, string> = {}) =>
  app.request(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const fromAddress = (ip: string) => ({ 'x-forwarded-for': `203.0.113.250, ${ip}` });

/** The ingest app over the harness's dependencies with some of them replaced. */
const appWith = (overrides: Partial<IngestDeps>) => createApp({ ...h.deps, ...overrides });

/** Stores whose session lookup fails while `failing` is set: an internal error after counting. */
function failingSessions(stores: Stores) {
  const state = { failing: true };
  const faulty: Stores = {
    ...stores,
    rateLimiter: stores.rateLimiter.bind(stores),
    sessions: {
      touch: (...args) =>
        state.failing ? Promise.reject(new Error('session store down')) : stores.sessions.touch(...args),
    },
  };
  return { stores: faulty, state };
}

describe('text that cannot be stored', () => {
  it('stores lone surrogates and NUL as U+FFFD, so a keyless event with them cannot stall later ones', async () => {
    const s = await h.site({ blockBots: false });
    // The exact text of the reported request: a JSON escape of a lone surrogate.
    const hostile = await post(h.app, '/api/track', `{"site_id":${s.siteId},"pathname":"/p\\ud800"}`);
    expect(hostile.status).toBe(200);
    const nul = await post(h.app, '/api/track', {
      site_id: s.siteId,
      type: 'custom_event',
      event_name: 'n\u0000ul',
      page_title: '\udfff title',
      properties: JSON.stringify({ 'k\u0000': 'v\ud83d', ok: '😀' }),
    });
    expect(nul.status).toBe(200);
    const after = await post(h.app, '/api/track', { site_id: s.siteId, pathname: '/after' });
    expect(after.status).toBe(200);
    await h.flush();
    const rows = await h.rows<{
      pathname: string;
      event_name: string;
      page_title: string;
      properties: string;
    }>(s.siteId);
    expect(rows.map((r) => r.pathname).sort()).toEqual(['', `/p${REPLACEMENT}`, '/after'].sort());
    const event = rows.find((r) => r.event_name !== '')!;
    expect(event.event_name).toBe(`n${REPLACEMENT}ul`);
    expect(event.page_title).toBe(`${REPLACEMENT} title`);
    expect(JSON.parse(event.properties)).toEqual({ [`k${REPLACEMENT}`]: `v${REPLACEMENT}`, ok: '😀' });
  });

  it('caps the User-Agent header at 512 characters, as the body field is', async () => {
    const s = await h.site({ blockBots: false });
    const long = `Mozilla/5.0 ${'x'.repeat(100_000)}`;
    expect((await post(h.app, '/api/track', { site_id: s.siteId }, { 'user-agent': long })).status).toBe(200);
    const probe = appWith({});
    const seen: string[] = [];
    probe.get('/probe', (c) => {
      seen.push(requestInfo(c, 0, undefined).userAgent);
      return c.text('ok');
    });
    await probe.request('/probe', { headers: { 'user-agent': long } });
    expect(seen).toEqual([long.slice(0, 512)]);
  });
});

describe('idempotent retries', () => {
  it('stores a single event with a client event_id once, however often it is sent', async () => {
    const s = await h.site({ blockBots: false });
    const event = { site_id: s.siteId, pathname: '/once', event_id: '0190aaaa-0000-7000-8000-000000000001' };
    expect(await (await post(h.app, '/api/track', event, bearer(s.apiKey))).json()).toEqual({
      success: true,
    });
    const again = await post(h.app, '/api/track', { ...event, event_id: event.event_id.toUpperCase() });
    expect(await again.json()).toEqual({ success: true, tracked: false, reason: 'duplicate_event_id' });
    await h.flush();
    const rows = await h.rows<{ event_id: string }>(s.siteId);
    expect(rows.map((r) => r.event_id)).toEqual([event.event_id]);
  });

  it('a batch that fails inside keeps no claim and no count, so its retry stores every event once', async () => {
    const s = await h.site({ monthlyPageviewLimit: 3 });
    const { stores, state } = failingSessions(h.deps.stores);
    const app = appWith({ stores });
    const events = [1, 2, 3].map((n) => ({
      site_id: s.siteId,
      pathname: `/b${n}`,
      event_id: `0190bbbb-0000-7000-8000-00000000000${n}`,
    }));
    const failed = await post(app, '/api/track/batch', { events }, bearer(s.apiKey));
    expect(failed.status).toBe(500);
    expect(await failed.json()).toMatchObject({ success: false, code: 'INTERNAL_ERROR' });

    state.failing = false;
    const retried = await post(app, '/api/track/batch', { events }, bearer(s.apiKey));
    expect(await retried.json()).toMatchObject({ success: true, accepted: 3, rejected: 0 });
    // The quota holds exactly the three stored pageviews: a fourth is over the limit.
    const fourth = await post(app, '/api/track', { site_id: s.siteId }, bearer(s.apiKey));
    expect(fourth.status).toBe(429);
    await h.flush();
    const rows = await h.rows<{ event_id: string }>(s.siteId);
    expect(rows.map((r) => r.event_id).sort()).toEqual(events.map((e) => e.event_id));
  });

  it('a single event that fails after counting gives its pageview back and its id free', async () => {
    const s = await h.site({ monthlyPageviewLimit: 1 });
    const { stores, state } = failingSessions(h.deps.stores);
    const app = appWith({ stores });
    const event = { site_id: s.siteId, event_id: '0190cccc-0000-7000-8000-000000000001' };
    expect((await post(app, '/api/track', event, bearer(s.apiKey))).status).toBe(500);
    state.failing = false;
    expect(await (await post(app, '/api/track', event, bearer(s.apiKey))).json()).toEqual({ success: true });
    await h.flush();
    expect(await h.rows(s.siteId)).toHaveLength(1);
  });
});

describe('a writer that cannot take rows', () => {
  it('answers 503 OVERLOADED with Retry-After and counts nothing against the quota', async () => {
    const s = await h.site({ monthlyPageviewLimit: 1 });
    const refusing = Object.create(h.deps.writer) as IngestDeps['writer'];
    refusing.append = () => Promise.reject(new OverloadedError());
    const broken = Object.create(h.deps.writer) as IngestDeps['writer'];
    broken.append = () => Promise.reject(Object.assign(new Error('EIO: i/o error, write'), { code: 'EIO' }));
    for (const writer of [refusing, broken]) {
      const res = await post(appWith({ writer }), '/api/track', { site_id: s.siteId }, bearer(s.apiKey));
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(await res.json()).toMatchObject({ success: false, code: 'OVERLOADED' });
      const batch = await post(
        appWith({ writer }),
        '/api/track/batch',
        { events: [{ site_id: s.siteId }] },
        bearer(s.apiKey),
      );
      expect(batch.status).toBe(503);
    }
    // Nothing was counted: the site's one pageview is still available.
    expect((await post(h.app, '/api/track', { site_id: s.siteId }, bearer(s.apiKey))).status).toBe(200);
  });
});

describe('keyless tracking budget per client address', () => {
  it('429s a client address past its budget for a site, with Retry-After; others and keys are unaffected', async () => {
    const s = await h.site({ blockBots: false });
    const t = await h.site({ blockBots: false });
    for (let i = 0; i < 3; i++) {
      // The body's ip_address is the sender's claim and does not change whose budget is spent.
      const res = await post(
        h.app,
        '/api/track',
        { site_id: s.siteId, ip_address: `8.8.8.${i}` },
        fromAddress('198.51.100.7'),
      );
      expect(res.status).toBe(200);
    }
    const over = await post(h.app, '/api/track', { site_id: s.siteId }, fromAddress('198.51.100.7'));
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await over.json()).toEqual({
      success: false,
      code: 'RATE_LIMITED',
      error: 'Rate limit exceeded. Maximum 3 requests per 10 minutes per client address and site.',
    });
    // The address is the nearest untrusted hop: the client-written leftmost entry is ignored.
    const spoofed = await post(
      h.app,
      '/api/track',
      { site_id: s.siteId },
      {
        'x-forwarded-for': '198.51.100.8, 198.51.100.7',
      },
    );
    expect(spoofed.status).toBe(429);
    expect((await post(h.app, '/api/track', { site_id: s.siteId }, fromAddress('198.51.100.8'))).status).toBe(
      200,
    );
    expect((await post(h.app, '/api/track', { site_id: t.siteId }, fromAddress('198.51.100.7'))).status).toBe(
      200,
    );
    const keyed = await post(
      h.app,
      '/api/track',
      { site_id: s.siteId },
      {
        ...fromAddress('198.51.100.7'),
        ...bearer(s.apiKey),
      },
    );
    expect(keyed.status).toBe(200);
    await h.flush();
    expect(await h.rows(s.siteId)).toHaveLength(5);
  });
});
