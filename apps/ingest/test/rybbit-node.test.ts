import { Rybbit } from '@rybbit/node';
import { listen, type Served } from '@trackhouse/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from './harness';

let h: Harness;
let served: Served;
beforeAll(async () => {
  h = await createHarness();
  served = await listen(h.app, '127.0.0.1', 0);
});
afterAll(async () => {
  await served.close();
  await h.close();
});

describe('the official @rybbit/node client', () => {
  it('tracks pageviews and custom events unchanged (key in the body, string site id)', async () => {
    const s = await h.site();
    const client = new Rybbit({
      analyticsHost: `${served.url}/api`,
      siteId: String(s.siteId),
      apiKey: s.apiKey,
    });
    await client.pageview({
      pathname: '/from-node',
      hostname: 'example.com',
      user_agent: 'Node app',
      ip_address: '8.8.8.8',
    });
    await client.event('checkout', { pathname: '/cart' }, { total: 42, currency: 'EUR' });
    await h.flush();
    const rows = await h.rows<{
      type: string;
      pathname: string;
      event_name: string;
      properties: string;
      country: string;
    }>(s.siteId);
    expect(rows.map((r) => [r.type, r.pathname, r.event_name])).toEqual([
      ['pageview', '/from-node', ''],
      ['custom_event', '/cart', 'checkout'],
    ]);
    expect(JSON.parse(rows[1]!.properties)).toEqual({ total: 42, currency: 'EUR' });
    expect(rows[0]!.country).toBe('US');
  });
});
