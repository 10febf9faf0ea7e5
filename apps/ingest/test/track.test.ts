import { createVisitorIds } from '@trackhouse/enrich';
import { createApiKey, getSite, revokeApiKey, updateSiteConfig } from '@trackhouse/postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from './harness';

const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
const GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';

let h: Harness;
beforeAll(async () => {
  h = await createHarness({
    env: { TRACK_RATE_LIMIT_MAX: '5', TRACK_RATE_LIMIT_WINDOW_S: '600', MONTHLY_PAGEVIEW_LIMIT: '0' },
  });
});
afterAll(async () => {
  await h.close();
});

function track(body: unknown, headers: Record<string, string> = {}) {
  return h.app.request('/api/track', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'user-agent': CHROME, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

async function expectError(res: Response, status: number, code: string, error?: string) {
  expect(res.status).toBe(status);
  const body = (await res.json()) as Record<string, unknown>;
  expect(body.success).toBe(false);
  expect(body.code).toBe(code);
  if (error) expect(body.error).toBe(error);
  return body;
}

describe('POST /api/track: acceptance and enrichment', () => {
  it('stores an enriched pageview and answers {success: true}', async () => {
    const s = await h.site({ domain: 'example.com' });
    const res = await track(
      {
        site_id: s.siteId,
        pathname: '/pricing',
        hostname: 'www.example.com',
        page_title: 'Pricing',
        querystring: '?utm_source=newsletter&utm_medium=email&plan=pro',
        referrer: 'https://www.google.com/',
        ip_address: '8.8.8.8',
        user_id: 'customer-42',
        language: 'en-US',
        screenWidth: 1920,
        screenHeight: 1080,
      },
      bearer(s.apiKey),
    );
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ success: true });
    expect(res.headers.get('x-request-id')).toBeTruthy();
    await h.flush();
    const [row] = await h.rows(s.siteId);
    expect(row).toMatchObject({
      type: 'pageview',
      event_name: '',
      properties: '{}',
      pathname: '/pricing',
      hostname: 'www.example.com',
      page_title: 'Pricing',
      querystring: '?utm_source=newsletter&utm_medium=email&plan=pro',
      referrer: 'https://www.google.com/',
      channel: 'Email',
      utm_source: 'newsletter',
      utm_medium: 'email',
      identified_user_id: 'customer-42',
      language: 'en-US',
      country: 'US',
      browser: 'Chrome',
      browser_version: '131',
      operating_system: 'Windows',
      device_type: 'desktop',
      screen_width: 1920,
      screen_height: 1080,
    });
    const expectedId = createVisitorIds('harness-secret-0123456789')({
      siteId: s.siteId,
      ip: '8.8.8.8',
      userAgent: CHROME,
    });
    expect(row!.user_id).toBe(expectedId);
    expect(String(row!.event_id)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-/);
    expect(String(row!.session_id)).toMatch(/^[0-9a-f-]{36}$/);
    expect(String(row!.timestamp)).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$/);
  });

  it('accepts the key in the body and a string site_id (the official Node client)', async () => {
    const s = await h.site();
    const res = await track({
      site_id: String(s.siteId),
      type: 'custom_event',
      api_key: s.apiKey,
      event_name: 'signup',
      properties: JSON.stringify({ plan: 'pro', seats: 3, trial: true }),
      pathname: '/signup',
    });
    expect(res.status).toBe(200);
    await h.flush();
    const [row] = await h.rows<Record<string, unknown>>(s.siteId);
    expect(row).toMatchObject({
      type: 'custom_event',
      event_name: 'signup',
      props: { plan: 'pro', seats: '3', trial: 'true' },
    });
    expect(JSON.parse(String(row!.properties))).toEqual({ plan: 'pro', seats: 3, trial: true });
  });

  it('parses text/plain bodies (browser beacons) and keeps one session per visitor', async () => {
    const s = await h.site({ domain: 'beacon.test' });
    const send = (ua: string) =>
      h.app.request('/api/track', {
        method: 'POST',
        headers: {
          'content-type': 'text/plain;charset=UTF-8',
          'user-agent': ua,
          origin: 'https://beacon.test',
        },
        body: JSON.stringify({ site_id: s.siteId, pathname: '/', ip_address: '81.2.69.160' }),
      });
    expect((await send(CHROME)).status).toBe(200);
    expect((await send(CHROME)).status).toBe(200);
    expect((await send(`${CHROME} Other`)).status).toBe(200);
    await h.flush();
    const rows = await h.rows<{ session_id: string; user_id: string; country: string }>(s.siteId);
    expect(rows).toHaveLength(3);
    const byUser = new Map<string, Set<string>>();
    for (const r of rows) byUser.set(r.user_id, (byUser.get(r.user_id) ?? new Set()).add(r.session_id));
    expect([...byUser.values()].map((v) => v.size).sort()).toEqual([1, 1]);
    expect(rows[0]!.country).toBe('GB');
  });

  it('stores a self-referral as empty (Direct), and drops the querystring when trackUrlParams is off but keeps UTM', async () => {
    const s = await h.site({ domain: 'shop.test', trackUrlParams: false });
    await track(
      {
        site_id: s.siteId,
        hostname: 'shop.test',
        referrer: 'https://blog.shop.test/post',
        querystring: '?utm_source=google&utm_medium=cpc',
      },
      bearer(s.apiKey),
    );
    await track(
      { site_id: s.siteId, hostname: 'shop.test', referrer: 'https://shop.test/a' },
      bearer(s.apiKey),
    );
    await h.flush();
    const rows = await h.rows<{ referrer: string; querystring: string; utm_source: string; channel: string }>(
      s.siteId,
    );
    expect(rows.map((r) => [r.referrer, r.querystring, r.utm_source, r.channel])).toEqual([
      ['', '', 'google', 'Paid Search'],
      ['', '', '', 'Direct'],
    ]);
  });

  it('rotates visitor ids daily with saltUserIds', async () => {
    const s = await h.site({ saltUserIds: true });
    await track({ site_id: s.siteId, ip_address: '1.1.1.1' }, bearer(s.apiKey));
    await h.flush();
    const [row] = await h.rows<{ user_id: string }>(s.siteId);
    const ids = createVisitorIds('harness-secret-0123456789');
    const unsalted = ids({ siteId: s.siteId, ip: '1.1.1.1', userAgent: CHROME });
    const today = ids({
      siteId: s.siteId,
      ip: '1.1.1.1',
      userAgent: CHROME,
      saltDay: new Date().toISOString().slice(0, 10),
    });
    expect(row!.user_id).not.toBe(unsalted);
    expect(row!.user_id).toBe(today);
  });
});

