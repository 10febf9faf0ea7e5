import {
  type CommonParams,
  type GoalDefinition,
  generateEvents,
  insertEvents,
  ROLLUP_MAX_GOAL_PAGES,
  type StoredEvent,
} from '@trackhouse/clickhouse';
import { uuidv7 } from '@trackhouse/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueryHarness, type QueryHarness } from './harness';
import { full, query } from './params';
import { compareEvents, countBy, goalSessions, goalStats, selectEvents } from './reference';

let h: QueryHarness;
let tenant: Awaited<ReturnType<QueryHarness['tenant']>>;
let events: StoredEvent[];

beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '100000' });
  tenant = await h.tenant();
  const other = await h.tenant();
  // 45 days around both DST changes of 2026 (US: March 8, EU: March 29), many same-ms ties.
  const end = new Date('2026-04-05T12:00:00Z');
  const generated = [
    ...generateEvents({ siteId: tenant.siteId, events: 6000, days: 45, end, seed: 7, tieRate: 0.25 }),
  ];
  const crafted = handMadeSessions(generated[0]!);
  events = [...generated, ...crafted];
  const noise = [...generateEvents({ siteId: other.siteId, events: 500, days: 45, end, seed: 8 })];
  await insertEvents(h.ch, [...generated, ...noise]);
  // These sessions arrive as live traffic does, one event of each per insert: their rows in
  // the session rollup lie in several parts, which reads must merge.
  const waves: StoredEvent[][] = [];
  const position = new Map<string, number>();
  for (const e of crafted) {
    const n = position.get(e.session_id) ?? 0;
    position.set(e.session_id, n + 1);
    waves[n] = [...(waves[n] ?? []), e];
  }
  for (const wave of waves) await insertEvents(h.ch, wave);
}, 120_000);
afterAll(async () => {
  await h.close();
});

/**
 * Hand-made sessions for the goal list's rollup: sessions crossing the scenarios' range
 * boundaries (UTC instants of local midnights below), with goal pages and events on either
 * side, which it must count from their events in range; and sessions whose pages make one
 * pattern match many distinct paths.
 */
function handMadeSessions(template: StoredEvent): StoredEvent[] {
  const at = (iso: string, minutes: number) => Date.parse(iso) + minutes * 60_000;
  const session = (steps: [number, StoredEvent['type'], string, string?][]): StoredEvent[] => {
    const sessionId = uuidv7(steps[0]![0]);
    return steps.map(([ms, type, pathname, eventName = '']): StoredEvent => {
      const iso = new Date(ms).toISOString();
      const properties: Record<string, string> =
        type === 'outbound'
          ? { url: 'https://github.com/trackhouse', text: 'link' }
          : type === 'custom_event'
            ? { plan: 'pro' }
            : {};
      return {
        ...template,
        timestamp: `${iso.slice(0, 10)} ${iso.slice(11, 23)}`,
        event_id: uuidv7(ms),
        session_id: sessionId,
        type,
        pathname,
        event_name: eventName,
        properties: JSON.stringify(properties),
        props: properties,
      };
    });
  };
  const boundaries = [
    '2026-03-01T05:00:00Z', // New York midnight, EST
    '2026-03-16T04:00:00Z', // New York midnight, EDT
    '2026-03-08T05:00:00Z',
    '2026-03-09T04:00:00Z',
    '2026-03-28T23:00:00Z', // Berlin midnight, CET
    '2026-03-29T22:00:00Z', // Berlin midnight, CEST
    '2026-03-19T18:30:00Z', // Kolkata midnight
    '2026-03-10T11:00:00Z', // Auckland midnight
  ];
  return [
    ...boundaries.flatMap((b) => [
      ...session([
        [at(b, -10), 'pageview', '/blog/launch'],
        [at(b, 5), 'pageview', '/'],
        [at(b, 6), 'custom_event', '/', 'purchase'],
      ]),
      ...session([
        [at(b, -20), 'pageview', '/docs/api/events'],
        [at(b, -1), 'custom_event', '/docs/api/events', 'purchase'],
        [at(b, 3), 'pageview', '/checkout/cart'],
      ]),
      ...session([
        [at(b, -3), 'pageview', '/checkout/pay'],
        [at(b, 2), 'outbound', '/checkout/pay'],
      ]),
      // The latest end and the earliest start among the crossing sessions, each its only
      // event in the range.
      ...session([
        [at(b, -30), 'pageview', '/checkout/cart'],
        [at(b, 30), 'pageview', '/blog'],
      ]),
    ]),
    // A goal pattern matching many distinct paths (looked up through a hashed set).
    ...Array.from({ length: 40 }, (_, i) =>
      session([
        [at('2026-03-05T09:00:00Z', i * 7), 'pageview', '/'],
        [at('2026-03-05T09:00:00Z', i * 7 + 1), 'pageview', `/blog/post-${i}`],
      ]),
    ).flat(),
    // Across a whole local day, with one event inside it, and with none.
    ...session([
      [at('2026-03-08T05:00:00Z', -10), 'pageview', '/blog'],
      [at('2026-03-08T17:00:00Z', 0), 'pageview', '/checkout/cart'],
      [at('2026-03-09T04:00:00Z', 10), 'pageview', '/'],
    ]),
    ...session([
      [at('2026-03-28T23:00:00Z', -10), 'pageview', '/blog/launch'],
      [at('2026-03-29T22:00:00Z', 10), 'pageview', '/checkout/pay'],
    ]),
  ];
}

