import { generateEvents, insertEvents, type StoredEvent } from '@trackhouse/clickhouse';
import { loadConfig, uuidv7 } from '@trackhouse/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES } from '../src';
import { boundedReads } from '../src/reads';
import { createQueryHarness, type QueryHarness } from './harness';

let h: QueryHarness;
let tenant: Awaited<ReturnType<QueryHarness['tenant']>>;
beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '100000', READ_ANON_RATE_LIMIT_MAX: '100000' });
  tenant = await h.tenant();
  await insertEvents(h.ch, [...generateEvents({ siteId: tenant.siteId, events: 400, days: 3 })]);
}, 120_000);
afterAll(async () => {
  await h.close();
});

/** A body of `total` bytes produced only as it is read, counting what was pulled. */
function countedStream(total: number, chunkBytes = 16 * 1024) {
  const chunk = new Uint8Array(chunkBytes).fill(0x20);
  const counter = { pulled: 0 };
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (counter.pulled >= total) controller.close();
        else {
          counter.pulled += chunk.length;
          controller.enqueue(chunk);
        }
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, counter, chunkBytes };
}

describe('request bodies', () => {
  it('refuses a chunked body past the limit with 413 before authentication, reading about the limit only', async () => {
    const { stream, counter, chunkBytes } = countedStream(64 * 1024 * 1024);
    const res = await h.app.request(`/api/sites/${tenant.siteId}/config`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({
      success: false,
      error: `Request body larger than ${MAX_BODY_BYTES / 1024} KiB`,
      code: 'PAYLOAD_TOO_LARGE',
    });
    // Read up to the limit and one chunk past it, never the 64 MiB offered.
    expect(counter.pulled).toBeGreaterThan(MAX_BODY_BYTES);
    expect(counter.pulled).toBeLessThanOrEqual(MAX_BODY_BYTES + chunkBytes);
  });

  it('refuses a declared Content-Length past the limit without reading the body', async () => {
    const { stream, counter } = countedStream(64 * 1024 * 1024);
    const res = await h.app.request('/api/user/api-keys', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(100 * 1024 * 1024) },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as { code: string }).code).toBe('PAYLOAD_TOO_LARGE');
    expect(counter.pulled).toBe(0);
  });

  it('accepts a body of exactly the limit (whitespace around a valid config)', async () => {
    const json = JSON.stringify({ blockBots: false });
    const body = json + ' '.repeat(MAX_BODY_BYTES - json.length);
    const ok = await h.app.request(`/api/sites/${tenant.siteId}/config`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${tenant.key}` },
      body,
    });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { config: { blockBots: boolean } }).config.blockBots).toBe(false);
  });
});

describe('keyless reads', () => {
  it('get a budget per client address, counted behind the trusted proxy hops only', async () => {
    const anon = await createQueryHarness(
      { READ_ANON_RATE_LIMIT_MAX: '3', READ_ANON_RATE_LIMIT_WINDOW_S: '600', TRUST_PROXY: '1' },
      h.ch,
    );
    try {
      const t = await anon.tenant();
      await anon.request(`/api/sites/${t.siteId}/config`, {
        key: t.key,
        method: 'PUT',
        body: { public: true },
      });
      const from = (address: string, path = `/api/sites/${t.siteId}/events`) =>
        anon.request(path, { headers: { 'x-forwarded-for': `198.51.100.7, ${address}` } });
      for (let i = 0; i < 3; i++) {
        const ok = await from('203.0.113.1', i === 1 ? `/api/sites/${t.siteId}/goals` : undefined);
        expect(ok.status).toBe(200);
        expect(ok.headers.get('RateLimit-Limit')).toBe('3');
        expect(ok.headers.get('RateLimit-Remaining')).toBe(String(2 - i));
      }
      const refused = await from('203.0.113.1');
      expect(refused.status).toBe(429);
      expect(await refused.json()).toEqual({
        success: false,
        error: 'Rate limit exceeded. Maximum 3 requests per 10 minutes per client address.',
        code: 'RATE_LIMITED',
      });
      expect(Number(refused.headers.get('Retry-After'))).toBeGreaterThan(590);
      expect(refused.headers.get('RateLimit-Remaining')).toBe('0');
      // Another address has its own budget; a member's key reads on the key's budget.
      expect((await from('203.0.113.2')).status).toBe(200);
      const keyed = await anon.request(`/api/sites/${t.siteId}/events`, {
        key: t.key,
        headers: { 'x-forwarded-for': '203.0.113.1' },
      });
      expect(keyed.status).toBe(200);
    } finally {
      await anon.close();
    }
  });

  it('count private-link reads too, and ignore X-Forwarded-For when no proxy is trusted', async () => {
    const anon = await createQueryHarness({ READ_ANON_RATE_LIMIT_MAX: '2', TRUST_PROXY: '0' }, h.ch);
    try {
      const t = await anon.tenant();
      const link = await anon.json<{ data: { privateLinkKey: string } }>(
        `/api/sites/${t.siteId}/private-link-config`,
        { key: t.key, method: 'POST', body: { action: 'generate_private_link_key' } },
      );
      const read = (address: string) =>
        anon.request(`/api/sites/${t.siteId}`, {
          headers: { 'x-private-key': link.body.data.privateLinkKey, 'x-forwarded-for': address },
        });
      expect((await read('203.0.113.1')).status).toBe(200);
      expect((await read('203.0.113.2')).status).toBe(200);
      // A spoofed header does not buy a fresh budget: all three come from the same peer.
      const third = await read('203.0.113.3');
      expect(third.status).toBe(429);
      expect(((await third.json()) as { code: string }).code).toBe('RATE_LIMITED');
    } finally {
      await anon.close();
    }
  });
});

describe('ClickHouse reads', () => {
  it('answer 503 QUERY_TIMEOUT with Retry-After when a read runs past the time limit', async () => {
    const slow = await createQueryHarness({}, h.ch, { CLICKHOUSE_READ_TIMEOUT_S: 0.000_001 });
    try {
      const t = await slow.tenant();
      await insertEvents(slow.ch, [...generateEvents({ siteId: t.siteId, events: 2000, days: 3 })]);
      for (const path of ['/events', '/events/names', '/goals']) {
        const res = await slow.request(`/api/sites/${t.siteId}${path}`, { key: t.key });
        const body = await res.json();
        expect({ status: res.status, body }).toEqual({
          status: 503,
          body: {
            success: false,
            error: expect.stringMatching(/took longer than the server allows/),
            code: 'QUERY_TIMEOUT',
          },
        });
        expect(Number(res.headers.get('Retry-After'))).toBeGreaterThanOrEqual(1);
      }
      // The limits are set on every read: the shared engine still answers the default harness.
      expect((await h.request(`/api/sites/${tenant.siteId}/events`, { key: tenant.key })).status).toBe(200);
    } finally {
      await slow.close();
    }
  });

  it('answer 503 QUERY_TOO_LARGE when a read needs more memory than allowed', async () => {
    const small = await createQueryHarness({ CLICKHOUSE_READ_MAX_MEMORY_MB: '16' }, h.ch);
    try {
      const t = await small.tenant();
      // 24 events with distinct 1 MiB property values: grouping them needs 24 MiB.
      const [template] = generateEvents({ siteId: t.siteId, events: 1, days: 1 });
      const big: StoredEvent[] = Array.from({ length: 24 }, (_, i) => {
        const value = `${i}`.padEnd(1024 * 1024, 'x');
        return {
          ...template!,
          event_id: uuidv7(),
          type: 'custom_event',
          event_name: 'big',
          properties: JSON.stringify({ blob: value }),
          props: { blob: value },
        };
      });
      await insertEvents(small.ch, big, { batchRows: 10 });
      const res = await small.request(`/api/sites/${t.siteId}/events/properties?event_name=big`, {
        key: t.key,
      });
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({
        success: false,
        error: expect.stringMatching(/more memory than the server allows/),
        code: 'QUERY_TOO_LARGE',
      });
      expect(Number(res.headers.get('Retry-After'))).toBeGreaterThanOrEqual(1);
      // A modest read of the same site fits.
      expect((await small.request(`/api/sites/${t.siteId}/events/names`, { key: t.key })).status).toBe(200);
    } finally {
      await small.close();
    }
  });

  it('spill a large aggregation by default and refuse it with 503 QUERY_TOO_LARGE when CLICKHOUSE_READ_SPILL=false', async () => {
    // 3 M distinct keys: the hash table alone is far past the 64 MB limit.
    const sql = `SELECT count() AS groups, sum(c) AS rows
      FROM (SELECT number % 3000000 AS key, count() AS c FROM numbers(6000000) GROUP BY key)`;
    const spilling = boundedReads(h.ch, loadConfig({ CLICKHOUSE_READ_MAX_MEMORY_MB: '64' }));
    expect(await spilling.query(sql)).toEqual([{ groups: 3_000_000, rows: 6_000_000 }]);
    const refusing = boundedReads(
      h.ch,
      loadConfig({ CLICKHOUSE_READ_MAX_MEMORY_MB: '64', CLICKHOUSE_READ_SPILL: 'false' }),
    );
    await expect(refusing.query(sql)).rejects.toMatchObject({
      status: 503,
      code: 'QUERY_TOO_LARGE',
      message: expect.stringMatching(/more memory than the server allows \(64 MB\)/),
    });
  });

  it('answer 400 for a time zone the engine cannot load', async () => {
    const ch = boundedReads(h.ch, loadConfig({}));
    // The route canonicalizes names; a name the engine's tz data lacks fails like this one.
    await expect(
      ch.query("SELECT toDateTime64('2024-01-01 00:00:00', 3, {tz:String}) AS t", { tz: 'america/new_york' }),
    ).rejects.toMatchObject({
      status: 400,
      code: 'INVALID_PARAMS',
      details: { fieldErrors: { time_zone: [expect.any(String)] } },
    });
  });
});

describe('paging caps', () => {
  it('refuses goal sessions past the 10,000th with 400 and details', async () => {
    const goal = await h.json<{ goalId: number }>(`/api/sites/${tenant.siteId}/goals`, {
      key: tenant.key,
      method: 'POST',
      body: { name: 'any page', goalType: 'path', config: { pathPattern: '/**' } },
    });
    const sessions = (query: string) =>
      h.json(`/api/sites/${tenant.siteId}/goals/${goal.body.goalId}/sessions?${query}`, { key: tenant.key });
    expect((await sessions('page=100&limit=100')).status).toBe(200);
    expect((await sessions('page=400')).status).toBe(200);
    for (const query of ['page=101&limit=100', 'page=401', 'page=1000000&limit=100']) {
      const res = await sessions(query);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        success: false,
        code: 'INVALID_PARAMS',
        details: {
          fieldErrors: { page: expect.arrayContaining([expect.stringContaining('10,000')]) },
          formErrors: [],
        },
      });
    }
  });

  it('bounds event names by `limit` (default and maximum 1000), keeping the most frequent', async () => {
    const all = await h.json<{ data: { eventName: string; count: number }[] }>(
      `/api/sites/${tenant.siteId}/events/names`,
      { key: tenant.key },
    );
    expect(all.body.data.length).toBeGreaterThan(2);
    const two = await h.json<{ data: unknown[] }>(`/api/sites/${tenant.siteId}/events/names?limit=2`, {
      key: tenant.key,
    });
    expect(two.body.data).toEqual(all.body.data.slice(0, 2));
    for (const endpoint of ['names', 'outbound', 'properties?event_name=signup&']) {
      const sep = endpoint.endsWith('&') ? '' : '?';
      for (const limit of ['0', '1001', '-1', 'x']) {
        const res = await h.json(`/api/sites/${tenant.siteId}/events/${endpoint}${sep}limit=${limit}`, {
          key: tenant.key,
        });
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({
          code: 'INVALID_PARAMS',
          details: { fieldErrors: { limit: [expect.any(String)] } },
        });
      }
    }
  });
});
