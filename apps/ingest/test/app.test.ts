import { createLogger, loadConfig } from '@trackhouse/core';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp as createQueryApp } from '../../query/src';
import { createApp as createIngestApp } from '../src';
import { createHarness, type Harness } from './harness';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h.close();
});

type Checks = { name: string; check: () => Promise<void> }[];

const okChecks = (): Checks => [{ name: 'postgres', check: () => h.db.sql`select 1`.then(() => {}) }];
const failingChecks = (): Checks => [
  ...okChecks(),
  { name: 'clickhouse', check: () => Promise.reject(new Error('down: secret detail')) },
];
const builders = {
  ingest: (readiness: Checks) => createIngestApp({ ...h.deps, registry: new Registry(), readiness }),
  query: (readiness: Checks) =>
    createQueryApp({
      log: createLogger('silent'),
      registry: new Registry(),
      sql: h.db.sql,
      ch: h.ch,
      stores: h.deps.stores,
      readiness,
      settings: loadConfig({}),
    }),
};

for (const kind of ['ingest', 'query'] as const) {
  describe(`${kind} service operational routes`, () => {
    const build = (failing = false) => builders[kind](failing ? failingChecks() : okChecks());

    it('answers health, ready with each dependency, and a request id', async () => {
      const app = build();
      const health = await app.request('/api/health');
      expect(health.status).toBe(200);
      expect(health.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      const ready = await app.request('/api/ready');
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: 'ready', checks: { postgres: 'ok' } });
    });

    it('answers 503 in the error shape when a dependency is down, without its internal message', async () => {
      const res = await build(true).request('/api/ready');
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
      const app = build();
      await app.request('/api/health');
      const text = await (await app.request('/metrics')).text();
      expect(text).toContain(
        `http_requests_total{service="${kind}",method="GET",route="/api/health",status="200"} 1`,
      );
    });

    it('answers unknown routes with 404 in the error shape', async () => {
      const res = await build().request('/api/nope');
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ success: false, error: 'Not found', code: 'NOT_FOUND' });
    });
  });
}