const SCENARIOS: Partial<CommonParams>[] = [
  {},
  { startDate: '2026-03-01', endDate: '2026-03-15', timeZone: 'America/New_York' },
  { startDate: '2026-03-08', endDate: '2026-03-08', timeZone: 'America/New_York' },
  { startDate: '2026-03-29', endDate: '2026-03-29', timeZone: 'Europe/Berlin' },
  { startDate: '2026-03-20', timeZone: 'Asia/Kolkata' },
  { endDate: '2026-03-10', timeZone: 'Pacific/Auckland' },
  { filters: [{ parameter: 'country', type: 'equals', value: ['US', 'GB'] }] },
  {
    filters: [
      { parameter: 'browser', type: 'not_equals', value: ['Chrome'] },
      { parameter: 'device_type', type: 'equals', value: ['mobile'] },
    ],
  },
  { filters: [{ parameter: 'pathname', type: 'contains', value: ['BLOG', 'checkout'] }] },
  { filters: [{ parameter: 'pathname', type: 'not_contains', value: ['blog'] }] },
  { filters: [{ parameter: 'pathname', type: 'regex', value: ['^/docs/.+'] }] },
  { filters: [{ parameter: 'page_title', type: 'not_regex', value: ['Page /$', 'pricing'] }] },
  { filters: [{ parameter: 'user_id', type: 'equals', value: ['customer-30', '0000000000000007'] }] },
  { filters: [{ parameter: 'user_id', type: 'not_contains', value: ['customer'] }] },
  { filters: [{ parameter: 'entry_page', type: 'equals', value: ['/pricing'] }] },
  {
    filters: [{ parameter: 'exit_page', type: 'regex', value: ['^/checkout'] }],
    startDate: '2026-03-10',
    timeZone: 'Europe/Berlin',
  },
  {
    filters: [
      { parameter: 'channel', type: 'equals', value: ['Organic Search', 'AI'] },
      { parameter: 'language', type: 'not_equals', value: ['en-US'] },
    ],
  },
  {
    filters: [
      { parameter: 'utm_source', type: 'equals', value: ['google'] },
      { parameter: 'utm_medium', type: 'equals', value: ['cpc'] },
    ],
  },
  { filters: [{ parameter: 'event_name', type: 'equals', value: ['purchase', 'signup'] }] },
  {
    filters: [
      { parameter: 'city', type: 'contains', value: ['o'] },
      { parameter: 'region', type: 'not_equals', value: ['Tokyo'] },
    ],
  },
  {
    filters: [{ parameter: 'operating_system_version', type: 'equals', value: [10] as unknown as string[] }],
  },
];

