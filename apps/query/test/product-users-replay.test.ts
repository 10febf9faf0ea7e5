import { randomUUID } from 'node:crypto';
import {
  type CommonParams,
  generateEvents,
  insertEvents,
  rng,
  type StoredEvent,
} from '@trackhouse/clickhouse';
import { toClickHouseDateTime } from '@trackhouse/core';
import { updateSiteConfig } from '@trackhouse/postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectBackfillAsView } from './backfill';
import { createQueryHarness, type QueryHarness } from './harness';
import { f, full, query } from './params';
import * as ref from './product-reference-users';

let h: QueryHarness;
let tenant: Awaited<ReturnType<QueryHarness['tenant']>>;
let other: Awaited<ReturnType<QueryHarness['tenant']>>;
let events: StoredEvent[];
let identifies: ref.IdentifyRow[];
let replays: ref.ReplayRow[];
let profiles: ref.Profiles;
/** Visitors whose events never carry an identified id. */
let anonymous: string[];
/** The session whose replay has many batches (paging over events). */
let longSession: string;
let otherSiteSession: string;
/** The app reading the events alone (QUERY_ROLLUPS=false). */
let eventsOnly: QueryHarness['json'];

const at = (ms: number) => toClickHouseDateTime(new Date(ms));
const T0 = Date.parse('2026-03-01T00:00:00Z');

function identify(
  siteId: number,
  ms: number,
  userId: string,
  identified: string,
  traits: Record<string, unknown>,
  isNew = true,
): ref.IdentifyRow {
  return {
    site_id: siteId,
    timestamp: at(ms),
    event_id: randomUUID(),
    user_id: userId,
    identified_user_id: identified,
    traits: Object.fromEntries(Object.entries(traits).map(([k, v]) => [k, JSON.stringify(v)])),
    is_new_identify: isNew,
  };
}

/** Identify calls: merges over several calls, removals, re-aliasing, a profile without events, ties. */
function makeIdentifies(site: number, otherSite: number): ref.IdentifyRow[] {
  const r = rng(31);
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)]!;
  const [a0, a1, a2, a3] = anonymous;
  const rows = [
    identify(site, T0, a0!, 'alice', { plan: 'pro', email: 'Alice@Example.com', age: 30 }),
    identify(site, T0 + 60_000, a0!, 'alice', { plan: 'team', age: null, tags: ['a', 'b'] }, false),
    identify(site, T0, a1!, 'bob', { plan: 'free' }),
    identify(site, T0 + 120_000, a1!, 'bobby', { plan: 'pro', level: 3 }),
    identify(site, T0 + 180_000, a3!, 'bobby', {}),
    identify(site, T0, a2!, 'carol', { plan: 'free', nested: { x: 1 } }),
    identify(site, T0, 'ffffffffffffffff', 'dave', { plan: 'pro', level: '3' }),
    // Same millisecond: the greater JSON text wins ("red" over "blue").
    identify(site, T0 + 5000, a2!, 'carol', { color: 'blue' }, false),
    identify(site, T0 + 5000, a2!, 'carol', { color: 'red' }, false),
    // Another site's profiles and aliases never show here.
    identify(otherSite, T0 + 999_000, a0!, 'mallory', { plan: 'hacker', email: 'm@evil.test' }),
    identify(otherSite, T0 + 999_000, 'x', 'alice', { plan: 'hacker' }),
  ];
  // Visitors identified in their events, some calls later changing or removing traits.
  const members = [
    ...new Map(events.filter((e) => e.identified_user_id).map((e) => [e.identified_user_id, e])),
  ];
  for (const [i, [id, e]] of members.slice(0, 40).entries()) {
    const when = T0 + i * 7_000;
    rows.push(
      identify(site, when, e.user_id, id, {
        plan: pick(['free', 'pro', 'team', 'enterprise']),
        company: pick(['Acme', 'Globex', 'Initech']),
        score: Math.floor(r() * 5),
      }),
    );
    if (r() < 0.5)
      rows.push(identify(site, when + 1000, e.user_id, id, { company: pick([null, 'Umbrella']) }, false));
  }
  // Anonymous visitors known only through an alias.
  for (const [i, u] of anonymous.slice(4, 24).entries()) {
    rows.push(
      identify(site, T0 + i * 3_000, u, `guest-${i}`, { plan: pick(['free', 'pro']), company: 'Acme' }),
    );
  }
  return rows;
}

