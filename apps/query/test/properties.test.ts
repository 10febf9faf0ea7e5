import { FILTER_PARAMETERS, FILTER_TYPES, generateEvents, insertEvents } from '@trackhouse/clickhouse';
import { storable } from '@trackhouse/core';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueryHarness, type QueryHarness } from './harness';

/**
 * Properties over every read and management endpoint, with hostile parameters and bodies: never
 * a 5xx, always the error shape on a 4xx, and writes that read back as the storable form of what
 * was sent. Run counts are bounded so that the file stays within about 30 seconds.
 */
let h: QueryHarness;
let t: Awaited<ReturnType<QueryHarness['tenant']>>;
let goalId: number;
beforeAll(async () => {
  h = await createQueryHarness({
    QUERY_RATE_LIMIT_MAX: '1000000',
    READ_ANON_RATE_LIMIT_MAX: '1000000',
    API_KEYS_PER_USER_MAX: '10000',
    API_KEY_CREATE_LIMIT_PER_DAY: '100000',
  });
  t = await h.tenant();
  // Public: keyless reads are answered too (and counted per address).
  await h.request(`/api/sites/${t.siteId}/config`, { key: t.key, method: 'PUT', body: { public: true } });
  await insertEvents(h.ch, [...generateEvents({ siteId: t.siteId, events: 500, days: 3 })]);
  const goal = await h.json<{ goalId: number }>(`/api/sites/${t.siteId}/goals`, {
    key: t.key,
    method: 'POST',
    body: { name: 'g', goalType: 'path', config: { pathPattern: '/**' } },
  });
  goalId = goal.body.goalId;
}, 120_000);
afterAll(async () => {
  await h.close();
});

// ---- generators ------------------------------------------------------------------------------

/** Characters that break naive code: NUL, lone surrogates, controls, bidi, zero-width, astral. */
const nasty = fc.constantFrom(
  '\u0000',
  '\ud800',
  '\udfff',
  '\udc00\ud800',
  '\u0007',
  '\u001b',
  '\n',
  '\u202e',
  '\u2066',
  '\u200b',
  '\ufeff',
  '\u{1f600}',
  '\u{1d54f}',
  '%',
  "'",
  '"',
  '\\',
  '{',
  '*',
  ' ',
);
const hostileText = fc
  .array(fc.oneof(nasty, fc.string({ unit: 'binary', maxLength: 6 }), fc.string({ maxLength: 6 })), {
    maxLength: 8,
  })
  .map((parts) => parts.join(''));
const hostileNumber = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true }),
  fc.constantFrom(0, -1, 2 ** 31, 2 ** 53, -(2 ** 63), 1e308, 5e-324),
);
const plausibleDate = fc
  .date({ min: new Date('2020-01-01T00:00:00Z'), max: new Date('2030-12-31T00:00:00Z'), noInvalidDate: true })
  .map((d) => d.toISOString().slice(0, 10));
const plausibleInstant = fc
  .date({ min: new Date('2020-01-01T00:00:00Z'), max: new Date('2030-12-31T00:00:00Z'), noInvalidDate: true })
  .map((d) => d.toISOString());