const GOALS: (GoalDefinition & { name: string })[] = [
  { name: 'blog', goalType: 'path', config: { pathPattern: '/blog/**' } },
  { name: 'checkout step', goalType: 'path', config: { pathPattern: '/checkout/*' } },
  { name: 'home', goalType: 'path', config: { pathPattern: '/' } },
  { name: 'nested', goalType: 'path', config: { pathPattern: '/**/events' } },
  { name: 'purchase', goalType: 'event', config: { eventName: 'purchase' } },
  {
    name: 'pro purchase',
    goalType: 'event',
    config: { eventName: 'purchase', eventPropertyKey: 'plan', eventPropertyValue: 'pro' },
  },
  {
    name: 'value 2',
    goalType: 'event',
    config: { eventName: 'add_to_cart', eventPropertyKey: 'value', eventPropertyValue: 2 },
  },
  {
    name: 'value "2"',
    goalType: 'event',
    config: { eventName: 'add_to_cart', eventPropertyKey: 'value', eventPropertyValue: '2' },
  },
  {
    // Events carry `trial` as a boolean, which the map stores as the text "true".
    name: 'trial "true"',
    goalType: 'event',
    config: { eventName: 'purchase', eventPropertyKey: 'trial', eventPropertyValue: 'true' },
  },
];

