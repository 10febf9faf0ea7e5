import { createApiKey, getOrCreateUser } from '@trackhouse/postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type IngestDeps } from '../src';
import { OverloadedError } from '../src/writer/writer';
import { createHarness, type Harness } from './harness';

const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
const GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';

let h: Harness;
beforeAll(async () => {
  h = await createHarness({ env: { TRUST_PROXY: '1' } });
});
afterAll(async () => {
  await h.close();
});

const post = (path: string, body: unknown, headers: Record<string, string> = {}, app = h.app) =>
  app.request(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'user-agent': CHROME, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
const identify = (body: unknown, headers: Record<string, string> = {}) =>
  post('/api/identify', body, headers);
const from = (ip: string) => ({ 'x-forwarded-for': ip });

/** The profile as the tables derived from `identifies` hold it: latest value per trait, removed ones out. */
async function profile(siteId: number, userId: string): Promise<Record<string, unknown>> {
  const rows = await h.ch.query<{ trait: string; value: string }>(
    `SELECT trait, argMax(value, updated_at) AS value FROM user_profiles
     WHERE site_id = {s:UInt32} AND identified_user_id = {u:String}
     GROUP BY trait HAVING value != 'null' ORDER BY trait`,
    { s: siteId, u: userId },
  );
  return Object.fromEntries(rows.map((r) => [r.trait, JSON.parse(r.value)]));
}

async function aliasOf(siteId: number, anonymousId: string): Promise<string | undefined> {
  const rows = await h.ch.query<{ id: string }>(
    `SELECT identified_user_id AS id FROM user_aliases FINAL WHERE site_id = {s:UInt32} AND user_id = {a:String}`,
    { s: siteId, a: anonymousId },
  );
  return rows[0]?.id;
}

describe('POST /api/identify', () => {
  it('links the visitor (the anonymous id of its events) to the user and stores the traits', async () => {
    const s = await h.site({ domain: 'shop.test' });
    const origin = { origin: 'https://www.shop.test', ...from('8.8.8.8') };
    expect((await post('/api/track', { site_id: String(s.siteId), pathname: '/' }, origin)).status).toBe(200);
    const res = await identify(
      {
        site_id: String(s.siteId),
        user_id: 'user-42',
        traits: { email: 'a@shop.test', plan: 'pro', seats: 3, beta: true, tags: ['a'] },
        is_new_identify: true,
      },
      origin,
    );
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ success: true });
    expect(res.headers.get('access-control-allow-origin')).toBe('https://www.shop.test');
    await h.flush();
    const [event] = await h.rows<{ user_id: string }>(s.siteId);
    expect(await aliasOf(s.siteId, event!.user_id)).toBe('user-42');
    expect(await profile(s.siteId, 'user-42')).toEqual({
      email: 'a@shop.test',
      plan: 'pro',
      seats: 3,
      beta: true,
      tags: ['a'],
    });
    const [call] = await h.ch.query<{ user_id: string; is_new_identify: boolean }>(
      'SELECT user_id, is_new_identify FROM identifies WHERE site_id = {s:UInt32}',
      { s: s.siteId },
    );
    expect(call).toEqual({ user_id: event!.user_id, is_new_identify: true });
  });

  it('merges later traits into the profile: named keys updated, null removes, others kept (as the reference does)', async () => {
    const s = await h.site({ blockBots: false });
    const at = from('9.9.9.9');
    await identify(
      { site_id: s.siteId, user_id: 'u1', traits: { plan: 'free', name: 'Ada', company: 'X' } },
      at,
    );
    await identify(
      { site_id: s.siteId, user_id: 'u1', traits: { plan: 'team', name: null }, is_new_identify: false },
      at,
    );
    // Traits alone (setTraits) leave the visitor's link as it was.
    await h.flush();
    expect(await profile(s.siteId, 'u1')).toEqual({ plan: 'team', company: 'X' });
    const [{ anon }] = (await h.ch.query<{ anon: string }>(
      'SELECT any(user_id) AS anon FROM identifies WHERE site_id = {s:UInt32}',
      { s: s.siteId },
    )) as [{ anon: string }];
    expect(await aliasOf(s.siteId, anon)).toBe('u1');
    // The same visitor identifying as someone else: the latest link wins; u1 keeps its traits.
    await identify({ site_id: s.siteId, user_id: 'u2' }, at);
    await h.flush();
    expect(await aliasOf(s.siteId, anon)).toBe('u2');
    expect(await profile(s.siteId, 'u1')).toEqual({ plan: 'team', company: 'X' });
    expect(await profile(s.siteId, 'u2')).toEqual({});
  });

  it('applies the credential rules of tracking: a key (body or Bearer) of a member, else bot and domain checks', async () => {
    const s = await h.site({ domain: 'app.test' });
    const body = { site_id: s.siteId, user_id: 'k' };
    expect(
      (await identify({ ...body, api_key: s.apiKey, ip_address: '8.8.4.4', user_agent: GOOGLEBOT })).status,
    ).toBe(200);
    expect(
      (await identify(body, { authorization: `Bearer ${s.apiKey}`, origin: 'https://evil.test' })).status,
    ).toBe(200);
    const bad = await identify(body, { authorization: 'Bearer th_nope' });
    expect([bad.status, ((await bad.json()) as { code: string }).code]).toEqual([401, 'INVALID_API_KEY']);
    const stranger = await getOrCreateUser(h.db.sql, `stranger-${s.siteId}@example.com`);
    const { key } = await createApiKey(h.db.sql, { userId: stranger.id, name: 'x' });
    expect((await identify(body, { authorization: `Bearer ${key}` })).status).toBe(403);
    const bot = await identify(body, { 'user-agent': GOOGLEBOT });
    expect([bot.status, ((await bot.json()) as { code: string }).code]).toEqual([403, 'BOT_DETECTED']);
    const elsewhere = await identify(body, { origin: 'https://evil.test' });
    expect([elsewhere.status, ((await elsewhere.json()) as { code: string }).code]).toEqual([
      403,
      'DOMAIN_MISMATCH',
    ]);
    expect((await identify({ site_id: 987654, user_id: 'k' })).status).toBe(404);
    await h.flush();
    const stored = await h.ch.query<{ n: number }>(
      'SELECT count() AS n FROM identifies WHERE site_id = {s:UInt32}',
      {
        s: s.siteId,
      },
    );
    expect(stored[0]!.n).toBe(2);
  });

  it.each([
    [{ user_id: 'x', traits: ['a'] }, 'traits'],
    [{ user_id: 'x', traits: 'plan=pro' }, 'traits'],
    [{ user_id: 'x', traits: { blob: 'x'.repeat(2048) } }, 'traits'],
    [{ user_id: '   ' }, 'user_id'],
    [{ user_id: 'x'.repeat(256) }, 'user_id'],
    [{}, 'user_id'],
    [{ user_id: 'x', is_new_identify: 'yes' }, 'is_new_identify'],
    [{ user_id: 'x', colour: 'red' }, undefined],
  ])('400 INVALID_PAYLOAD for %j', async (fields, field) => {
    const s = await h.site({ blockBots: false });
    const res = await identify({ site_id: s.siteId, ...fields });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { code: string; details: { fieldErrors: Record<string, unknown> } };
    expect(body.code).toBe('INVALID_PAYLOAD');
    if (field) expect(Object.keys(body.details.fieldErrors)).toContain(field);
  });

  it('excluded addresses are answered tracked false and stored nowhere', async () => {
    const s = await h.site({ blockBots: false, excludedIPs: ['10.0.0.0/8'] });
    expect(await (await identify({ site_id: s.siteId, user_id: 'x' }, from('10.1.2.3'))).json()).toEqual({
      success: true,
      tracked: false,
      reason: 'excluded_ip',
    });
    await h.flush();
    const rows = await h.ch.query('SELECT 1 FROM identifies WHERE site_id = {s:UInt32}', { s: s.siteId });
    expect(rows).toEqual([]);
  });

  it('spends the per-address budget of keyless tracking: events, identify and replay batches together', async () => {
    const small = await createHarness({
      env: { TRUST_PROXY: '1', TRACK_ANON_RATE_LIMIT_MAX: '3' },
      ch: h.ch,
    });
    try {
      const s = await small.site({ blockBots: false, sessionReplay: true });
      const at = from('198.51.100.9');
      const batch = { events: [{ type: 4, timestamp: Date.now(), data: {} }] };
      expect((await post('/api/track', { site_id: s.siteId }, at, small.app)).status).toBe(200);
      expect((await post('/api/identify', { site_id: s.siteId, user_id: 'x' }, at, small.app)).status).toBe(
        200,
      );
      expect((await post(`/api/session-replay/record/${s.siteId}`, batch, at, small.app)).status).toBe(200);
      const over = await post('/api/identify', { site_id: s.siteId, user_id: 'x' }, at, small.app);
      expect([over.status, over.headers.get('retry-after') !== null]).toEqual([429, true]);
      expect((await post(`/api/session-replay/record/${s.siteId}`, batch, at, small.app)).status).toBe(429);
      const elsewhere = from('198.51.100.10');
      expect(
        (await post('/api/identify', { site_id: s.siteId, user_id: 'x' }, elsewhere, small.app)).status,
      ).toBe(200);
    } finally {
      await small.close();
    }
  });

  it('answers CORS preflights like tracking', async () => {
    const pre = await h.app.request('/api/identify', {
      method: 'OPTIONS',
      headers: { origin: 'https://shop.test', 'access-control-request-method': 'POST' },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('https://shop.test');
    expect(pre.headers.get('access-control-allow-credentials')).toBe('true');
  });

  it('answers 503 OVERLOADED when its buffer cannot take the row: no 200 without durability', async () => {
    const s = await h.site({ blockBots: false });
    const refusing = Object.create(h.deps.writers.identifies) as IngestDeps['writer'];
    refusing.append = () => Promise.reject(new OverloadedError());
    const app = createApp({ ...h.deps, writers: { ...h.deps.writers, identifies: refusing } });
    const res = await post('/api/identify', { site_id: s.siteId, user_id: 'x' }, {}, app);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
  });
});