/** Replay batches of sessions of the data: ties on start time, a batch retried late, a long one. */
function makeReplays(site: number, otherSite: number): ref.ReplayRow[] {
  const r = rng(47);
  const bySession = new Map<string, StoredEvent[]>();
  for (const e of events) bySession.set(e.session_id, [...(bySession.get(e.session_id) ?? []), e]);
  // Spread over the whole period.
  const step = Math.floor(bySession.size / 45);
  const sessions = [...bySession].filter((_, i) => i % step === 0).slice(0, 45);
  const rows: ref.ReplayRow[] = [];
  let seq = 0;
  const batch = (
    siteId: number,
    sessionId: string,
    e: StoredEvent,
    start: number,
    received: number,
    n: number,
    identified: string,
  ): ref.ReplayRow => {
    const list = Array.from({ length: n }, (_, k) => ({
      type: k === 0 ? 4 : 3,
      timestamp: start + k * 100,
      data: { seq: seq++ },
    }));
    const text = JSON.stringify(list);
    return {
      site_id: siteId,
      session_id: sessionId,
      timestamp: at(received),
      batch_id: randomUUID(),
      user_id: e.user_id,
      identified_user_id: identified,
      start_time: at(start),
      end_time: at(start + (n - 1) * 100),
      event_count: n,
      size: Buffer.byteLength(text),
      events: text,
      page_url: `https://${e.hostname}${e.pathname}`,
      viewport_width: 800 + Math.floor(r() * 800),
      viewport_height: 600 + Math.floor(r() * 400),
      language: e.language,
      // The data are months old: a 30-day retention would have dropped them at insert.
      retention_days: 3650,
    };
  };
  for (const [i, [sessionId, list]] of sessions.entries()) {
    const first = list.reduce((a, b) => (a.timestamp < b.timestamp ? a : b));
    const t = Date.parse(`${first.timestamp.replace(' ', 'T')}Z`);
    const batches = i === 0 ? 12 : i < 3 ? 4 : 1 + Math.floor(r() * 4);
    for (let b = 0; b < batches; b++) {
      const start = t + b * 5000;
      // Session 1: its second batch arrives after the third (a retry); session 2: two batches
      // share a start time, and two of them also the arrival time (order by batch id).
      const received = i === 1 && b === 1 ? start + 20_000 : i === 2 && b > 0 ? t + 10_000 : start + 300;
      const begins = i === 2 && b > 0 ? t + 5000 : start;
      const identified = b > 0 && r() < 0.5 ? first.identified_user_id : '';
      rows.push(
        batch(site, sessionId, first, begins, received, i === 0 ? 30 : 1 + Math.floor(r() * 20), identified),
      );
    }
  }
  // A replay whose session has no stored event: no attributes.
  rows.push(batch(site, randomUUID(), sessions[5]![1][0]!, T0 + 3_600_000, T0 + 3_601_000, 3, ''));
  longSession = sessions[0]![0];
  otherSiteSession = randomUUID();
  rows.push(batch(otherSite, otherSiteSession, events[0]!, T0, T0 + 1000, 5, ''));
  return rows;
}

beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '1000000' });
  tenant = await h.tenant();
  other = await h.tenant();
  eventsOnly = h.jsonOn({ ...h.ch, rollups: false });
  // Around the US spring change (March 8).
  events = [
    ...generateEvents({
      siteId: tenant.siteId,
      events: 3000,
      days: 30,
      end: new Date('2026-03-20T12:00:00Z'),
      seed: 21,
      tieRate: 0.1,
    }),
  ];
  const noise = [
    ...generateEvents({
      siteId: other.siteId,
      events: 300,
      days: 30,
      end: new Date('2026-03-20T12:00:00Z'),
      seed: 22,
    }),
  ];
  const identifiedSomewhere = new Set(events.filter((e) => e.identified_user_id).map((e) => e.user_id));
  anonymous = [...new Set(events.map((e) => e.user_id))].filter((u) => !identifiedSomewhere.has(u)).sort();
  identifies = makeIdentifies(tenant.siteId, other.siteId);
  replays = makeReplays(tenant.siteId, other.siteId);
  await insertEvents(h.ch, [...events, ...noise]);
  await h.ch.writer.insert({ table: 'identifies', values: identifies, format: 'JSONEachRow' });
  await h.ch.writer.insert({ table: 'session_replay', values: replays, format: 'JSONEachRow' });
  profiles = ref.profilesOf(identifies, tenant.siteId);
}, 120_000);
afterAll(async () => {
  await h.close();
});

