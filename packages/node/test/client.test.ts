import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listen, type Served } from '@trackhouse/runtime';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createHarness, type Harness } from '../../../apps/ingest/test/harness';
import { Trackhouse } from '../src';

let h: Harness;
let served: Served;
let site: { siteId: number; apiKey: string };
beforeAll(async () => {
  h = await createHarness();
  served = await listen(h.app, '127.0.0.1', 0);
  site = await h.site();
});
afterAll(async () => {
  await served.close();
  await h.close();
});

/** A local server answering with scripted statuses, counting requests. */
async function scripted(answers: { status: number; headers?: Record<string, string>; hang?: boolean }[]) {
  const seen: { path: string; auth?: string; at: number }[] = [];
  const server: Server = createServer((req, res) => {
    seen.push({ path: req.url ?? '', auth: req.headers.authorization, at: Date.now() });
    const answer = answers[Math.min(seen.length - 1, answers.length - 1)]!;
    req.resume();
    if (answer.hang) return;
    res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
    res.end(
      JSON.stringify(
        answer.status < 400
          ? { success: true }
          : { success: false, error: `status ${answer.status}`, code: 'X' },
      ),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
  return {
    url,
    seen,
    close: () => new Promise<void>((r) => server.close(() => r())).then(() => server.closeAllConnections()),
  };
}

describe('constructor', () => {
  it.each([
    [undefined, 'options are required'],
    [{ siteId: 1, apiKey: 'k' }, 'analyticsHost is required'],
    [{ analyticsHost: 'not a url', siteId: 1, apiKey: 'k' }, 'analyticsHost is not a URL'],
    [{ analyticsHost: 'ftp://x/api', siteId: 1, apiKey: 'k' }, 'http(s)'],
    [{ analyticsHost: 'https://x.example', siteId: 1, apiKey: 'k' }, 'must end in /api'],
    [{ analyticsHost: 'https://x.example/api', siteId: 'abc', apiKey: 'k' }, 'siteId'],
    [{ analyticsHost: 'https://x.example/api', siteId: 0, apiKey: 'k' }, 'siteId'],
    [{ analyticsHost: 'https://x.example/api', siteId: 1, apiKey: ' ' }, 'apiKey is required'],
    [
      { analyticsHost: 'https://x.example/api', siteId: 1, apiKey: 'k', batch: { maxEvents: 5000 } },
      'batch.maxEvents',
    ],
  ])('throws a clear error for %j', (options, message) => {
    expect(() => new Trackhouse(options as never)).toThrow(message);
  });

  it('accepts a trailing slash and a numeric-string site id', () => {
    expect(
      () => new Trackhouse({ analyticsHost: 'https://x.example/api/', siteId: '12', apiKey: 'k' }),
    ).not.toThrow();
  });
});

describe('against a live server', () => {
  it('tracks pageviews and events with Bearer auth; the events land with their fields', async () => {
    const client = new Trackhouse({
      analyticsHost: `${served.url}/api/`,
      siteId: site.siteId,
      apiKey: site.apiKey,
    });
    expect(
      await client.pageview({ pathname: '/node', ip_address: '8.8.8.8', user_agent: 'my-service/1.0' }),
    ).toEqual({ ok: true, status: 200 });
    expect(
      await client.event(
        'signup',
        { pathname: '/join' },
        { plan: 'pro', seats: 3, beta: true, tags: ['a', 1] },
      ),
    ).toEqual({
      ok: true,
      status: 200,
    });
    await h.flush();
    const rows = await h.rows<{
      type: string;
      pathname: string;
      event_name: string;
      properties: string;
      country: string;
    }>(site.siteId);
    expect(rows.map((r) => [r.type, r.pathname, r.event_name])).toEqual([
      ['pageview', '/node', ''],
      ['custom_event', '/join', 'signup'],
    ]);
    expect(JSON.parse(rows[1]!.properties)).toEqual({ plan: 'pro', seats: 3, beta: true, tags: ['a', 1] });
    expect(rows[0]!.country).toBe('US');
  });

  it('rejects properties that are not flat values, before sending', () => {
    const client = new Trackhouse({
      analyticsHost: `${served.url}/api`,
      siteId: site.siteId,
      apiKey: site.apiKey,
    });
    expect(() => client.event('x', {}, { nested: { a: 1 } } as never)).toThrow('property "nested"');
    expect(() => client.event('x', {}, { n: Number.NaN })).toThrow('property "n"');
    expect(() => client.event('x', {}, { f: (() => 1) as never })).toThrow('property "f"');
    expect(() => client.event('', {})).toThrow('eventName');
  });

  it('answers a rejection without retrying it', async () => {
    const client = new Trackhouse({
      analyticsHost: `${served.url}/api`,
      siteId: 999_999,
      apiKey: site.apiKey,
    });
    expect(await client.pageview()).toEqual({ ok: false, status: 404, error: 'Site not found' });
  });

  it('batches through /track/batch with per-event results, flush and close', async () => {
    const s = await h.site();
    const client = new Trackhouse({
      analyticsHost: `${served.url}/api`,
      siteId: s.siteId,
      apiKey: s.apiKey,
      batch: { maxEvents: 3, flushIntervalMs: 60_000 },
    });
    const first = [
      client.pageview({ pathname: '/1' }),
      client.pageview({ pathname: '/2' }),
      client.event('e', {}, { a: 1 }),
    ];
    expect(await Promise.all(first)).toEqual([
      { ok: true, status: 200 },
      { ok: true, status: 200 },
      { ok: true, status: 200 },
    ]);
    const later = client.pageview({ pathname: '/4' });
    await client.flush();
    expect(await later).toEqual({ ok: true, status: 200 });
    await client.close();
    expect(await client.pageview()).toEqual({ ok: false, status: 0, error: 'closed' });
    await h.flush();
    expect((await h.rows(s.siteId)).length).toBe(4);
  });
});

describe('failures', () => {
  it('stores an event once when the answer to its first attempt is lost and the client retries', async () => {
    // A proxy in front of the real ingest app: it forwards the first attempt and then drops the
    // connection instead of answering, as a network fault after the server stored the event would.
    const bodies: string[] = [];
    const proxy: Server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks).toString();
      bodies.push(body);
      const answer = await fetch(`${served.url}${req.url}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: req.headers.authorization ?? '' },
        body,
      });
      const text = await answer.text();
      if (bodies.length === 1) {
        res.socket?.destroy();
        return;
      }
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(text);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const client = new Trackhouse({
        analyticsHost: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/api`,
        siteId: site.siteId,
        apiKey: site.apiKey,
        retryDelayMs: 5,
      });
      expect(await client.pageview({ pathname: '/lost-answer' })).toEqual({ ok: true, status: 200 });
      expect(bodies).toHaveLength(2);
      const ids = bodies.map((b) => (JSON.parse(b) as { event_id: string }).event_id);
      expect(ids[0]).toMatch(/^[0-9a-f-]{36}$/);
      expect(ids[1]).toBe(ids[0]);
      await h.flush();
      const rows = await h.rows<{ pathname: string; event_id: string }>(site.siteId);
      expect(rows.filter((r) => r.pathname === '/lost-answer').map((r) => r.event_id)).toEqual([ids[0]]);
    } finally {
      await new Promise<void>((r) => proxy.close(() => r()));
      proxy.closeAllConnections();
    }
  });

  it('retries 503 and 5xx with backoff, then succeeds', async () => {
    const server = await scripted([{ status: 503 }, { status: 502 }, { status: 200 }]);
    try {
      const client = new Trackhouse({
        analyticsHost: server.url,
        siteId: 1,
        apiKey: 'secret-key',
        retryDelayMs: 20,
      });
      expect(await client.pageview()).toEqual({ ok: true, status: 200 });
      expect(server.seen).toHaveLength(3);
      expect(server.seen.every((s) => s.auth === 'Bearer secret-key' && s.path === '/api/track')).toBe(true);
      expect(server.seen[2]!.at - server.seen[1]!.at).toBeGreaterThanOrEqual(35); // 20 ms, then 40 ms
    } finally {
      await server.close();
    }
  });

  it('honours Retry-After on 429', async () => {
    const server = await scripted([{ status: 429, headers: { 'retry-after': '1' } }, { status: 200 }]);
    try {
      const client = new Trackhouse({ analyticsHost: server.url, siteId: 1, apiKey: 'k', retryDelayMs: 10 });
      expect(await client.pageview()).toEqual({ ok: true, status: 200 });
      expect(server.seen[1]!.at - server.seen[0]!.at).toBeGreaterThanOrEqual(950);
    } finally {
      await server.close();
    }
  });

  it('gives up after maxRetries with the last status and error', async () => {
    const server = await scripted([{ status: 503 }]);
    try {
      const client = new Trackhouse({
        analyticsHost: server.url,
        siteId: 1,
        apiKey: 'k',
        retryDelayMs: 5,
        maxRetries: 2,
      });
      expect(await client.pageview()).toEqual({ ok: false, status: 503, error: 'status 503' });
      expect(server.seen).toHaveLength(3);
    } finally {
      await server.close();
    }
  });

  it('resolves (never throws) on a closed port and on a timeout', async () => {
    const server = await scripted([{ status: 200 }]);
    const url = server.url;
    await server.close();
    const closed = new Trackhouse({
      analyticsHost: url,
      siteId: 1,
      apiKey: 'k',
      retryDelayMs: 5,
      maxRetries: 1,
    });
    const result = await closed.pageview();
    expect(result.ok).toBe(false);
    expect(result.status).toBe(0);
    expect(result.error).toBeTruthy();

    const hanging = await scripted([{ status: 200, hang: true }]);
    try {
      const slow = new Trackhouse({
        analyticsHost: hanging.url,
        siteId: 1,
        apiKey: 'k',
        timeoutMs: 100,
        maxRetries: 0,
      });
      expect(await slow.pageview()).toEqual({ ok: false, status: 0, error: 'timed out after 100 ms' });
    } finally {
      await hanging.close();
    }
  });

  it('logs each request in debug mode without ever printing the key', async () => {
    const server = await scripted([{ status: 500 }, { status: 200 }]);
    const debug = vi.spyOn(console, 'debug').mockImplementation(() => {});
    try {
      const client = new Trackhouse({
        analyticsHost: server.url,
        siteId: 1,
        apiKey: 'th_supersecretvalue',
        debug: true,
        retryDelayMs: 5,
      });
      await client.pageview();
      const lines = debug.mock.calls.map((c) => c.join(' '));
      expect(lines).toHaveLength(2);
      expect(lines[0]).toContain('500');
      expect(lines.join('\n')).not.toContain('supersecret');
    } finally {
      debug.mockRestore();
      await server.close();
    }
  });
});