describe('POST /api/track: rejections, in pipeline order', () => {
  it('413 for a body over 64 KiB, 400 INVALID_JSON for a body that is not JSON', async () => {
    const s = await h.site();
    await expectError(
      await track({ site_id: s.siteId, page_title: 'x'.repeat(70_000) }),
      413,
      'PAYLOAD_TOO_LARGE',
    );
    await expectError(await track('{"site_id": 1,'), 400, 'INVALID_JSON');
  });

  it('400 INVALID_PAYLOAD with zod-flatten details; a missing event_name is a form error', async () => {
    const s = await h.site();
    const body = await expectError(
      await track({ site_id: s.siteId, pathname: 'x'.repeat(2049), screenWidth: 70000, color: 'red' }),
      400,
      'INVALID_PAYLOAD',
      'Invalid payload',
    );
    const details = body.details as { fieldErrors: Record<string, string[]>; formErrors: string[] };
    expect(Object.keys(details.fieldErrors).sort()).toEqual(['pathname', 'screenWidth']);
    expect(details.formErrors.join(' ')).toMatch(/color/);
    for (const type of ['custom_event', 'error']) {
      const missing = await expectError(await track({ site_id: s.siteId, type }), 400, 'INVALID_PAYLOAD');
      expect((missing.details as { formErrors: string[] }).formErrors.join(' ')).toContain('event_name');
    }
    await expectError(await track({ site_id: 'abc' }), 400, 'INVALID_PAYLOAD');
    await expectError(await track({ site_id: s.siteId, ip_address: '999.1.1.1' }), 400, 'INVALID_PAYLOAD');
    await expectError(await track({ site_id: s.siteId, type: 'heartbeat' }), 400, 'INVALID_PAYLOAD');
  });

  it('400 INVALID_PROPERTIES for properties that are not a JSON object', async () => {
    const s = await h.site();
    for (const properties of ['{nope', '[1,2]', '"text"', 'null']) {
      await expectError(
        await track({ site_id: s.siteId, type: 'custom_event', event_name: 'x', properties }),
        400,
        'INVALID_PROPERTIES',
        'JSON parsing error',
      );
    }
  });

  it('404 Site not found for an unknown site', async () => {
    await expectError(await track({ site_id: 999_999 }), 404, 'SITE_NOT_FOUND', 'Site not found');
  });

  it('401 for unknown, malformed, revoked and expired keys; 403 for a key of another organization', async () => {
    const s = await h.site();
    const other = await h.site();
    await expectError(
      await track({ site_id: s.siteId }, bearer('th_nope')),
      401,
      'INVALID_API_KEY',
      'Invalid API key',
    );
    await expectError(
      await track({ site_id: s.siteId }, bearer(`th_${'A'.repeat(40)}`)),
      401,
      'INVALID_API_KEY',
    );
    const revoked = await createApiKey(h.db.sql, { userId: s.userId, name: 'r' });
    await revokeApiKey(h.db.sql, s.userId, revoked.record.id);
    await expectError(await track({ site_id: s.siteId }, bearer(revoked.key)), 401, 'INVALID_API_KEY');
    const expired = await createApiKey(h.db.sql, {
      userId: s.userId,
      name: 'e',
      expiresAt: new Date(Date.now() - 1000),
    });
    await expectError(await track({ site_id: s.siteId }, bearer(expired.key)), 401, 'INVALID_API_KEY');
    await expectError(
      await track({ site_id: s.siteId }, bearer(other.apiKey)),
      403,
      'ACCESS_DENIED',
      'Access denied',
    );
  });

  it('429 past the per-key rate limit, with the exact message and RateLimit headers', async () => {
    const s = await h.site();
    for (let i = 0; i < 5; i++) {
      const ok = await track({ site_id: s.siteId }, bearer(s.apiKey));
      expect(ok.status).toBe(200);
      expect(ok.headers.get('ratelimit-limit')).toBe('5');
      expect(ok.headers.get('ratelimit-remaining')).toBe(String(4 - i));
      expect(Number(ok.headers.get('ratelimit-reset'))).toBeGreaterThan(0);
    }
    const res = await track({ site_id: s.siteId }, bearer(s.apiKey));
    await expectError(
      res,
      429,
      'RATE_LIMITED',
      'Rate limit exceeded. Maximum 5 requests per 10 minutes per API key.',
    );
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(res.headers.get('ratelimit-remaining')).toBe('0');
  });

  it('403 BOT_DETECTED for a keyless bot when blockBots is on, accepted when it is off', async () => {
    const blocking = await h.site();
    await expectError(
      await track({ site_id: blocking.siteId }, { 'user-agent': GOOGLEBOT }),
      403,
      'BOT_DETECTED',
      'Bot detected',
    );
    await expectError(await track({ site_id: blocking.siteId, user_agent: GOOGLEBOT }), 403, 'BOT_DETECTED');
    const open = await h.site({ blockBots: false });
    expect((await track({ site_id: open.siteId }, { 'user-agent': GOOGLEBOT })).status).toBe(200);
    // With a key, bots are not screened: server-side tracking sends what it likes.
    expect(
      (await track({ site_id: blocking.siteId }, { 'user-agent': GOOGLEBOT, ...bearer(blocking.apiKey) }))
        .status,
    ).toBe(200);
  });

  it('403 DOMAIN_MISMATCH when a keyless Origin (else Referer) is not the site domain or a subdomain', async () => {
    const s = await h.site({ domain: 'example.com' });
    await expectError(
      await track({ site_id: s.siteId }, { origin: 'https://evil.test' }),
      403,
      'DOMAIN_MISMATCH',
    );
    await expectError(
      await track({ site_id: s.siteId }, { origin: 'https://notexample.com' }),
      403,
      'DOMAIN_MISMATCH',
    );
    await expectError(
      await track({ site_id: s.siteId }, { referer: 'https://evil.test/page' }),
      403,
      'DOMAIN_MISMATCH',
    );
    expect((await track({ site_id: s.siteId }, { origin: 'https://example.com' })).status).toBe(200);
    expect((await track({ site_id: s.siteId }, { origin: 'https://app.example.com' })).status).toBe(200);
    expect((await track({ site_id: s.siteId }, { referer: 'https://www.example.com/x' })).status).toBe(200);
    expect((await track({ site_id: s.siteId })).status).toBe(200);
  });

  it('skips excluded IPs (CIDR, v4-mapped), excluded countries and disabled outbound clicks, storing and counting nothing', async () => {
    const s = await h.site({
      excludedIPs: ['10.0.0.0/8', '2001:db8::/32'],
      excludedCountries: ['GB'],
      trackOutbound: false,
      monthlyPageviewLimit: 1,
    });
    const cases: [Record<string, unknown>, string][] = [
      [{ ip_address: '10.1.2.3' }, 'excluded_ip'],
      [{ ip_address: '::ffff:10.1.2.3' }, 'excluded_ip'],
      [{ ip_address: '2001:db8::7' }, 'excluded_ip'],
      [{ ip_address: '81.2.69.160' }, 'excluded_country'],
      [
        { ip_address: '8.8.8.8', type: 'outbound', properties: '{"url":"https://x.test"}' },
        'outbound_disabled',
      ],
    ];
    for (const [fields, reason] of cases) {
      const res = await track({ site_id: s.siteId, ...fields }, bearer(s.apiKey));
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ success: true, tracked: false, reason });
    }
    // The quota of 1 was not touched by the skipped pageviews (a second key: the first used its 5).
    const second = await createApiKey(h.db.sql, { userId: s.userId, name: 'second' });
    expect((await track({ site_id: s.siteId, ip_address: '8.8.8.8' }, bearer(second.key))).status).toBe(200);
    await h.flush();
    expect(await h.rows(s.siteId)).toHaveLength(1);
  });

  it('429 Over monthly limit once a site reached its pageviews, for every event type, with Retry-After to next month', async () => {
    const s = await h.site({ monthlyPageviewLimit: 2 });
    const send = (type = 'pageview') =>
      track({ site_id: s.siteId, type, event_name: type === 'pageview' ? undefined : 'e' }, bearer(s.apiKey));
    expect((await send('custom_event')).status).toBe(200); // not counted
    expect((await send()).status).toBe(200);
    expect((await send()).status).toBe(200);
    const over = await send();
    await expectError(over, 429, 'OVER_MONTHLY_LIMIT', 'Over monthly limit');
    const now = new Date();
    const nextMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    expect(Math.abs(Number(over.headers.get('retry-after')) - (nextMonth - Date.now()) / 1000)).toBeLessThan(
      5,
    );
    await expectError(await send('custom_event'), 429, 'OVER_MONTHLY_LIMIT');
  });

  it('never overshoots the monthly quota under concurrent requests', async () => {
    const s = await h.site({ monthlyPageviewLimit: 7 });
    const other = await h.site();
    // Separate keys so the rate limit (5 per key) is not what stops them.
    const keys = await Promise.all(
      Array.from({ length: 6 }, () => createApiKey(h.db.sql, { userId: s.userId, name: 'k' })),
    );
    const results = await Promise.all(
      keys.flatMap(({ key }) => Array.from({ length: 5 }, () => track({ site_id: s.siteId }, bearer(key)))),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(7);
    expect(results.filter((r) => r.status === 429)).toHaveLength(23);
    expect((await track({ site_id: other.siteId }, bearer(other.apiKey))).status).toBe(200);
  });

  it('uses MONTHLY_PAGEVIEW_LIMIT for sites whose limit is null, and 0 on a site means unlimited', async () => {
    const limited = await createHarness({ env: { MONTHLY_PAGEVIEW_LIMIT: '1' }, ch: h.ch });
    try {
      const byDefault = await limited.site();
      const unlimited = await limited.site({ monthlyPageviewLimit: 0 });
      const send = (site: { siteId: number; apiKey: string }) =>
        limited.app.request('/api/track', {
          method: 'POST',
          headers: { authorization: `Bearer ${site.apiKey}` },
          body: JSON.stringify({ site_id: site.siteId }),
        });
      expect((await send(byDefault)).status).toBe(200);
      expect((await send(byDefault)).status).toBe(429);
      for (let i = 0; i < 3; i++) expect((await send(unlimited)).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('site configuration changes', () => {
  it('reach the ingest cache at once through the config-change channel', async () => {
    const s = await h.site({ domain: 'cfg.test' });
    expect((await track({ site_id: s.siteId, ip_address: '8.8.4.4' }, bearer(s.apiKey))).status).toBe(200);
    await updateSiteConfig(h.db.sql, s.siteId, { excludedIPs: ['8.8.4.4'] });
    await h.deps.stores.channel.publish(s.siteId);
    const res = await track({ site_id: s.siteId, ip_address: '8.8.4.4' }, bearer(s.apiKey));
    expect(await res.json()).toEqual({ success: true, tracked: false, reason: 'excluded_ip' });
    expect((await getSite(h.db.sql, s.siteId))?.excludedIPs).toEqual(['8.8.4.4']);
  });

  it('reach it within 2 seconds even when no notification arrives', async () => {
    const s = await h.site();
    expect((await track({ site_id: s.siteId, type: 'outbound' }, bearer(s.apiKey))).status).toBe(200);
    await updateSiteConfig(h.db.sql, s.siteId, { trackOutbound: false });
    await new Promise((r) => setTimeout(r, 2_100));
    expect(await (await track({ site_id: s.siteId, type: 'outbound' }, bearer(s.apiKey))).json()).toEqual({
      success: true,
      tracked: false,
      reason: 'outbound_disabled',
    });
  });
});

describe('CORS and tracking config', () => {
  it('answers preflights echoing the origin with credentials, and adds CORS headers to errors too', async () => {
    const pre = await h.app.request('/api/track', {
      method: 'OPTIONS',
      headers: {
        origin: 'https://site.test',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type,x-private-key',
      },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('https://site.test');
    expect(pre.headers.get('access-control-allow-credentials')).toBe('true');
    expect(pre.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('x-private-key');
    const err = await track('nope', { origin: 'https://site.test' });
    expect(err.status).toBe(400);
    expect(err.headers.get('access-control-allow-origin')).toBe('https://site.test');
  });

  it('serves the tracking config of a site (defaults as the browser client ships them); 404 for an unknown one, 400 for a malformed id', async () => {
    const s = await h.site({ trackOutbound: false, trackUrlParams: true });
    const res = await h.app.request(`/api/site/tracking-config/${s.siteId}`, {
      headers: { origin: 'https://a.test' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('https://a.test');
    expect(await res.json()).toEqual({
      trackInitialPageView: true,
      trackSpaNavigation: true,
      trackOutbound: false,
      trackUrlParams: true,
      trackErrors: false,
      webVitals: false,
      sessionReplay: false,
      trackButtonClicks: false,
      trackCopy: false,
      trackFormInteractions: false,
    });
    const flipped = {
      trackInitialPageView: false,
      trackSpaNavigation: false,
      trackOutbound: true,
      trackUrlParams: false,
      trackErrors: true,
      webVitals: true,
      sessionReplay: true,
      trackButtonClicks: true,
      trackCopy: true,
      trackFormInteractions: true,
    };
    const all = await h.site(flipped);
    expect(await (await h.app.request(`/api/site/tracking-config/${all.siteId}`)).json()).toEqual(flipped);
    await expectError(await h.app.request('/api/site/tracking-config/424242'), 404, 'SITE_NOT_FOUND');
    await expectError(await h.app.request('/api/site/tracking-config/abc'), 400, 'INVALID_PARAMS');
  });
});