const get = <T>(
  path: string,
  c: Partial<CommonParams> = {},
  extra: Record<string, string> = {},
  key = tenant.key,
  json: () => QueryHarness['json'] = () => h.json,
) => json()<T>(`/api/sites/${tenant.siteId}/${path}?${query(c, extra)}`, { key });
/** The app as it runs, and with rollups off. */
const PATHS = [
  ['rollups', () => h.json],
  ['events only', () => eventsOnly],
] as const;

const SCENARIOS: Partial<CommonParams>[] = [
  {},
  { startDate: '2026-03-05', endDate: '2026-03-12', timeZone: 'America/New_York' },
  { startDate: '2026-02-25', endDate: '2026-03-03', timeZone: 'Asia/Kolkata' },
  { startDate: '2026-03-01', endDate: '2026-03-20', filters: [f('pathname', 'not_contains', 'pricing')] },
];

describe('users with profiles', () => {
  it.each(SCENARIOS.map((s, i) => [i, s] as const))(
    'scenario %i: the users list carries the alias and the merged profile, ranked and paged',
    async (_i, s) => {
      for (const [sort, order] of [
        ['last_seen', 'desc'],
        ['pageviews', 'asc'],
      ] as const) {
        const expected = ref.usersList(events, profiles, tenant.siteId, full(s), sort, order);
        const pages = Math.ceil(expected.length / 100) + 1;
        for (let page = 1; page <= pages; page++) {
          const res = await get<{ data: unknown[]; totalCount: number }>('users', s, {
            sort,
            order,
            limit: '100',
            page: String(page),
          });
          expect(res.status).toBe(200);
          expect(res.body).toEqual({
            data: expected.slice((page - 1) * 100, page * 100),
            totalCount: expected.length,
          });
        }
      }
    },
  );

  it('the data hold what the cases need: aliases in range, merged and removed traits', () => {
    const list = ref.usersList(events, profiles, tenant.siteId, full({}), 'last_seen', 'desc');
    const alice = list.find((u) => u.user_id === anonymous[0]);
    expect(alice).toMatchObject({
      identified_user_id: 'alice',
      traits: { plan: 'team', email: 'Alice@Example.com', tags: ['a', 'b'] },
    });
    expect(alice?.traits).not.toHaveProperty('age');
    expect(list.find((u) => u.user_id === anonymous[2])?.traits).toMatchObject({
      color: 'red',
      nested: { x: 1 },
    });
    expect(list.filter((u) => u.identified_user_id.startsWith('guest-')).length).toBe(20);
  });

  const SEARCHES: [Partial<CommonParams>, ref.Search][] = [
    [{}, { traitKey: 'plan', traitValue: 'pro' }],
    [{}, { traitKey: 'level', traitValue: '3' }],
    [{}, { traitKey: 'nested', traitValue: '{"x":1}' }],
    [
      { startDate: '2026-03-01', endDate: '2026-03-10', timeZone: 'Asia/Kolkata' },
      { traitKey: 'company', traitValue: 'Acme' },
    ],
    [{ filters: [f('device_type', 'equals', 'desktop')] }, { traitKey: 'plan', traitValue: 'free' }],
    [{}, { search: 'example.COM' }],
    [{}, { search: 'ALI' }],
    [{}, { search: 'guest-1' }],
    [{}, { search: 'umbrella', traitKey: 'plan', traitValue: 'pro' }],
    [{}, { traitKey: 'plan', traitValue: 'hacker' }],
    [{}, { traitKey: 'age', traitValue: '30' }],
  ];
  it.each(SEARCHES.map((s, i) => [i, ...s] as const))(
    'search %i narrows the users list',
    async (_i, c, s) => {
      const expected = ref.usersList(events, profiles, tenant.siteId, full(c), 'last_seen', 'desc', s);
      const extra: Record<string, string> = { limit: '100' };
      if (s.traitKey !== undefined) extra.trait_key = s.traitKey;
      if (s.traitValue !== undefined) extra.trait_value = s.traitValue;
      if (s.search !== undefined) extra.search = s.search;
      const res = await get<{ data: unknown[]; totalCount: number }>('users', c, extra);
      expect(res.body).toEqual({ data: expected.slice(0, 100), totalCount: expected.length });
    },
  );

  it('search cases match something where they should', () => {
    const count = (c: Partial<CommonParams>, s: ref.Search) =>
      ref.usersList(events, profiles, tenant.siteId, full(c), 'last_seen', 'desc', s).length;
    expect(count({}, { search: 'example.COM' })).toBe(1);
    expect(count({}, { traitKey: 'level', traitValue: '3' })).toBe(2); // bobby's two visitors
    expect(count({}, { traitKey: 'plan', traitValue: 'pro' })).toBeGreaterThan(5);
    expect(count({}, { traitKey: 'age', traitValue: '30' })).toBe(0);
  });

  it.each(PATHS)(
    'answers a user by anonymous, identified or alias-only id, with the profile; 404 otherwise: %s',
    async (_path, json) => {
      const members = [...new Set(events.map((e) => e.identified_user_id).filter(Boolean))].slice(0, 5);
      const ids = ['alice', 'bobby', 'carol', 'guest-3', anonymous[0]!, anonymous[3]!, ...members];
      for (const id of ids) {
        const expected = ref.userDetail(events, profiles, tenant.siteId, id);
        expect(expected, id).toBeDefined();
        const res = await get<{ data: unknown }>(`users/${encodeURIComponent(id)}`, {}, {}, tenant.key, json);
        expect(res.body, id).toEqual({ data: expected });
      }
      // bob's visitor is bobby now; dave has no events; mallory is another site's.
      for (const id of ['bob', 'dave', 'mallory', 'nobody']) {
        expect(ref.userDetail(events, profiles, tenant.siteId, id)).toBeUndefined();
        const res = await get<{ code: string }>(`users/${id}`, {}, {}, tenant.key, json);
        expect([res.status, res.body.code]).toEqual([404, 'USER_NOT_FOUND']);
      }
    },
  );

  it("stores by the migration's backfill what the view stores, and running it again changes nothing", async () => {
    // Per id and kind: the sets as sorted text, so rows of several parts compare as one.
    const stored = () =>
      h.ch.query<Record<string, string>>(
        `SELECT id, kind, toString(min(first_seen)) AS first, toString(max(last_seen)) AS last,
           toString(max(latest)) AS latest, toString(max(identified)) AS identified,
           toString(arraySort(groupUniqArrayArray(session_ids))) AS sessions,
           toString(arraySort(groupUniqArrayArray(pageview_ids))) AS pageviews,
           toString(arraySort(groupUniqArrayArray(other_ids))) AS others
         FROM user_activity WHERE site_id = {s:UInt32} GROUP BY id, kind ORDER BY id, kind`,
        { s: tenant.siteId },
      );
    // Every kind is there: anonymous ids with and without an identified id, identified ids.
    expect(new Set((await stored()).map((r) => Number(r.kind)))).toEqual(new Set([0, 1, 2]));
    await expectBackfillAsView(h.ch, {
      migration: '0010',
      table: 'user_activity',
      siteId: tenant.siteId,
      stored,
    });
    for (const id of ['alice', 'bobby', anonymous[0]!]) {
      const res = await get<{ data: unknown }>(`users/${encodeURIComponent(id)}`);
      expect(res.body, id).toEqual({ data: ref.userDetail(events, profiles, tenant.siteId, id) });
    }
  });
});

