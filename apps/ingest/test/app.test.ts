import { createLogger } from '@trackhouse/core';
import { createMemoryStores } from '@trackhouse/limits';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestClickHouse, createTestDatabase } from '../../../test/helpers';
import { createApp as createQueryApp } from '../../query/src';
import { createApp as createIngestApp } from '../src';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let ch: Awaited<ReturnType<typeof createTestClickHouse>>;
const stores = createMemoryStores();

beforeAll(async () => {
  [db, ch] = await Promise.all([createTestDatabase(), createTestClickHouse()]);
});
afterAll(async () => {
  await Promise.all([db.drop(), ch.close(), stores.close()]);
});

const build = (kind: 'ingest' | 'query', failing = false) => {
  const deps = {
    log: createLogger('silent'),
    registry: new Registry(),
    sql: db.sql,
    ch: ch.ch,
    stores,
    secret: 'test-secret-0123456789',
    readiness: [
      { name: 'postgres', check: () => db.sql`select 1`.then(() => {}) },
      {
        name: 'clickhouse',
        check: failing ? () => Promise.reject(new Error('down: secret detail')) : () => ch.ch.ping(),
      },
    ],
  };
  return kind === 'ingest' ? createIngestApp(deps) : createQueryApp(deps);
};

for (const kind of ['ingest', 'query'] as const) {
  describe(`${kind} service operational routes`, () => {
    it('answers health, ready with each dependency, and a request id', async () => {
      const app = build(kind);
      const health = await app.request('/api/health');
      expect(health.status).toBe(200);
      expect(health.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      const ready = await app.request('/api/ready');
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', clickhouse: 'ok' } });
    });

    it('answers 503 in the error shape when a dependency is down, without its internal message', async () => {
      const res = await build(kind, true).request('/api/ready');
      expect(res.status).toBe(503);
      const body = await res.json();
      expect(body).toEqual({
        success: false,
        error: 'Dependencies unavailable: clickhouse',
        code: 'NOT_READY',
        details: { checks: { postgres: 'ok', clickhouse: 'unavailable' } },
      });
      expect(JSON.stringify(body)).not.toContain('secret detail');
    });

    it('exposes Prometheus metrics that count requests', async () => {
      const app = build(kind);
      await app.request('/api/health');
      const res = await app.request('/metrics');
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain(
        `http_requests_total{service="${kind}",method="GET",route="/api/health",status="200"} 1`,
      );
    });

    it('answers unknown routes with 404 in the error shape', async () => {
      const res = await build(kind).request('/api/nope');
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ success: false, error: 'Not found', code: 'NOT_FOUND' });
    });
  });
}