const absurdDate = fc.oneof(
  plausibleDate,
  fc
    .tuple(
      fc.integer({ min: 0, max: 9999 }),
      fc.integer({ min: 0, max: 13 }),
      fc.integer({ min: 0, max: 32 }),
    )
    .map(
      ([y, m, d]) =>
        `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`,
    ),
  fc.constantFrom('1970-01-01', '2299-12-31', '2024-02-30', '+02024-01-01', '2024-1-1'),
  hostileText,
);
const timeZone = fc.oneof(
  fc.constantFrom(
    'UTC',
    'utc',
    'america/new_york',
    'Asia/Kolkata',
    'Etc/GMT+12',
    'Pacific/Kiritimati',
    'EST5EDT',
  ),
  hostileText,
);
const filter = fc.record(
  {
    parameter: fc.oneof(fc.constantFrom(...FILTER_PARAMETERS), hostileText),
    type: fc.oneof(fc.constantFrom(...FILTER_TYPES), hostileText),
    value: fc.oneof(
      fc.array(
        fc.oneof(hostileText, hostileNumber, fc.constantFrom('(?=x)', 'a{1001}', '^/b', '[', '(a|b)*')),
        {
          maxLength: 4,
        },
      ),
      fc.jsonValue(),
    ),
  },
  { requiredKeys: [] },
);
/** Well-formed filters with hostile values: these reach ClickHouse. */
const validFilter = fc.record({
  parameter: fc.constantFrom(...FILTER_PARAMETERS),
  type: fc.constantFrom(...FILTER_TYPES),
  value: fc.array(fc.oneof(hostileText, hostileNumber, fc.constantFrom('^/b', '(a|b)*', '\\pL+', '')), {
    minLength: 1,
    maxLength: 3,
  }),
});
const filtersText = fc.oneof(
  fc.array(validFilter, { maxLength: 3 }).map((list) => JSON.stringify(list)),
  fc.array(filter, { maxLength: 4 }).map((list) => JSON.stringify(list)),
  fc.jsonValue().map((v) => JSON.stringify(v)),
  hostileText,
);
const numberText = fc.oneof(hostileNumber.map(String), hostileText, fc.constantFrom('1', '100', '1001', '0'));

const smallInt = fc.integer({ min: 1, max: 100 }).map(String);

/** Values a client would send: with these, queries reach ClickHouse. */
const plausible = {
  start_date: plausibleDate,
  end_date: plausibleDate,
  time_zone: fc.constantFrom('UTC', 'utc', 'america/new_york', 'Asia/Kolkata', 'Etc/GMT+12', 'EST5EDT'),
  filters: fc.array(validFilter, { maxLength: 3 }).map((list) => JSON.stringify(list)),
  page: fc.integer({ min: 1, max: 5 }).map(String),
  page_size: smallInt,
  limit: smallInt,
  sort: fc.constantFrom('goalId', 'name', 'goalType', 'createdAt'),
  order: fc.constantFrom('asc', 'desc'),
  cursor: fc
    .tuple(plausibleInstant, fc.uuid())
    .map((pair) => Buffer.from(JSON.stringify(pair)).toString('base64url')),
  before_timestamp: plausibleInstant,
  event_name: hostileText,
};
/** Values that must be refused (or survived) without a 5xx. */
const hostile: Record<keyof typeof plausible, fc.Arbitrary<string>> = {
  start_date: absurdDate,
  end_date: absurdDate,
  time_zone: timeZone,
  filters: filtersText,
  page: numberText,
  page_size: numberText,
  limit: numberText,
  sort: hostileText,
  order: hostileText,
  cursor: hostileText,
  before_timestamp: fc.oneof(
    hostileText,
    fc.date().map((d) => String(d.getTime())),
    absurdDate,
  ),
  event_name: hostileText,
};
const names = Object.keys(plausible) as (keyof typeof plausible)[];

/**
 * A query string: plausible parameters, one or two of them (or all) hostile, percent-encoded,
 * sometimes with raw escapes that decode to no text.
 */
const queryString = fc
  .tuple(
    fc.record(plausible, { requiredKeys: [] }),
    fc.oneof(
      { arbitrary: fc.constant({}), weight: 2 },
      {
        arbitrary: fc
          .uniqueArray(fc.constantFrom(...names), { minLength: 1, maxLength: 2 })
          .chain((keys) => fc.record(Object.fromEntries(keys.map((k) => [k, hostile[k]])))),
        weight: 3,
      },
      { arbitrary: fc.record(hostile, { requiredKeys: [] }), weight: 1 },
    ),
    fc.constantFrom('', '', '', '&x=%FF', '&x=%ED%A0%80', '&filters=%ZZ'),
  )
  .map(([base, spoiled, junk]) =>
    Object.entries({ ...base, ...spoiled })
      .map(([k, v]) => `${k}=${encodeURIComponent(String(v).toWellFormed())}`)
      .join('&')
      .concat(junk),
  );

const READ_PATHS = [
  '',
  '/goals',
  '/goals/:goal/sessions',
  '/events',
  '/events/names',
  '/events/properties',
  '/events/outbound',
];

// ---- assertions ------------------------------------------------------------------------------