describe('user traits', () => {
  it('lists the trait keys with their user counts', async () => {
    const res = await get<unknown>('user-traits/keys');
    expect(res.body).toEqual({ keys: ref.traitKeys(profiles) });
    expect(ref.traitKeys(profiles).map((k) => k.key)).not.toContain('age');
  });

  it('pages the values of a trait, most users first, across every boundary', async () => {
    for (const key of ['plan', 'company', 'level', 'score', 'tags', 'unknown']) {
      const total = ref.traitValues(profiles, key, 1000, 0).total;
      for (let offset = 0; offset <= total + 1; offset += 2) {
        const res = await get<unknown>('user-traits/values', {}, { key, limit: '2', offset: String(offset) });
        expect(res.body, `${key} ${offset}`).toEqual(ref.traitValues(profiles, key, 2, offset));
      }
    }
    expect(ref.traitValues(profiles, 'level', 10, 0).values).toEqual([{ value: '3', userCount: 2 }]);
  });

  it('pages the users having a trait value, with their profiles and event summaries', async () => {
    const cases: [string, string][] = [
      ['plan', 'pro'],
      ['plan', 'free'],
      ['level', '3'],
      ['company', 'Acme'],
      ['tags', '["a","b"]'],
      ['plan', 'nope'],
    ];
    for (const [key, value] of cases) {
      const total = ref.traitUsers(events, profiles, tenant.siteId, key, value, 1000, 0).total;
      for (let offset = 0; offset <= total; offset += 7) {
        const res = await get<unknown>(
          'user-traits/users',
          {},
          { key, value, limit: '7', offset: String(offset) },
        );
        expect(res.body, `${key}=${value} ${offset}`).toEqual(
          ref.traitUsers(events, profiles, tenant.siteId, key, value, 7, offset),
        );
      }
    }
    // dave has a profile and no events: listed with zeros.
    const dave = ref
      .traitUsers(events, profiles, tenant.siteId, 'level', '3', 10, 0)
      .users.find((u) => u.identified_user_id === 'dave');
    expect(dave).toMatchObject({ user_id: '', sessions: 0, traits: { plan: 'pro', level: '3' } });
  });
});

