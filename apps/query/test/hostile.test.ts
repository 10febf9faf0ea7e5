import { generateEvents, insertEvents, type StoredEvent } from '@trackhouse/clickhouse';
import { REPLACEMENT, uuidv7 } from '@trackhouse/core';
import { listApiKeys } from '@trackhouse/postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueryHarness, type QueryHarness } from './harness';

let h: QueryHarness;
let t: Awaited<ReturnType<QueryHarness['tenant']>>;
let goalId: number;
beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '100000' });
  t = await h.tenant();
  const events = [...generateEvents({ siteId: t.siteId, events: 600, days: 3 })];
  // Text the ingest service stores for a pathname sent with NUL and a lone surrogate.
  const [template] = events;
  const odd: StoredEvent = {
    ...template!,
    event_id: uuidv7(),
    pathname: `/odd${REPLACEMENT}path${REPLACEMENT}`,
  };
  await insertEvents(h.ch, [...events, odd]);
  const goal = await h.json<{ goalId: number }>(`/api/sites/${t.siteId}/goals`, {
    key: t.key,
    method: 'POST',
    body: { name: 'all', goalType: 'path', config: { pathPattern: '/**' } },
  });
  goalId = goal.body.goalId;
}, 120_000);
afterAll(async () => {
  await h.close();
});

const READS = [
  '/events',
  '/events/names',
  '/events/outbound',
  '/events/properties?event_name=signup',
  '/goals',
  '/goals/:goal/sessions',
];
const read = (path: string, query: string) => {
  const full = `/api/sites/${t.siteId}${path.replace(':goal', String(goalId))}`;
  return h.json(`${full}${full.includes('?') ? '&' : '?'}${query}`, { key: t.key });
};
const filters = (list: unknown) => `filters=${encodeURIComponent(JSON.stringify(list))}`;

describe('dates', () => {
  it('accepts 1970-01-01 through 2299-12-31 on every read endpoint', async () => {
    for (const path of READS) {
      const res = await read(path, 'start_date=1970-01-01&end_date=2299-12-31&time_zone=Pacific/Kiritimati');
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
    }
  });

  it('answers 400 naming the field for dates outside that span', async () => {
    const cases = [
      ['end_date=9999-12-31', 'end_date'],
      ['end_date=2300-01-01', 'end_date'],
      ['start_date=0000-01-01', 'start_date'],
      ['start_date=0001-01-01', 'start_date'],
      ['start_date=1969-12-31', 'start_date'],
    ] as const;
    for (const path of READS) {
      for (const [query, field] of cases) {
        const res = await read(path, query);
        expect({ path, query, status: res.status, body: res.body }).toMatchObject({
          status: 400,
          body: {
            success: false,
            code: 'INVALID_PARAMS',
            details: {
              fieldErrors: { [field]: [expect.stringContaining('between 1970-01-01 and 2299-12-31')] },
            },
          },
        });
      }
    }
  });

  it('answers 400 for before_timestamp and cursors outside the span', async () => {
    const far = await read('/events', 'before_timestamp=9999-12-31T00:00:00Z');
    expect(far.status).toBe(400);
    expect(far.body).toMatchObject({ details: { fieldErrors: { before_timestamp: [expect.any(String)] } } });
    const cursor = Buffer.from(JSON.stringify(['+275760-09-13T00:00:00.000Z', uuidv7()])).toString(
      'base64url',
    );
    const res = await read('/events', `cursor=${cursor}`);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ details: { fieldErrors: { cursor: [expect.any(String)] } } });
  });
});

describe('time zones', () => {
  it('accepts names in any case and answers as for the canonical name', async () => {
    for (const [given, canonical] of [
      ['america/new_york', 'America/New_York'],
      ['utc', 'UTC'],
      ['EUROPE/BERLIN', 'Europe/Berlin'],
    ]) {
      for (const path of ['/events', '/goals']) {
        const dates = 'start_date=2020-01-01&end_date=2100-01-01';
        const a = await read(path, `${dates}&time_zone=${encodeURIComponent(given!)}`);
        const b = await read(path, `${dates}&time_zone=${canonical}`);
        expect(a.status).toBe(200);
        expect(a.body).toEqual(b.body);
      }
    }
  });

  it('answers 400 for names that are no time zone', async () => {
    for (const tz of ['Mars/Olympus', 'america', '', '../../etc/passwd', 'UTC\u0000']) {
      const res = await read('/events', `start_date=2020-01-01&time_zone=${encodeURIComponent(tz)}`);
      expect({ tz, status: res.status }).toEqual({ tz, status: 400 });
      expect(res.body).toMatchObject({ details: { fieldErrors: { time_zone: [expect.any(String)] } } });
    }
  });

  it('answers zones the runtime knows that the engine does not list, or 400, never 500', async () => {
    const rows = await h.ch.query<{ time_zone: string }>('SELECT time_zone FROM system.time_zones');
    const known = new Set(rows.map((r) => r.time_zone));
    const zones = Intl.supportedValuesOf('timeZone').map(
      (z) => new Intl.DateTimeFormat('en-US', { timeZone: z }).resolvedOptions().timeZone,
    );
    // The runtime's tz data may be newer than the engine's list (America/Coyhaique, 2025).
    const unlisted = zones.filter((z) => !known.has(z));
    expect(unlisted.length).toBeLessThan(zones.length / 10);
    for (const tz of unlisted) {
      const res = await read('/events', `start_date=2024-01-01&time_zone=${encodeURIComponent(tz)}`);
      expect({ tz, status: res.status }).toEqual({ tz, status: res.status === 200 ? 200 : 400 });
      if (res.status === 400)
        expect(res.body).toMatchObject({ details: { fieldErrors: { time_zone: [expect.any(String)] } } });
    }
  });
});

