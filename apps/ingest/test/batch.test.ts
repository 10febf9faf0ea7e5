import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from './harness';

let h: Harness;
beforeAll(async () => {
  h = await createHarness({ env: { TRACK_RATE_LIMIT_MAX: '3' } });
});
afterAll(async () => {
  await h.close();
});

const batch = (body: unknown, key?: string) =>
  h.app.request('/api/track/batch', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

describe('POST /api/track/batch', () => {
  it('stores valid items, reports invalid ones by index, and honours client timestamps and event ids', async () => {
    const s = await h.site({ trackErrors: true });
    const other = await h.site();
    const past = new Date(Date.now() - 3 * 86_400_000).toISOString();
    const eventId = '01900000-0000-7000-8000-0000000000aa';
    const res = await batch(
      {
        events: [
          { site_id: s.siteId, pathname: '/a', timestamp: past, event_id: eventId },
          { site_id: s.siteId, type: 'custom_event' },
          { site_id: s.siteId, type: 'custom_event', event_name: 'x', properties: '[1]' },
          { site_id: other.siteId },
          { site_id: s.siteId, timestamp: new Date(Date.now() - 8 * 86_400_000).toISOString() },
          { site_id: s.siteId, timestamp: new Date(Date.now() + 10 * 60_000).toISOString() },
          { site_id: 987654 },
          { site_id: s.siteId, type: 'error', event_name: 'TypeError', properties: '{"message":"boom"}' },
        ],
      },
      s.apiKey,
    );
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      accepted: number;
      rejected: number;
      results: Record<string, unknown>[];
    };
    expect(body).toMatchObject({ success: true, accepted: 2, rejected: 6 });
    expect(body.results.map((r) => [r.index, r.success, r.code ?? null])).toEqual([
      [0, true, null],
      [1, false, 'INVALID_PAYLOAD'],
      [2, false, 'INVALID_PROPERTIES'],
      [3, false, 'ACCESS_DENIED'],
      [4, false, 'INVALID_PAYLOAD'],
      [5, false, 'INVALID_PAYLOAD'],
      [6, false, 'SITE_NOT_FOUND'],
      [7, true, null],
    ]);
    expect(body.results[1]!.error).toBe('Invalid payload');

    // The same client event id again: acknowledged, stored once.
    const replay = await batch(
      { events: [{ site_id: s.siteId, pathname: '/a', timestamp: past, event_id: eventId.toUpperCase() }] },
      s.apiKey,
    );
    expect(((await replay.json()) as { results: unknown[] }).results).toEqual([
      { index: 0, success: true, tracked: false, reason: 'duplicate_event_id' },
    ]);

    await h.flush();
    const rows = await h.rows<{ event_id: string; timestamp: string; type: string }>(s.siteId);
    expect(rows.map((r) => r.type)).toEqual(['pageview', 'error']);
    expect(rows[0]!.event_id).toBe(eventId);
    expect(rows[0]!.timestamp).toBe(past.replace('T', ' ').replace('Z', ''));
  });

  it('requires a key, counts as one request for the rate limit, and validates the envelope', async () => {
    const s = await h.site();
    const noKey = await batch({ events: [{ site_id: s.siteId }] });
    expect(noKey.status).toBe(401);
    expect(((await noKey.json()) as { code: string }).code).toBe('MISSING_API_KEY');
    const bodyKey = await batch({ api_key: s.apiKey, events: [{ site_id: s.siteId }] });
    expect(bodyKey.status).toBe(200);
    const hundred = { events: Array.from({ length: 100 }, () => ({ site_id: s.siteId })) };
    expect((await batch(hundred, s.apiKey)).status).toBe(200);
    expect((await batch(hundred, s.apiKey)).status).toBe(200);
    const limited = await batch(hundred, s.apiKey); // the 4th request with limit 3
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as { error: string }).error).toBe(
      'Rate limit exceeded. Maximum 3 requests per 10 minutes per API key.',
    );

    const t = await h.site();
    for (const [events, code] of [
      [[], 'INVALID_PAYLOAD'],
      [Array.from({ length: 1001 }, () => ({ site_id: t.siteId })), 'INVALID_PAYLOAD'],
    ] as const) {
      const res = await batch({ events }, t.apiKey);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { code: string }).code).toBe(code);
    }
    const notJson = await batch('{', t.apiKey);
    expect(notJson.status).toBe(400);
    const huge = await batch(
      { events: [{ site_id: t.siteId, page_title: 'x'.repeat(1_100_000) }] },
      t.apiKey,
    );
    expect(huge.status).toBe(413);
  });

  it('gives backdated events sessions that follow their own timestamps, apart from the live session', async () => {
    const s = await h.site();
    const visitor = { ip_address: '8.8.4.4', user_agent: 'Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0' };
    const day = Date.now() - 3 * 86_400_000;
    const at = (minutes: number) => new Date(day + minutes * 60_000).toISOString();
    const events = [
      // Two visits three days ago (a 40-minute gap between them), one the day after, one live event.
      ...[0, 10, 25, 65, 70].map((m) => ({
        ...visitor,
        site_id: s.siteId,
        pathname: `/m${m}`,
        timestamp: at(m),
      })),
      { ...visitor, site_id: s.siteId, pathname: '/m1440', timestamp: at(1440) },
      { ...visitor, site_id: s.siteId, pathname: '/live' },
      { ip_address: '1.1.1.1', site_id: s.siteId, pathname: '/other', timestamp: at(5) },
    ];
    const res = await batch({ events: [...events].reverse() }, s.apiKey);
    expect(await res.json()).toMatchObject({ accepted: events.length, rejected: 0 });
    const live = await batch({ events: [{ ...visitor, site_id: s.siteId, pathname: '/live2' }] }, s.apiKey);
    expect(live.status).toBe(200);
    await h.flush();
    const rows = await h.rows<{ pathname: string; session_id: string }>(s.siteId);
    const session = (path: string) => rows.find((r) => r.pathname === path)!.session_id;
    const groups = [['/m0', '/m10', '/m25'], ['/m65', '/m70'], ['/m1440'], ['/live', '/live2'], ['/other']];
    for (const group of groups) expect(new Set(group.map(session)).size).toBe(1);
    expect(new Set(groups.map((g) => session(g[0]!))).size).toBe(groups.length);
    // Each backdated session's id carries the time of its first event (the rollup partitions by it).
    const v7Time = (id: string) => Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16);
    expect(v7Time(session('/m0'))).toBe(Date.parse(at(0)));
    expect(v7Time(session('/m65'))).toBe(Date.parse(at(65)));
  });
});