describe('session replay', () => {
  const REPLAY_SCENARIOS: Partial<CommonParams>[] = [
    ...SCENARIOS,
    { startDate: '2026-03-08', endDate: '2026-03-08', timeZone: 'Australia/Adelaide' },
    { filters: [f('user_id', 'contains', 'customer-')] },
  ];
  it.each(REPLAY_SCENARIOS.map((s, i) => [i, s] as const))(
    'scenario %i: lists replays starting in the range, newest first, paged',
    async (_i, s) => {
      const expected = ref.replayList(replays, events, tenant.siteId, full(s));
      for (const [name, json] of PATHS) {
        for (let offset = 0; offset <= expected.length + 7; offset += 7) {
          const res = await get<unknown>(
            'session-replay/list',
            s,
            { limit: '7', offset: String(offset) },
            tenant.key,
            json,
          );
          expect(res.body, `${name} ${offset}`).toEqual({
            data: expected.slice(offset, offset + 7),
            totalCount: expected.length,
          });
        }
      }
    },
  );

  it('the replay data hold what the cases need', () => {
    for (const s of REPLAY_SCENARIOS)
      expect(ref.replayList(replays, events, tenant.siteId, full(s)).length).toBeGreaterThan(0);
    const batches = (i: number) => {
      const id = [...new Set(replays.map((r) => r.session_id))][i];
      return replays.filter((r) => r.session_id === id);
    };
    // A batch that arrived after a later one; batches sharing a start, and an arrival time.
    expect(batches(1)[1]!.timestamp > batches(1)[2]!.timestamp).toBe(true);
    expect(batches(2)[1]!.start_time).toBe(batches(2)[2]!.start_time);
    expect(batches(2)[1]!.timestamp).toBe(batches(2)[2]!.timestamp);
  });

  it('answers every replay with its events in batch order', async () => {
    const ids = [...new Set(replays.filter((r) => r.site_id === tenant.siteId).map((r) => r.session_id))];
    for (const id of ids) {
      const expected = ref.replayOf(replays, events, tenant.siteId, id)!;
      for (const [name, json] of PATHS) {
        const res = await get<unknown>(`session-replay/${id}`, {}, { limit: '10000' }, tenant.key, json);
        expect(res.body, `${name} ${id}`).toEqual({ ...expected, hasMore: false, nextOffset: null });
      }
    }
    // The data have sessions with attributes, and one without events.
    const countries = ids.map((id) => ref.replayOf(replays, events, tenant.siteId, id)!.metadata.country);
    expect(countries.some((c) => c !== '')).toBe(true);
    expect(countries).toContain('');
  });

  it('pages one replay by offset across batch boundaries', async () => {
    const expected = ref.replayOf(replays, events, tenant.siteId, longSession)!;
    expect(expected.events.length).toBe(360);
    for (const [offset, limit] of [
      [0, 30],
      [29, 2],
      [30, 30],
      [31, 59],
      [350, 20],
      [359, 1],
      [360, 5],
      [1000, 5],
    ] as const) {
      const res = await get<unknown>(
        `session-replay/${longSession}`,
        {},
        { offset: String(offset), limit: String(limit) },
      );
      const more = offset + limit < expected.events.length;
      expect(res.body, `${offset}+${limit}`).toEqual({
        metadata: expected.metadata,
        events: expected.events.slice(offset, offset + limit),
        hasMore: more,
        nextOffset: more ? offset + limit : null,
      });
    }
    const collected: unknown[] = [];
    let next: number | null = 0;
    while (next !== null) {
      const res: { body: { events: unknown[]; nextOffset: number | null } } = await get(
        `session-replay/${longSession}`,
        {},
        { offset: String(next), limit: '47' },
      );
      collected.push(...res.body.events);
      next = res.body.nextOffset;
    }
    expect(collected).toEqual(expected.events);
  });

  it('answers 404 SESSION_NOT_FOUND for an unknown, malformed or other site session', async () => {
    for (const id of [randomUUID(), 'not-a-uuid', longSession.toUpperCase(), otherSiteSession]) {
      const res = await get<{ success: boolean; code: string; error: string }>(`session-replay/${id}`);
      expect([res.status, res.body]).toEqual([
        404,
        { success: false, code: 'SESSION_NOT_FOUND', error: 'Session replay not found' },
      ]);
    }
  });
});

