import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from './harness';

let h: Harness;
let site: { siteId: number; apiKey: string };
beforeAll(async () => {
  h = await createHarness({ env: { TRACK_RATE_LIMIT_MAX: '100000' } });
  site = await h.site({
    blockBots: false,
    trackErrors: true,
    webVitals: true,
    trackButtonClicks: true,
    trackCopy: true,
    trackFormInteractions: true,
  });
});
afterAll(async () => {
  await h.close();
});

const anyValue = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 3 }),
);
const fieldValue = (name: string) => {
  switch (name) {
    case 'site_id':
      return fc.oneof(fc.constant(site.siteId), fc.constant(String(site.siteId)), anyValue);
    case 'type':
      return fc.oneof(
        fc.constantFrom(
          'pageview',
          'custom_event',
          'outbound',
          'error',
          'performance',
          'button_click',
          'copy',
          'form_submit',
          'input_change',
          '',
        ),
        anyValue,
      );
    case 'properties':
      return fc.oneof(fc.json({ maxDepth: 2 }), anyValue);
    case 'ip_address':
      return fc.oneof(fc.ipV4(), fc.ipV6(), anyValue);
    case 'screenWidth':
    case 'screenHeight':
      return fc.oneof(fc.integer({ min: -5, max: 70000 }), anyValue);
    case 'lcp':
    case 'cls':
      return fc.oneof(fc.double({ min: -10, max: 700_000 }), anyValue);
    default:
      return fc.oneof(fc.string({ maxLength: 300 }), fc.string({ unit: 'binary', maxLength: 20 }), anyValue);
  }
};
const FIELDS = [
  'site_id',
  'type',
  'pathname',
  'hostname',
  'page_title',
  'querystring',
  'referrer',
  'user_agent',
  'ip_address',
  'user_id',
  'language',
  'screenWidth',
  'screenHeight',
  'event_name',
  'properties',
  'api_key',
  'lcp',
  'cls',
  'extra',
];
const payload = fc
  .subarray(FIELDS)
  .chain((names) => fc.tuple(...names.map((n) => fieldValue(n).map((v) => [n, v] as const))))
  .map((entries) => Object.fromEntries(entries));

function expectErrorShape(status: number, body: Record<string, unknown>) {
  expect(status).toBeLessThan(500);
  if (status >= 400) {
    expect(body.success).toBe(false);
    expect(typeof body.error).toBe('string');
    expect(typeof body.code).toBe('string');
    if (body.details !== undefined) expect(typeof body.details).toBe('object');
  } else {
    expect(body.success).toBe(true);
  }
}

describe('property-based payloads', () => {
  it('never answer 5xx on /api/track, and every rejection has the error shape', async () => {
    await fc.assert(
      fc.asyncProperty(payload, fc.boolean(), async (body, withKey) => {
        const res = await h.app.request('/api/track', {
          method: 'POST',
          headers: withKey ? { authorization: `Bearer ${site.apiKey}` } : {},
          body: JSON.stringify(body),
        });
        expectErrorShape(res.status, (await res.json()) as Record<string, unknown>);
      }),
      { numRuns: 300 },
    );
  });

  it('never answer 5xx for arbitrary bodies, and batches report every item', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string(), fc.json()), async (text) => {
        const res = await h.app.request('/api/track', { method: 'POST', body: text });
        expectErrorShape(res.status, (await res.json()) as Record<string, unknown>);
      }),
      { numRuns: 200 },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(payload, { minLength: 1, maxLength: 20 }), async (events) => {
        const res = await h.app.request('/api/track/batch', {
          method: 'POST',
          headers: { authorization: `Bearer ${site.apiKey}` },
          body: JSON.stringify({ events }),
        });
        const body = (await res.json()) as Record<string, unknown>;
        expectErrorShape(res.status, body);
        if (res.status === 200) {
          const results = body.results as { index: number; success: boolean }[];
          expect(results.map((r) => r.index)).toEqual(events.map((_, i) => i));
          expect(body.accepted).toBe(results.filter((r) => r.success).length);
        }
      }),
      { numRuns: 100 },
    );
  });
});