async function answer(res: Response): Promise<{ status: number; body: unknown }> {
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, body };
}

/** Never a 5xx; a 4xx always in the error shape. */
function expectWellFormed(what: string, res: { status: number; body: unknown }): void {
  expect({ what, status: res.status < 500 ? 'not 5xx' : res.status }).toEqual({ what, status: 'not 5xx' });
  if (res.status >= 400) {
    expect(res.body).toEqual({
      success: false,
      error: expect.any(String),
      code: expect.stringMatching(/^[A-Z_]+$/),
      ...((res.body as { details?: unknown }).details ? { details: expect.any(Object) } : {}),
    });
  }
}

const send = async (path: string, init: Parameters<QueryHarness['request']>[1] = {}) =>
  answer(await h.request(path, { key: t.key, ...init }));

// ---- properties ------------------------------------------------------------------------------

describe('hostile input, as properties', () => {
  it('reads answer 2xx or a 4xx in the error shape, with or without a key', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...READ_PATHS),
        queryString,
        fc.boolean(),
        async (path, query, keyed) => {
          const url = `/api/sites/${t.siteId}${path.replace(':goal', String(goalId))}?${query}`;
          const res = await answer(await h.request(url, keyed ? { key: t.key } : {}));
          expectWellFormed(url, res);
        },
      ),
      { numRuns: 250 },
    );
  });

  it('goal writes store the storable form of what was sent', async () => {
    const goalBody = fc.oneof(
      fc.record({
        name: hostileText,
        goalType: fc.constant('event'),
        config: fc.record(
          {
            eventName: hostileText,
            eventPropertyKey: hostileText,
            eventPropertyValue: fc.oneof(hostileText, hostileNumber),
          },
          { requiredKeys: ['eventName'] },
        ),
      }),
      fc.record({
        name: hostileText,
        goalType: fc.constant('path'),
        config: fc.record({ pathPattern: hostileText.map((p) => `/${p}`) }),
      }),
      fc.jsonValue(),
    );
    await fc.assert(
      fc.asyncProperty(goalBody, fc.boolean(), async (body, replace) => {
        const path = replace ? `/api/sites/${t.siteId}/goals/${goalId}` : `/api/sites/${t.siteId}/goals`;
        const res = await send(path, { method: replace ? 'PUT' : 'POST', body });
        expectWellFormed(path, res);
        if (res.status >= 300) return;
        const saved = (res.body as { goalId: number }).goalId;
        // The replaced goal is the site's first, a created one its last.
        const order = replace ? 'asc' : 'desc';
        const list = await send(`/api/sites/${t.siteId}/goals?sort=goalId&order=${order}&page_size=1`);
        const stored = (list.body as { data: { goalId: number; name: string; config: unknown }[] }).data.find(
          (g) => g.goalId === saved,
        );
        // What went over the wire: the JSON text of the body (-0 is written as 0).
        const sent = JSON.parse(JSON.stringify(body)) as { name: string; config: Record<string, unknown> };
        expect(stored).toMatchObject({
          name: storable(sent.name).trim(),
          config: Object.fromEntries(
            Object.entries(sent.config).map(([k, v]) => [k, typeof v === 'string' ? storable(v) : v]),
          ),
        });
      }),
      { numRuns: 60 },
    );
  });

  it('site, configuration and key writes store the storable form of what was sent', async () => {
    const config = fc.record(
      {
        public: fc.oneof(fc.boolean(), hostileText),
        blockBots: fc.boolean(),
        excludedIPs: fc.array(
          fc.oneof(
            fc.ipV4(),
            fc.ipV6(),
            fc.ipV4().map((ip) => `${ip}/24`),
            fc.ipV6().map((ip) => `${ip}/64`),
            hostileText,
          ),
          { maxLength: 3 },
        ),
        excludedCountries: fc.array(fc.oneof(fc.constantFrom('de', 'US', 'fr'), hostileText), {
          maxLength: 3,
        }),
        monthlyPageviewLimit: fc.oneof(hostileNumber, fc.constant(null)),
      },
      { requiredKeys: [] },
    );
    const write = fc.oneof(
      fc.record({
        kind: fc.constant('site' as const),
        name: hostileText,
        domain: fc.oneof(fc.domain(), hostileText),
      }),
      fc.record({ kind: fc.constant('config' as const), body: fc.oneof(config, fc.jsonValue()) }),
      fc.record({
        kind: fc.constant('key' as const),
        name: hostileText,
        expiresInDays: fc.option(hostileNumber),
      }),
      fc.record({ kind: fc.constant('ids' as const), id: hostileText }),
    );
    await fc.assert(
      fc.asyncProperty(write, async (w) => {
        if (w.kind === 'site') {
          const path = `/api/organizations/${t.organizationId}/sites`;
          const res = await send(path, { method: 'POST', body: { name: w.name, domain: w.domain } });
          expectWellFormed(path, res);
          if (res.status !== 201) return;
          const id = (res.body as { siteId: number }).siteId;
          const read = await send(`/api/sites/${id}`);
          expect((read.body as { name: string }).name).toBe(storable(w.name).trim());
        } else if (w.kind === 'config') {
          const path = `/api/sites/${t.siteId}/config`;
          const res = await send(path, { method: 'PUT', body: w.body });
          expectWellFormed(path, res);
          if (res.status !== 200) return;
          const { config } = res.body as { config: { excludedIPs: string[]; excludedCountries: string[] } };
          const ips = await send(`/api/sites/${t.siteId}/excluded-ips`);
          expect((ips.body as { excludedIPs: string[] }).excludedIPs).toEqual(config.excludedIPs);
        } else if (w.kind === 'key') {
          const res = await send('/api/user/api-keys', {
            method: 'POST',
            body: { name: w.name, ...(w.expiresInDays === null ? {} : { expiresInDays: w.expiresInDays }) },
          });
          expectWellFormed('POST /api/user/api-keys', res);
          if (res.status !== 201) return;
          const { id } = res.body as { id: string };
          const list = await send('/api/user/api-keys');
          const stored = (list.body as { data: { id: string; name: string }[] }).data.find(
            (k) => k.id === id,
          );
          expect(stored?.name).toBe(storable(w.name).trim());
        } else {
          const id = encodeURIComponent(w.id.toWellFormed()) || 'x';
          for (const [method, path] of [
            ['GET', `/api/organizations/${id}/sites`],
            ['POST', `/api/organizations/${id}/sites`],
            ['DELETE', `/api/user/api-keys/${id}`],
            ['GET', `/api/sites/${id}`],
            ['DELETE', `/api/sites/${id}/goals/${id}`],
          ] as const) {
            const res = await send(path, {
              method,
              ...(method === 'POST' ? { body: { name: 'n', domain: 'a.io' } } : {}),
            });
            expectWellFormed(`${method} ${path}`, res);
          }
        }
      }),
      { numRuns: 100 },
    );
  });

  it('any body of any type to any write answers 2xx or a 4xx in the error shape', async () => {
    const writes = [
      ['POST', `/api/sites/:site/goals`],
      ['PUT', `/api/sites/:site/goals/:goal`],
      ['PUT', `/api/sites/:site/config`],
      ['POST', `/api/sites/:site/private-link-config`],
      ['POST', `/api/organizations/:org/sites`],
      ['POST', '/api/user/api-keys'],
    ] as const;
    const body = fc.oneof(
      fc.jsonValue().map((v) => JSON.stringify(v)),
      hostileText,
      fc.constantFrom(
        '{"name":',
        '{"name":"\\ud800","goalType":"path","config":{"pathPattern":"/\\u0000"}}',
        '[]',
      ),
    );
    const contentType = fc.constantFrom(
      'application/json',
      'application/json; charset=utf-16',
      'text/plain',
      'application/x+json',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...writes),
        body,
        contentType,
        async ([method, template], text, type) => {
          const path = template
            .replace(':site', String(t.siteId))
            .replace(':goal', String(goalId))
            .replace(':org', t.organizationId);
          const res = await answer(
            await h.app.request(path, {
              method,
              headers: { authorization: `Bearer ${t.key}`, 'content-type': type },
              body: text,
            }),
          );
          expectWellFormed(`${method} ${path}`, res);
        },
      ),
      { numRuns: 100 },
    );
  });
});
