import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type IngestDeps } from '../src';
import { OverloadedError } from '../src/writer/writer';
import { createHarness, type Harness } from './harness';

const CHROME =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

let h: Harness;
beforeAll(async () => {
  h = await createHarness({
    env: { TRUST_PROXY: '1', SESSION_REPLAY_MAX_MB_PER_DAY: '1', SESSION_REPLAY_RETENTION_DAYS: '14' },
  });
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
const record = (siteId: number | string, body: unknown, headers: Record<string, string> = {}, app = h.app) =>
  post(`/api/session-replay/record/${siteId}`, body, headers, app);
const from = (ip: string) => ({ 'x-forwarded-for': ip });

/** A batch as the browser client posts it: rrweb events and the page's metadata. */
function batch(events: unknown[], userId = '') {
  return {
    userId,
    events,
    metadata: {
      pageUrl: 'https://shop.test/cart',
      viewportWidth: 1280,
      viewportHeight: 800,
      language: 'en-US',
    },
  };
}
const T0 = Date.UTC(2026, 10, 20, 12, 0, 0);
const snapshot = {
  type: 2,
  timestamp: T0,
  data: { node: { type: 0, childNodes: [] }, initialOffset: { top: 0 } },
};
const click = { type: 3, timestamp: T0 + 1500, data: { source: 2, type: 2, id: 14, x: 10, y: 20 } };

interface ReplayRow {
  session_id: string;
  user_id: string;
  identified_user_id: string;
  start_time: string;
  end_time: string;
  event_count: number;
  size: number;
  events: string;
  page_url: string;
  viewport_width: number;
  viewport_height: number;
  language: string;
  retention_days: number;
}

const replayRows = (siteId: number) =>
  h.ch.query<ReplayRow>(
    `SELECT * EXCEPT (session_id, start_time, end_time), toString(session_id) AS session_id,
       toString(start_time) AS start_time, toString(end_time) AS end_time
     FROM session_replay WHERE site_id = {s:UInt32} ORDER BY timestamp, batch_id`,
    { s: siteId },
  );

describe('POST /api/session-replay/record/:siteId', () => {
  it('stores a batch in the session the visitor is in, with its events as sent', async () => {
    const s = await h.site({ sessionReplay: true, domain: 'shop.test' });
    const visitor = { origin: 'https://shop.test', ...from('8.8.8.8') };
    expect((await post('/api/track', { site_id: s.siteId, pathname: '/cart' }, visitor)).status).toBe(200);
    const res = await record(s.siteId, batch([snapshot, click], 'user-42'), visitor);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ success: true });
    expect(res.headers.get('access-control-allow-origin')).toBe('https://shop.test');
    expect((await record(s.siteId, batch([{ ...click, timestamp: T0 + 9000 }]), visitor)).status).toBe(200);
    await h.flush();
    const [pageview] = await h.rows<{ session_id: string; user_id: string }>(s.siteId);
    const rows = await replayRows(s.siteId);
    expect(rows).toHaveLength(2);
    const events = JSON.stringify([snapshot, click]);
    expect(rows[0]).toMatchObject({
      session_id: pageview!.session_id,
      user_id: pageview!.user_id,
      identified_user_id: 'user-42',
      start_time: '2026-11-20 12:00:00.000',
      end_time: '2026-11-20 12:00:01.500',
      event_count: 2,
      size: Buffer.byteLength(events),
      page_url: 'https://shop.test/cart',
      viewport_width: 1280,
      viewport_height: 800,
      language: 'en-US',
      retention_days: 14,
    });
    expect(JSON.parse(rows[0]!.events)).toEqual([snapshot, click]);
    expect(rows[1]).toMatchObject({
      session_id: pageview!.session_id,
      identified_user_id: '',
      event_count: 1,
    });
  });

  it('answers tracked false while the site has replay off (the default), and stores nothing', async () => {
    const s = await h.site();
    expect(await (await record(s.siteId, batch([snapshot]))).json()).toEqual({
      success: true,
      tracked: false,
      reason: 'session_replay_disabled',
    });
    await h.flush();
    expect(await replayRows(s.siteId)).toEqual([]);
  });

  it('caps what a site records per UTC day; past it batches are answered tracked false, other sites unaffected', async () => {
    const s = await h.site({ sessionReplay: true, blockBots: false });
    const other = await h.site({ sessionReplay: true, blockBots: false });
    const big = batch([{ type: 2, timestamp: T0, data: { html: 'x'.repeat(400_000) } }]);
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await (await record(s.siteId, big, from(`9.9.9.${i}`))).json());
    // 1 MiB a day: the batch that crosses the cap is still stored, the next one is not.
    expect(answers).toEqual([
      { success: true },
      { success: true },
      { success: true },
      { success: true, tracked: false, reason: 'replay_limit_reached' },
    ]);
    expect(await (await record(other.siteId, big)).json()).toEqual({ success: true });
    await h.flush();
    expect(await replayRows(s.siteId)).toHaveLength(3);
    expect(await replayRows(other.siteId)).toHaveLength(1);
  });

  it('413 beyond 2 MiB, 400 for malformed batches and ids, 404 for an unknown site', async () => {
    const s = await h.site({ sessionReplay: true, blockBots: false });
    const huge = batch([{ type: 2, timestamp: T0, data: { html: 'x'.repeat(2 * 1024 * 1024) } }]);
    const tooLarge = await record(s.siteId, huge);
    expect([tooLarge.status, ((await tooLarge.json()) as { code: string }).code]).toEqual([
      413,
      'PAYLOAD_TOO_LARGE',
    ]);
    for (const body of [
      batch([]),
      batch([{ type: 'full', timestamp: T0, data: {} }]),
      batch([{ type: 2, timestamp: Date.UTC(2200, 0, 1), data: {} }]),
      { events: [snapshot], sessionId: 'x' },
      '{"events": [',
    ]) {
      const res = await record(s.siteId, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    expect((await record('abc', batch([snapshot]))).status).toBe(400);
    expect((await record(987654, batch([snapshot]))).status).toBe(404);
    await h.flush();
    expect(await replayRows(s.siteId)).toEqual([]);
  });

  it('applies the keyless checks of tracking: domain and bots', async () => {
    const s = await h.site({ sessionReplay: true, domain: 'shop.test' });
    const elsewhere = await record(s.siteId, batch([snapshot]), { origin: 'https://evil.test' });
    expect(elsewhere.status).toBe(403);
    const bot = await record(s.siteId, batch([snapshot]), { 'user-agent': 'curl/8.0' });
    expect(bot.status).toBe(403);
  });

  it('answers 503 when its buffer cannot take the batch, and gives the bytes back to the day', async () => {
    const s = await h.site({ sessionReplay: true, blockBots: false });
    const refusing = Object.create(h.deps.writers.replays) as IngestDeps['writer'];
    refusing.append = () => Promise.reject(new OverloadedError());
    const app = createApp({ ...h.deps, writers: { ...h.deps.writers, replays: refusing } });
    const big = batch([{ type: 2, timestamp: T0, data: { html: 'x'.repeat(700_000) } }]);
    for (let i = 0; i < 3; i++) expect((await record(s.siteId, big, {}, app)).status).toBe(503);
    // Nothing was counted: a 700 KB batch still fits twice in the 1 MiB day.
    expect(await (await record(s.siteId, big)).json()).toEqual({ success: true });
    expect(await (await record(s.siteId, big)).json()).toEqual({ success: true });
  });

  it('expires rows by their retention (ClickHouse TTL), whole days at a time', async () => {
    const day = (daysAgo: number) =>
      new Date(Date.now() - daysAgo * 86_400_000).toISOString().replace('T', ' ').replace('Z', '');
    const row = (daysAgo: number, retention: number) => ({
      site_id: 424242,
      session_id: '01900000-0000-7000-8000-000000000001',
      timestamp: day(daysAgo),
      batch_id: `01900000-0000-7000-8000-0000000000${String(daysAgo).padStart(2, '0')}`,
      events: '[]',
      retention_days: retention,
    });
    await h.ch.writer.insert({
      table: 'session_replay',
      values: [row(40, 30), row(20, 30), row(10, 5)],
      format: 'JSONEachRow',
    });
    await h.ch.command('OPTIMIZE TABLE session_replay FINAL');
    const kept = await h.ch.query<{ batch_id: string }>(
      'SELECT toString(batch_id) AS batch_id FROM session_replay WHERE site_id = 424242',
    );
    expect(kept.map((r) => r.batch_id)).toEqual(['01900000-0000-7000-8000-000000000020']);
  });
});