describe('regular expressions', () => {
  it('answers 400 naming the value for patterns valid in JavaScript but not in RE2', async () => {
    const validInJs = ['(?=a)', '(?!a)', '(?<=a)', '(?<!a)', '(a)\\1', 'a{1001}', '\\Z', '\\u0041', '\\k<n>'];
    for (const pattern of validInJs) expect(() => new RegExp(pattern)).not.toThrow();
    // Possessive repetition is refused by both.
    for (const pattern of [...validInJs, 'a++', 'a*+']) {
      const res = await read(
        '/events',
        filters([{ parameter: 'pathname', type: 'regex', value: ['/', pattern] }]),
      );
      expect({ pattern, status: res.status }).toEqual({ pattern, status: 400 });
      expect(res.body).toMatchObject({
        code: 'INVALID_PARAMS',
        details: { fieldErrors: { filters: [expect.stringContaining(pattern)] } },
      });
    }
  });

  it('runs what it accepts in ClickHouse, with RE2 semantics', async () => {
    const accepted: [pattern: string, matchesBlog: boolean][] = [
      ['^/blog', true],
      ['(?i)^/BLOG', true],
      ['^/b[[:alpha:]]+', true],
      ['^/(?P<first>blog)', true],
      ['^/(?<first>blog)', true],
      ['\\x2fblog', true],
      ['\\pL+', true],
      ['\\Q/blog\\E', true],
      ['blog\\z', true],
      ['a{1000}', false],
      ['(?s)^/.', true],
      ['', true],
    ];
    for (const [pattern, matchesBlog] of accepted) {
      for (const path of READS) {
        const res = await read(
          path,
          `start_date=2020-01-01&${filters([{ parameter: 'pathname', type: 'regex', value: [pattern] }])}`,
        );
        expect({ pattern, path, status: res.status }).toEqual({ pattern, path, status: 200 });
      }
      const blog = await read(
        '/events',
        `page_size=1000&${filters([
          { parameter: 'pathname', type: 'equals', value: ['/blog'] },
          { parameter: 'pathname', type: 'regex', value: [pattern] },
        ])}`,
      );
      expect({ pattern, found: (blog.body.data as unknown[]).length > 0 }).toEqual({
        pattern,
        found: matchesBlog,
      });
    }
  });

  it('answers 400 for patterns past the limits only the engine checks, and for too many', async () => {
    // Each count is valid; nested, they make a program too large for the engine to compile.
    const nested = await read(
      '/events',
      filters([{ parameter: 'pathname', type: 'regex', value: ['((a|b|c|d){1000}){1000}'] }]),
    );
    expect(nested.status).toBe(400);
    expect(nested.body).toMatchObject({
      success: false,
      code: 'INVALID_PARAMS',
      details: { formErrors: [expect.any(String)] },
    });
    const many = await read(
      '/events',
      filters([
        {
          parameter: 'pathname',
          type: 'not_regex',
          value: Array.from({ length: 9 }, (_, i) => `${i}`.padEnd(250, 'x')),
        },
      ]),
    );
    expect(many.status).toBe(400);
    expect(many.body).toMatchObject({
      details: { fieldErrors: { filters: [expect.stringContaining('2048 characters')] } },
    });
  });
});

