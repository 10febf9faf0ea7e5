import { randomUUID } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from './harness';

describe('ingest under faults', () => {
  const cleanups: (() => Promise<void>)[] = [];
  // One embedded engine per process: the in-process harnesses of this file share it.
  let base: Harness;
  beforeAll(async () => {
    base = await createHarness();
    cleanups.push(() => base.close());
  });
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  it('absorbs a ClickHouse outage in the buffer, answers 503 at its bound, then drains without duplicates', async () => {
    const h = await createHarness({
      env: { INGEST_BUFFER_MAX_MB: '1', INGEST_FLUSH_INTERVAL_MS: '50' },
      ch: base.ch,
    });
    cleanups.push(h.close);
    const s = await h.site();
    await h.ch.command('RENAME TABLE events TO events_offline');
    let acknowledged = 0;
    let overloaded: Response | undefined;
    for (let i = 0; i < 40 && !overloaded; i++) {
      const res = await h.app.request('/api/track/batch', {
        method: 'POST',
        headers: { authorization: `Bearer ${s.apiKey}` },
        body: JSON.stringify({
          events: Array.from({ length: 100 }, (_, j) => ({
            site_id: s.siteId,
            pathname: `/p/${i}/${j}`,
            page_title: 'x'.repeat(200),
          })),
        }),
      });
      if (res.status === 200) acknowledged += ((await res.json()) as { accepted: number }).accepted;
      else overloaded = res;
    }
    expect(acknowledged).toBeGreaterThan(500);
    expect(overloaded?.status).toBe(503);
    expect(await overloaded!.json()).toMatchObject({ success: false, code: 'OVERLOADED' });
    expect(Number(overloaded!.headers.get('retry-after'))).toBeGreaterThan(0);
    // The buffer can fill before the engine has refused the first insert: its failure is
    // counted once that answer arrives.
    const failed = /trackhouse_ingest_flush_failures_total [1-9]/;
    let metrics = '';
    for (const until = Date.now() + 10_000; Date.now() < until; await new Promise((r) => setTimeout(r, 50))) {
      metrics = await (await h.app.request('/metrics')).text();
      if (failed.test(metrics)) break;
    }
    expect(metrics).toMatch(failed);

    await h.ch.command('RENAME TABLE events_offline TO events');
    const deadline = Date.now() + 30_000;
    while (h.deps.writer.backlog.bytes > 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    const [count] = await h.ch.query<{ rows: number; distinct: number }>(
      'SELECT count() AS rows, uniqExact(event_id) AS distinct FROM events WHERE site_id = {s:UInt32}',
      { s: s.siteId },
    );
    expect(count).toEqual({ rows: acknowledged, distinct: acknowledged });
  }, 60_000);

  it('answers 503 OVERLOADED (never a 500) while the buffer directory cannot be written, then recovers and stores what it acknowledged once', async () => {
    const h = await createHarness({ ch: base.ch });
    cleanups.push(h.close);
    const s = await h.site();
    const settings = h.deps.settings as typeof h.deps.settings & { INGEST_BUFFER_DIR: string };
    const slot = join(settings.INGEST_BUFFER_DIR, 'slot-0');
    // Harnesses share the engine and number their sites alike: this test's rows carry a tag.
    const tag = randomUUID();
    const send = async (pathname: string) => {
      const res = await h.app.request('/api/track', {
        method: 'POST',
        headers: { authorization: `Bearer ${s.apiKey}` },
        body: JSON.stringify({ site_id: s.siteId, pathname: `/${tag}${pathname}` }),
      });
      return { status: res.status, body: await res.json(), retryAfter: res.headers.get('retry-after') };
    };
    expect((await send('/before')).status).toBe(200);
    await h.flush();

    // The buffer's path turns into a regular file: no segment can be created there.
    await rm(slot, { recursive: true });
    await writeFile(slot, '');
    for (const path of ['/refused-1', '/refused-2', '/refused-3']) {
      const res = await send(path);
      expect(res).toMatchObject({ status: 503, body: { success: false, code: 'OVERLOADED' } });
      expect(Number(res.retryAfter)).toBeGreaterThan(0);
    }
    expect(h.deps.writer.isFull()).toBe(true);
    const metrics = await (await h.app.request('/metrics')).text();
    expect(metrics).toMatch(/trackhouse_ingest_buffer_unwritable 1\b/);

    await rm(slot);
    await mkdir(slot);
    const deadline = Date.now() + 10_000;
    while (h.deps.writer.isFull() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect((await send('/after')).status).toBe(200);
    await h.flush();
    const rows = await h.rows<{ pathname: string }>(s.siteId);
    const mine = rows.map((r) => r.pathname).filter((p) => p.startsWith(`/${tag}/`));
    expect(mine.sort()).toEqual([`/${tag}/after`, `/${tag}/before`]);
  }, 30_000);

  it('keeps tracking when Redis is unreachable, enforcing limits per process (documented fallback)', async () => {
    const h = await createHarness({
      env: { TRACK_RATE_LIMIT_MAX: '3' },
      stores: { redisUrl: 'redis://127.0.0.1:1' },
      ch: base.ch,
    });
    cleanups.push(h.close);
    const s = await h.site();
    const send = () =>
      h.app.request('/api/track', {
        method: 'POST',
        headers: { authorization: `Bearer ${s.apiKey}` },
        body: JSON.stringify({ site_id: s.siteId }),
      });
    expect([
      (await send()).status,
      (await send()).status,
      (await send()).status,
      (await send()).status,
    ]).toEqual([200, 200, 200, 429]);
    const metrics = await (await h.app.request('/metrics')).text();
    expect(metrics).toMatch(/trackhouse_redis_fallback_total [1-9]/);
  }, 30_000);
});