describe('bad parameters and access', () => {
  it.each([
    ['users', 'trait_key=plan'],
    ['users', 'trait_value=pro'],
    ['users', 'search='],
    ['user-traits/values', ''],
    ['user-traits/values', 'key=plan&limit=0'],
    ['user-traits/values', 'key=plan&offset=-1'],
    ['user-traits/users', 'key=plan'],
    ['user-traits/users', 'key=plan&value=pro&limit=101'],
    ['session-replay/list', 'time_zone=Mars/Base'],
    ['session-replay/list', 'limit=101'],
    ['session-replay/list', 'start_date=2026-03-02&end_date=2026-03-01'],
    [`session-replay/00000000-0000-0000-0000-000000000000`, 'limit=10001'],
  ])('%s?%s is a 400 in the error shape', async (path, qs) => {
    const res = await h.json<{ success: boolean; code: string; details: unknown }>(
      `/api/sites/${tenant.siteId}/${path}?${qs}`,
      { key: tenant.key },
    );
    expect([res.status, res.body.success, res.body.code]).toEqual([400, false, 'INVALID_PARAMS']);
    expect(res.body.details).toHaveProperty('fieldErrors');
  });

  const ROUTES = [
    'users?search=a',
    'user-traits/keys',
    'user-traits/values?key=plan',
    'user-traits/users?key=plan&value=pro',
    'session-replay/list',
    () => `session-replay/${longSession}`,
  ];
  const path = (r: (typeof ROUTES)[number]) =>
    `/api/sites/${tenant.siteId}/${typeof r === 'string' ? r : r()}`;

  it('answers a key of another organization 403 ACCESS_DENIED, and no key 401', async () => {
    for (const r of [...ROUTES, 'users', 'users/alice']) {
      const foreign = await h.json<{ code: string }>(path(r), { key: other.key });
      expect([foreign.status, foreign.body.code], String(r)).toEqual([403, 'ACCESS_DENIED']);
      const none = await h.json<{ code: string }>(path(r));
      expect([none.status, none.body.code], String(r)).toEqual([401, 'MISSING_API_KEY']);
    }
  });

  it('on a public site, viewers read users without traits; profiles and replays stay with members', async () => {
    await updateSiteConfig(h.db.sql, tenant.siteId, { public: true });
    try {
      const viewer = await h.json<{ data: { identified_user_id: string; traits: unknown } }>(
        `/api/sites/${tenant.siteId}/users/alice`,
      );
      expect(viewer.status).toBe(200);
      expect(viewer.body.data).toMatchObject({ identified_user_id: 'alice', traits: {} });
      const list = await h.json<{ data: { traits: unknown }[] }>(
        `/api/sites/${tenant.siteId}/users?limit=100`,
      );
      expect(list.body.data.length).toBeGreaterThan(0);
      expect(list.body.data.every((u) => Object.keys(u.traits as object).length === 0)).toBe(true);
      for (const r of ROUTES) {
        const none = await h.json<{ code: string }>(path(r));
        expect([none.status, none.body.code], String(r)).toEqual([401, 'MISSING_API_KEY']);
        const foreign = await h.json<{ code: string }>(path(r), { key: other.key });
        expect([foreign.status, foreign.body.code], String(r)).toEqual([403, 'ACCESS_DENIED']);
      }
      const member = await get<{ data: { traits: unknown } }>('users/alice');
      expect(member.body.data.traits).toMatchObject({ plan: 'team' });
    } finally {
      await updateSiteConfig(h.db.sql, tenant.siteId, { public: false });
    }
  });

  it('every new route is in the OpenAPI document', async () => {
    const doc = await h.json<{ paths: Record<string, unknown> }>('/api/openapi.json');
    for (const p of [
      '/api/sites/{siteId}/user-traits/keys',
      '/api/sites/{siteId}/user-traits/values',
      '/api/sites/{siteId}/user-traits/users',
      '/api/sites/{siteId}/session-replay/list',
      '/api/sites/{siteId}/session-replay/{sessionId}',
    ])
      expect(doc.body.paths, p).toHaveProperty([p]);
  });
});