describe('numbers', () => {
  it('lists and counts event goals whose property value is a number past 2^53', async () => {
    for (const value of [-(2 ** 53), 2 ** 64, 1e300, 5e-324]) {
      const goal = await h.json<{ goalId: number }>(`/api/sites/${t.siteId}/goals`, {
        key: t.key,
        method: 'POST',
        body: {
          name: 'big',
          goalType: 'event',
          config: { eventName: 'signup', eventPropertyKey: 'n', eventPropertyValue: value },
        },
      });
      expect(goal.status).toBe(201);
      const list = await h.json<{ data: { goalId: number; config: unknown }[] }>(
        `/api/sites/${t.siteId}/goals?sort=goalId&order=desc&page_size=1`,
        { key: t.key },
      );
      expect(list.status).toBe(200);
      expect(list.body.data[0]).toMatchObject({
        goalId: goal.body.goalId,
        config: { eventPropertyValue: value },
      });
      const sessions = await h.json(`/api/sites/${t.siteId}/goals/${goal.body.goalId}/sessions`, {
        key: t.key,
      });
      expect(sessions.status).toBe(200);
    }
  });
});

describe('goal order', () => {
  it('sorts by goalId as numbers', async () => {
    for (let i = 0; i < 11; i++) {
      await h.json(`/api/sites/${t.siteId}/goals`, {
        key: t.key,
        method: 'POST',
        body: { name: `n${i}`, goalType: 'path', config: { pathPattern: `/${i}` } },
      });
    }
    const list = await h.json<{ data: { goalId: number }[] }>(
      `/api/sites/${t.siteId}/goals?sort=goalId&order=desc&page_size=100`,
      { key: t.key },
    );
    const ids = list.body.data.map((g) => g.goalId);
    expect(ids.length).toBeGreaterThan(10);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
  });
});

describe('text that cannot be stored', () => {
  it('stores goal, site and key names with NUL and lone surrogates as U+FFFD', async () => {
    const goal = await h.json<{ goalId: number }>(`/api/sites/${t.siteId}/goals`, {
      key: t.key,
      method: 'POST',
      body: {
        name: 'a\u0000b\ud800',
        goalType: 'event',
        config: { eventName: 'e\u0000', eventPropertyKey: 'k\udfff', eventPropertyValue: 'v\u0000' },
      },
    });
    expect(goal.status).toBe(201);
    const list = await h.json<{ data: { goalId: number; name: string; config: unknown }[] }>(
      `/api/sites/${t.siteId}/goals?page_size=100`,
      { key: t.key },
    );
    expect(list.body.data.find((g) => g.goalId === goal.body.goalId)).toMatchObject({
      name: `a${REPLACEMENT}b${REPLACEMENT}`,
      config: {
        eventName: `e${REPLACEMENT}`,
        eventPropertyKey: `k${REPLACEMENT}`,
        eventPropertyValue: `v${REPLACEMENT}`,
      },
    });

    const site = await h.json<{ siteId: number; name: string }>(
      `/api/organizations/${t.organizationId}/sites`,
      {
        key: t.key,
        method: 'POST',
        body: { name: 'shop\u0000\ud83d', domain: 'shop.example.com' },
      },
    );
    expect(site.status).toBe(201);
    expect(site.body.name).toBe(`shop${REPLACEMENT}${REPLACEMENT}`);

    const key = await h.json('/api/user/api-keys', {
      key: t.key,
      method: 'POST',
      body: { name: '\u0000ci\udc00' },
    });
    expect(key.status).toBe(201);
    expect((await listApiKeys(h.db.sql, t.userId)).map((k) => k.name)).toContain(
      `${REPLACEMENT}ci${REPLACEMENT}`,
    );
  });

  it('answers 404 for ids in paths that hold NUL or lone surrogates', async () => {
    for (const id of ['%00', 'a%00b', '%ED%A0%80']) {
      const sites = await h.json(`/api/organizations/${id}/sites`, { key: t.key });
      expect({ id, status: sites.status, code: sites.body.code }).toEqual({
        id,
        status: 404,
        code: 'ORGANIZATION_NOT_FOUND',
      });
      const created = await h.json(`/api/organizations/${id}/sites`, {
        key: t.key,
        method: 'POST',
        body: { name: 'x', domain: 'x.example.com' },
      });
      expect(created.status).toBe(404);
      const revoked = await h.json(`/api/user/api-keys/${id}`, { key: t.key, method: 'DELETE' });
      expect({ id, status: revoked.status, code: revoked.body.code }).toEqual({
        id,
        status: 404,
        code: 'API_KEY_NOT_FOUND',
      });
    }
  });

  it('filters with NUL or lone surrogates match the text as stored', async () => {
    for (const value of ['/odd\u0000path\ud800', `/odd${REPLACEMENT}path${REPLACEMENT}`]) {
      const res = await read('/events', filters([{ parameter: 'pathname', type: 'equals', value: [value] }]));
      expect(res.status).toBe(200);
      expect((res.body.data as { pathname: string }[]).map((e) => e.pathname)).toEqual([
        `/odd${REPLACEMENT}path${REPLACEMENT}`,
      ]);
    }
    const props = await read('/events/properties', 'event_name=sign%00up');
    expect(props.status).toBe(200);
  });
});