describe('goals against a brute-force computation', () => {
  const goalIds: number[] = [];
  beforeAll(async () => {
    for (const g of GOALS) {
      const res = await h.json<{ success: boolean; goalId: number }>(`/api/sites/${tenant.siteId}/goals`, {
        key: tenant.key,
        method: 'POST',
        body: { name: g.name, goalType: g.goalType, config: g.config },
      });
      expect(res.status).toBe(201);
      goalIds.push(res.body.goalId);
    }
  });

  it.each(SCENARIOS.map((s, i) => [i, s] as const))(
    'scenario %i: exact sessions, conversions and rate',
    async (_, scenario) => {
      const res = await h.json<{
        data: {
          goalId: number;
          total_sessions: number;
          total_conversions: number;
          conversion_rate: number;
        }[];
      }>(
        `/api/sites/${tenant.siteId}/goals?${query(scenario, { page_size: '100', sort: 'goalId', order: 'asc' })}`,
        { key: tenant.key },
      );
      expect(res.status).toBe(200);
      const selected = selectEvents(
        events,
        tenant.siteId,
        full({
          ...scenario,
          filters: (scenario.filters ?? []).map((f) => ({ ...f, value: f.value.map(String) })),
        }),
      );
      expect(res.body.data.map((g) => g.goalId)).toEqual(goalIds);
      res.body.data.forEach((g, i) => {
        const expected = goalStats(selected, GOALS[i]!);
        expect({
          name: GOALS[i]!.name,
          ...g,
          conversion_rate: Number(g.conversion_rate.toFixed(12)),
        }).toMatchObject({
          name: GOALS[i]!.name,
          ...expected,
          conversion_rate: Number(expected.conversion_rate.toFixed(12)),
        });
      });
    },
  );

  // Every scenario × goal, two pages each: about 15 s alone, twice that on a loaded machine.
  it('lists converted sessions with every field, newest end first, paged', async () => {
    for (const scenario of [
      { startDate: '2026-03-01', timeZone: 'Europe/Berlin' },
      // Ends in the data: pages are found in windows before the range end, widened as needed.
      { startDate: '2026-02-20', endDate: '2026-04-04', timeZone: 'America/New_York' },
      {
        filters: [
          { parameter: 'user_id', type: 'not_contains', value: ['customer'] },
          { parameter: 'country', type: 'equals', value: ['US', 'DE'] },
        ],
      },
    ] as Partial<CommonParams>[])
      for (const [i, goal] of GOALS.entries()) {
        const selected = selectEvents(events, tenant.siteId, full(scenario));
        const expected = goalSessions(selected, goal);
        const first = await h.json<{ data: unknown[] }>(
          `/api/sites/${tenant.siteId}/goals/${goalIds[i]}/sessions?${query(scenario, { limit: '40' })}`,
          { key: tenant.key },
        );
        expect(first.status).toBe(200);
        expect(first.body.data).toEqual(expected.slice(0, 40));
        const second = await h.json<{ data: unknown[] }>(
          `/api/sites/${tenant.siteId}/goals/${goalIds[i]}/sessions?${query(scenario, { limit: '40', page: '2' })}`,
          { key: tenant.key },
        );
        expect(second.body.data).toEqual(expected.slice(40, 80));
      }
  }, 90_000);

  it('sorts and pages the goal list with exact meta', async () => {
    const res = await h.json<{ data: { name: string }[]; meta: Record<string, number> }>(
      `/api/sites/${tenant.siteId}/goals?sort=name&order=asc&page=2&page_size=3`,
      { key: tenant.key },
    );
    const names = GOALS.map((g) => g.name).sort((a, b) => a.localeCompare(b));
    expect(res.body.data.map((g) => g.name)).toEqual(names.slice(3, 6));
    expect(res.body.meta).toEqual({ total: GOALS.length, page: 2, pageSize: 3, totalPages: 3 });
    const byDefault = await h.json<{ data: { name: string }[] }>(`/api/sites/${tenant.siteId}/goals`, {
      key: tenant.key,
    });
    expect(byDefault.body.data.map((g) => g.name)).toEqual([...GOALS].reverse().map((g) => g.name)); // createdAt desc
  });

  it('counts a path goal matching more paths than the rollup looks up (10,001) exactly', async () => {
    const site = await h.tenant();
    const template = events[0]!;
    const sessionIds = Array.from({ length: 1001 }, (_, n) =>
      uuidv7(Date.parse('2026-03-05T12:00:00Z') + n * 10_000),
    );
    const many = Array.from({ length: ROLLUP_MAX_GOAL_PAGES + 1 }, (_, i): StoredEvent => {
      const ms = Date.parse('2026-03-05T12:00:00Z') + i * 1000;
      const iso = new Date(ms).toISOString();
      return {
        ...template,
        site_id: site.siteId,
        type: 'pageview',
        event_name: '',
        properties: '{}',
        props: {},
        timestamp: `${iso.slice(0, 10)} ${iso.slice(11, 23)}`,
        event_id: uuidv7(ms),
        // Ten events per session; a third of the sessions reach /shop/….
        session_id: sessionIds[Math.floor(i / 10)]!,
        pathname: Math.floor(i / 10) % 3 === 0 ? `/shop/item-${i}` : `/read/item-${i}`,
      };
    });
    await insertEvents(h.ch, many);
    const goal: GoalDefinition = { goalType: 'path', config: { pathPattern: '/**' } };
    const shop: GoalDefinition = { goalType: 'path', config: { pathPattern: '/shop/*' } };
    for (const [name, g] of [
      ['every page', goal],
      ['shop', shop],
    ] as const) {
      const created = await h.json(`/api/sites/${site.siteId}/goals`, {
        key: site.key,
        method: 'POST',
        body: { name, goalType: g.goalType, config: g.config },
      });
      expect(created.status).toBe(201);
    }
    const res = await h.json<{ data: { name: string; total_sessions: number; total_conversions: number }[] }>(
      `/api/sites/${site.siteId}/goals?sort=name&order=asc&start_date=2026-03-05&end_date=2026-03-05`,
      { key: site.key },
    );
    const selected = selectEvents(
      many,
      site.siteId,
      full({ startDate: '2026-03-05', endDate: '2026-03-05' }),
    );
    expect(res.body.data).toMatchObject([
      { name: 'every page', ...goalStats(selected, goal) },
      { name: 'shop', ...goalStats(selected, shop) },
    ]);
    expect(res.body.data[0]).toMatchObject({ total_sessions: 1001, total_conversions: 1001 });
    expect(res.body.data[1]).toMatchObject({ total_conversions: 334 });
  });
});