describe('package', () => {
  it('builds ESM and CJS with types that check in a consumer project', () => {
    const root = join(__dirname, '..');
    execFileSync(process.execPath, [join(root, 'build.mjs')], { stdio: 'pipe' });
    const cjs = createRequire(import.meta.url)(join(root, 'dist/cjs/index.cjs')) as { Trackhouse: unknown };
    expect(typeof cjs.Trackhouse).toBe('function');
    const consumer = mkdtempSync(join(tmpdir(), 'trackhouse-consumer-'));
    try {
      writeFileSync(
        join(consumer, 'use.ts'),
        `import { Trackhouse, type TrackResult } from '${join(root, 'dist/esm/index.js')}';
const client = new Trackhouse({ analyticsHost: 'https://x.example/api', siteId: 1, apiKey: 'k', batch: { maxEvents: 10 } });
const r: Promise<TrackResult> = client.event('e', { pathname: '/' }, { a: 1, b: ['x', true] });
// @ts-expect-error: nested objects are not properties
client.event('e', {}, { nested: { a: 1 } });
void r;
`,
      );
      const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
      execFileSync(
        process.execPath,
        [
          tsc,
          '--noEmit',
          '--strict',
          '--module',
          'NodeNext',
          '--moduleResolution',
          'NodeNext',
          '--skipLibCheck',
          '--types',
          'node',
          join(consumer, 'use.ts'),
        ],
        {
          stdio: 'pipe',
          cwd: root,
        },
      );
    } finally {
      rmSync(consumer, { recursive: true, force: true });
    }
  }, 60_000);
});