describe('events against a brute-force computation', () => {
  it.each([[{}], [SCENARIOS[1]!], [SCENARIOS[7]!], [SCENARIOS[14]!]])(
    'cursor paging returns every event once, newest first (%j)',
    async (scenario) => {
      // The events list leaves error events out.
      const expected = selectEvents(events, tenant.siteId, full(scenario))
        .filter((e) => e.type !== 'error')
        .sort(compareEvents)
        .reverse();
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let pages = 0; pages < 1000; pages++) {
        const extra: Record<string, string> = { page_size: '97' };
        if (cursor) extra.cursor = cursor;
        const res = await h.json<{
          data: { event_id: string; timestamp: string }[];
          cursor: { hasMore: boolean; next: string | null; oldestTimestamp: string | null };
        }>(`/api/sites/${tenant.siteId}/events?${query(scenario, extra)}`, { key: tenant.key });
        expect(res.status).toBe(200);
        seen.push(...res.body.data.map((e) => e.event_id));
        expect(res.body.cursor.oldestTimestamp).toBe(res.body.data.at(-1)?.timestamp ?? null);
        if (!res.body.cursor.hasMore) {
          expect(res.body.cursor.next).toBeNull();
          break;
        }
        cursor = res.body.cursor.next;
      }
      expect(seen).toEqual(expected.map((e) => e.event_id));
    },
    60_000,
  );

  it('returns every Event field, and accepts before_timestamp', async () => {
    const res = await h.json<{ data: Record<string, unknown>[] }>(
      `/api/sites/${tenant.siteId}/events?page_size=5`,
      { key: tenant.key },
    );
    const newest = events
      .filter((e) => e.type !== 'error')
      .sort(compareEvents)
      .reverse()
      .slice(0, 5);
    const e = newest[0]!;
    expect(res.body.data[0]).toEqual({
      timestamp: `${e.timestamp.replace(' ', 'T')}Z`,
      type: e.type,
      event_name: e.event_name,
      properties: e.properties,
      session_id: e.session_id,
      user_id: e.user_id,
      identified_user_id: e.identified_user_id,
      pathname: e.pathname,
      querystring: e.querystring,
      hostname: e.hostname,
      page_title: e.page_title,
      referrer: e.referrer,
      browser: e.browser,
      browser_version: e.browser_version,
      operating_system: e.operating_system,
      operating_system_version: e.operating_system_version,
      language: e.language,
      country: e.country,
      region: e.region,
      city: e.city,
      lat: expect.closeTo(e.lat, 3),
      lon: expect.closeTo(e.lon, 3),
      screen_width: e.screen_width,
      screen_height: e.screen_height,
      device_type: e.device_type,
      channel: e.channel,
      event_id: e.event_id,
    });
    const cut = String(res.body.data[2]!.timestamp);
    const older = await h.json<{ data: { timestamp: string }[] }>(
      `/api/sites/${tenant.siteId}/events?page_size=10&before_timestamp=${encodeURIComponent(cut)}`,
      { key: tenant.key },
    );
    expect(older.body.data.length).toBe(10);
    for (const row of older.body.data) expect(row.timestamp < cut).toBe(true);
  });

  it.each([[{}], [SCENARIOS[3]!], [SCENARIOS[6]!]])(
    'names, properties and outbound links count exactly (%j)',
    async (scenario) => {
      const selected = selectEvents(events, tenant.siteId, full(scenario));
      const names = await h.json<{ data: { eventName: string; count: number }[] }>(
        `/api/sites/${tenant.siteId}/events/names?${query(scenario)}`,
        { key: tenant.key },
      );
      const expectedNames = countBy(
        selected.filter((e) => e.type === 'custom_event'),
        (e) => e.event_name,
      );
      expect(new Map(names.body.data.map((n) => [n.eventName, n.count]))).toEqual(expectedNames);
      const counts = names.body.data.map((n) => n.count);
      expect(counts).toEqual([...counts].sort((a, b) => b - a));

      const props = await h.json<{ data: { propertyKey: string; propertyValue: string; count: number }[] }>(
        `/api/sites/${tenant.siteId}/events/properties?${query(scenario, { event_name: 'purchase' })}`,
        { key: tenant.key },
      );
      const expectedProps = countBy(
        selected
          .filter((e) => e.type === 'custom_event' && e.event_name === 'purchase')
          .flatMap((e) => Object.entries(JSON.parse(e.properties) as Record<string, unknown>)),
        ([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`,
      );
      expect(new Map(props.body.data.map((p) => [`${p.propertyKey}=${p.propertyValue}`, p.count]))).toEqual(
        expectedProps,
      );

      const outbound = await h.json<{ data: { url: string; count: number; lastClicked: string }[] }>(
        `/api/sites/${tenant.siteId}/events/outbound?${query(scenario)}`,
        { key: tenant.key },
      );
      const clicks = selected.filter((e) => e.type === 'outbound');
      expect(new Map(outbound.body.data.map((o) => [o.url, o.count]))).toEqual(
        countBy(clicks, (e) => e.props.url!),
      );
      for (const o of outbound.body.data) {
        const last = clicks
          .filter((e) => e.props.url === o.url)
          .map((e) => e.timestamp)
          .sort()
          .at(-1)!;
        expect(o.lastClicked).toBe(`${last.replace(' ', 'T')}Z`);
      }
    },
  );
});

describe('malformed parameters', () => {
  const bad: [string, string][] = [
    ['events', 'start_date=2026-13-01'],
    ['events', 'start_date=2026-02-30'],
    ['events', 'start_date=2026-03-10&end_date=2026-03-01'],
    ['events', 'time_zone=Mars/Olympus'],
    ['events', 'filters=nope'],
    [
      'events',
      `filters=${encodeURIComponent(JSON.stringify(Array(21).fill({ parameter: 'country', type: 'equals', value: ['US'] })))}`,
    ],
    [
      'events',
      `filters=${encodeURIComponent(JSON.stringify([{ parameter: 'screen_width', type: 'equals', value: ['1'] }]))}`,
    ],
    [
      'events',
      `filters=${encodeURIComponent(JSON.stringify([{ parameter: 'country', type: 'like', value: ['US'] }]))}`,
    ],
    [
      'events',
      `filters=${encodeURIComponent(JSON.stringify([{ parameter: 'country', type: 'equals', value: [] }]))}`,
    ],
    [
      'events',
      `filters=${encodeURIComponent(JSON.stringify([{ parameter: 'pathname', type: 'regex', value: ['(unclosed'] }]))}`,
    ],
    ['events', 'page_size=0'],
    ['events', 'page_size=1001'],
    ['events', 'cursor=garbage'],
    ['events', 'before_timestamp=yesterday'],
    ['events/properties', ''],
    ['goals', 'page=0'],
    ['goals', 'sort=random'],
    ['goals', 'order=up'],
  ];
  it.each(bad)('%s?%s → 400 with details', async (path, qs) => {
    const res = await h.json<{
      success: boolean;
      code: string;
      details: { fieldErrors: object; formErrors: unknown[] };
    }>(`/api/sites/${tenant.siteId}/${path}?${qs}`, { key: tenant.key });
    expect(res.status).toBe(400);
    expect(res.body.success).toBe(false);
    expect(res.body.code).toBe('INVALID_PARAMS');
    expect(res.body.details).toHaveProperty('fieldErrors');
  });

  it('ignores unknown parameters', async () => {
    const res = await h.request(`/api/sites/${tenant.siteId}/events/names?whatever=1&utm=2`, {
      key: tenant.key,
    });
    expect(res.status).toBe(200);
  });
});
