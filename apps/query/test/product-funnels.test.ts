import {
  analyzeFunnel,
  type CommonParams,
  compactSessionDays,
  type FunnelStep,
  funnelStepSessions,
  generateEvents,
  insertEvents,
  journeys,
  type StoredEvent,
} from '@trackhouse/clickhouse';
import { deleteSite } from '@trackhouse/postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueryHarness, type QueryHarness } from './harness';
import { f, full, query } from './params';
import * as ref from './product-reference-funnels';
import { lateEvents } from './traffic-data';
import { selection } from './traffic-reference';

let h: QueryHarness;
let tenant: Awaited<ReturnType<QueryHarness['tenant']>>;
let other: Awaited<ReturnType<QueryHarness['tenant']>>;
let events: StoredEvent[];
let eventsOnly: QueryHarness['json'];

/** A UUID whose order in ClickHouse (last 8 bytes first) is set by `n`. */
const orderedId = (prefix: string, n: number) =>
  `${prefix}-0000-7000-8000-${n.toString(16).padStart(12, '0')}`;

/**
 * Sessions whose answers are known by hand: steps sharing a millisecond (ordered by event id),
 * one event that could serve two steps, and a session across midnight UTC on 2026-03-21.
 */
function craftedEvents(template: StoredEvent): StoredEvent[] {
  let n = 0;
  const session = (sessionN: number, user: string, steps: [iso: string, pathname: string, idN?: number][]) =>
    steps.map(([iso, pathname, idN]): StoredEvent => {
      n++;
      return {
        ...template,
        timestamp: iso.replace('T', ' ').replace('Z', ''),
        event_id: orderedId('01900000', idN ?? 1000 + n),
        session_id: orderedId('01900001', sessionN),
        user_id: user,
        identified_user_id: '',
        type: 'pageview',
        event_name: '',
        properties: '{}',
        props: {},
        pathname,
        querystring: '',
      };
    });
  const tie = '2026-03-12T10:00:00.000Z';
  return [
    // /tie/a before /tie/b in the same millisecond: both steps, in order.
    ...session(1, '00000000000c0001', [
      [tie, '/tie/a', 1],
      [tie, '/tie/b', 2],
    ]),
    // /tie/b ordered first within the millisecond: nothing follows /tie/a.
    ...session(2, '00000000000c0002', [
      [tie, '/tie/b', 3],
      [tie, '/tie/a', 4],
    ]),
    // One event cannot be two steps, even when it matches both.
    ...session(3, '00000000000c0003', [[tie, '/tie/a', 5]]),
    // Across midnight UTC: /tie/a on the 20th, /tie/b on the 21st.
    ...session(4, '00000000000c0001', [
      ['2026-03-20T23:59:59.999Z', '/tie/a'],
      ['2026-03-21T00:00:00.000Z', '/tie/b'],
    ]),
    // From 2026-03-21 UTC, this one's first event in range (00:20) is later than the start of
    // the next (00:05): listed newest first, it comes first, though it began first.
    ...session(5, '00000000000c0005', [
      ['2026-03-20T23:50:00.000Z', '/tie/a'],
      ['2026-03-21T00:20:00.000Z', '/tie/b'],
    ]),
    ...session(6, '00000000000c0006', [
      ['2026-03-21T00:05:00.000Z', '/tie/a'],
      ['2026-03-21T00:06:00.000Z', '/tie/b'],
    ]),
  ];
}

beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '1000000' });
  [tenant, other] = await Promise.all([h.tenant(), h.tenant()]);
  const generated = [
    ...generateEvents({
      siteId: tenant.siteId,
      events: 5000,
      days: 45,
      end: new Date('2026-04-07T12:00:00Z'),
      seed: 21,
      tieRate: 0.2,
    }),
  ];
  const crafted = craftedEvents({ ...generated[0]!, site_id: tenant.siteId });
  const noise = [
    ...generateEvents({
      siteId: other.siteId,
      events: 300,
      days: 45,
      end: new Date('2026-04-07T12:00:00Z'),
      seed: 22,
    }),
  ];
  await insertEvents(h.ch, [...generated, ...crafted, ...noise]);
  eventsOnly = h.jsonOn({ ...h.ch, rollups: false });
  // The rollups' days merged, as an hour after their last insert: the late events below then
  // leave some days in one part (read as they are) and others in several (read merged).
  await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
  const late = lateEvents(generated, 80);
  await h.ch.writer.insert({
    table: 'events',
    values: late,
    format: 'JSONEachRow',
    clickhouse_settings: { insert_deduplication_token: `funnels-late-${tenant.siteId}` },
  });
  events = [...generated, ...crafted, ...late];
}, 120_000);
afterAll(async () => {
  await h.close();
});

const site = (path: string) => `/api/sites/${tenant.siteId}/${path}`;

type Json = QueryHarness['json'];
/** The app as it runs (funnels and journeys read `session_paths` where they can), and with rollups off. */
const PATHS = [
  ['rollups where they apply', () => h.json],
  ['events only (QUERY_ROLLUPS=false)', () => eventsOnly],
] as const satisfies readonly (readonly [string, () => Json])[];

const page = (value: string, name?: string): FunnelStep => ({
  type: 'page',
  value,
  ...(name ? { name } : {}),
});
const event = (value: string, key?: string, v?: string | number): FunnelStep => ({
  type: 'event',
  value,
  ...(key === undefined ? {} : { eventPropertyKey: key, eventPropertyValue: v }),
});

interface FunnelScenario extends Partial<CommonParams> {
  steps: FunnelStep[];
}
const FUNNELS: FunnelScenario[] = [
  {
    steps: [
      page('/pricing', 'Pricing'),
      page('/signup'),
      event('signup'),
      page('/checkout/cart'),
      event('purchase', 'plan', 'pro'),
    ],
  },
  // The same page three times, over a range crossing Kolkata's midnights.
  {
    startDate: '2026-03-05',
    endDate: '2026-03-20',
    timeZone: 'Asia/Kolkata',
    steps: [page('/docs/**'), page('/docs/**'), page('/docs/**')],
  },
  // Filters select sessions; steps then look at all their events in range.
  {
    startDate: '2026-03-01',
    endDate: '2026-04-01',
    timeZone: 'America/New_York',
    filters: [f('country', 'equals', 'US', 'GB', 'DE'), f('entry_page', 'not_equals', '/')],
    steps: [page('/'), event('add_to_cart', 'value', 2), page('/checkout/*')],
  },
  { filters: [f('event_name', 'equals', 'signup')], steps: [page('/**'), event('signup'), page('/**')] },
  // Pages and an event by name (read from `session_paths` unfiltered), the late pageviews too.
  {
    startDate: '2026-03-01',
    endDate: '2026-04-07',
    timeZone: 'Asia/Kathmandu',
    steps: [page('/**'), event('add_to_cart'), page('/late')],
  },
  // Hand-made ties and a session across the range's start.
  { startDate: '2026-03-01', endDate: '2026-03-31', steps: [page('/tie/a'), page('/tie/*')] },
];

describe.each(PATHS)('funnels against a brute-force computation, %s', (_, json) => {
  it.each(FUNNELS.map((s, i) => [i, s] as const))('scenario %i: each step in order', async (_, s) => {
    const res = await json()(site(`funnels/analyze?${query(s)}`), {
      key: tenant.key,
      method: 'POST',
      body: { steps: s.steps },
    });
    expect(res.status).toBe(200);
    const expected = ref.funnel(selection(events, tenant.siteId, full(s)), s.steps);
    expect(res.body).toEqual({ data: expected });
    expect(expected[0]!.sessions).toBeGreaterThan(0);
  });

  it.each(FUNNELS.map((s, i) => [i, s] as const))(
    'scenario %i: with every session walked exactly (too many share a millisecond to list them)',
    async (_, s) => {
      const expected = ref.funnel(selection(events, tenant.siteId, full(s)), s.steps);
      const ch = json() === eventsOnly ? { ...h.ch, rollups: false } : h.ch;
      expect(await analyzeFunnel(ch, tenant.siteId, full(s), s.steps, 0)).toEqual(expected);
    },
  );

  it.each(FUNNELS.map((s, i) => [i, s] as const))(
    'scenario %i: sessions listed with no spare rows (a tied session dropping out re-reads the list)',
    async (_, s) => {
      const ch = json() === eventsOnly ? { ...h.ch, rollups: false } : h.ch;
      const sel = selection(events, tenant.siteId, full(s));
      for (const [k, mode] of [
        [1, 'reached'],
        [2, 'dropped'],
      ] as const) {
        const expected = ref.funnelSessions(sel, s.steps, k, mode);
        const page = { stepNumber: k, mode, limit: 20, offset: 20 };
        const listed = await funnelStepSessions(ch, tenant.siteId, full(s), s.steps, page, 0);
        expect({ k, mode, ...JSON.parse(JSON.stringify(listed)) }).toEqual({
          k,
          mode,
          data: expected.slice(20, 40),
          totalCount: expected.length,
        });
      }
    },
  );

  it('ties within a millisecond follow event ids; one event is one step; the range cuts sessions', async () => {
    const sessionsOf = async (c: Partial<CommonParams>) => {
      const res = await json()<{ data: { sessions: number }[] }>(site(`funnels/analyze?${query(c)}`), {
        key: tenant.key,
        method: 'POST',
        body: { steps: [page('/tie/a'), page('/tie/*')] },
      });
      return res.body.data.map((d) => d.sessions);
    };
    expect(await sessionsOf({ startDate: '2026-03-12', endDate: '2026-03-12' })).toEqual([3, 1]);
    expect(await sessionsOf({ startDate: '2026-03-20', endDate: '2026-03-21' })).toEqual([3, 3]);
    // Only /tie/b of sessions 4 and 5 is in range.
    expect(await sessionsOf({ startDate: '2026-03-21', endDate: '2026-03-21' })).toEqual([1, 1]);
    expect(await sessionsOf({ startDate: '2026-03-20', endDate: '2026-03-20' })).toEqual([2, 0]);
    // In Kolkata both events of the midnight sessions fall on the 21st.
    expect(
      await sessionsOf({ startDate: '2026-03-21', endDate: '2026-03-21', timeZone: 'Asia/Kolkata' }),
    ).toEqual([3, 3]);
  });

  it.each(FUNNELS.map((s, i) => [i, s] as const))(
    'scenario %i: sessions reached and dropped, paged',
    async (_, s) => {
      const sel = selection(events, tenant.siteId, full(s));
      for (const [k, mode] of [
        [1, 'reached'],
        [2, 'reached'],
        [2, 'dropped'],
        [s.steps.length, 'dropped'],
      ] as const) {
        const expected = ref.funnelSessions(sel, s.steps, k, mode);
        for (const pageNumber of [1, 2]) {
          const res = await json()<{ data: unknown[]; totalCount: number }>(
            site(`funnels/${k}/sessions?${query(s, { page: String(pageNumber), limit: '20' })}`),
            { key: tenant.key, method: 'POST', body: { steps: s.steps, mode } },
          );
          expect(res.status).toBe(200);
          expect({ k, mode, ...res.body }).toEqual({
            k,
            mode,
            data: expected.slice((pageNumber - 1) * 20, pageNumber * 20),
            totalCount: expected.length,
          });
        }
      }
    },
  );

  it('lists a session that began before the range by its first event in it', async () => {
    const c = { startDate: '2026-03-21', endDate: '2026-03-21' };
    const steps = [page('/tie/*'), page('/**')];
    const expected = ref.funnelSessions(selection(events, tenant.siteId, full(c)), steps, 1, 'reached');
    expect(expected.map((r) => r.session_id)).toEqual([5, 6, 4].map((n) => orderedId('01900001', n)));
    const res = await json()(site(`funnels/1/sessions?${query(c)}`), {
      key: tenant.key,
      method: 'POST',
      body: { steps, mode: 'reached' },
    });
    expect(res.body).toEqual({ data: expected, totalCount: 3 });
    // Filtered, the sessions come from their matching events and their starts from the rollup.
    const filtered = { ...c, filters: [f('pathname', 'contains', '/tie/')] };
    const selected = ref.funnelSessions(
      selection(events, tenant.siteId, full(filtered)),
      steps,
      1,
      'reached',
    );
    expect(selected.map((r) => r.session_id)).toEqual([5, 6, 4].map((n) => orderedId('01900001', n)));
    const matched = await json()(site(`funnels/1/sessions?${query(filtered)}`), {
      key: tenant.key,
      method: 'POST',
      body: { steps, mode: 'reached' },
    });
    expect(matched.body).toEqual({ data: selected, totalCount: 3 });
  });

  it('takes the mode from the query string as well', async () => {
    const s = FUNNELS[0]!;
    const res = await h.json<{ totalCount: number }>(site('funnels/2/sessions?mode=dropped'), {
      key: tenant.key,
      method: 'POST',
      body: { steps: s.steps },
    });
    expect(res.status).toBe(200);
    expect(res.body.totalCount).toBe(
      ref.funnelSessions(selection(events, tenant.siteId, full({})), s.steps, 2, 'dropped').length,
    );
  });
});

describe.each(PATHS)('retention against a brute-force computation, %s', (_, json) => {
  const SCENARIOS: (Partial<CommonParams> & { startDate: string; endDate: string; mode: 'day' | 'week' })[] =
    [
      { startDate: '2026-03-01', endDate: '2026-03-20', timeZone: 'Asia/Kolkata', mode: 'day' },
      { startDate: '2026-03-01', endDate: '2026-03-14', timeZone: 'America/New_York', mode: 'day' },
      { startDate: '2026-02-25', endDate: '2026-04-07', timeZone: 'Australia/Adelaide', mode: 'week' },
      {
        startDate: '2026-03-04',
        endDate: '2026-04-02',
        timeZone: 'Europe/Berlin',
        filters: [f('device_type', 'equals', 'desktop'), f('pathname', 'not_contains', 'blog')],
        mode: 'week',
      },
      // More days than one 64-bit mask of periods holds: the other way of grouping.
      { startDate: '2026-01-01', endDate: '2026-04-07', timeZone: 'UTC', mode: 'day' },
    ];
  it.each(SCENARIOS.map((s, i) => [i, s] as const))('scenario %i: cohorts and returns', async (_, s) => {
    const res = await json()<{ data: { cohorts: Record<string, unknown> } }>(
      site(`retention?${query(s, { mode: s.mode })}`),
      { key: tenant.key },
    );
    expect(res.status).toBe(200);
    const expected = ref.retention(events, tenant.siteId, { ...full(s), ...s }, s.mode);
    expect(res.body).toEqual({ data: expected });
    expect(Object.keys(res.body.data.cohorts)).toEqual(Object.keys(expected.cohorts));
    expect(Object.keys(expected.cohorts).length).toBeGreaterThan(1);
  });

  it('without start_date takes `range` days ending end_date', async () => {
    const res = await json()(site('retention?mode=day&range=10&end_date=2026-03-20&time_zone=Asia/Kolkata'), {
      key: tenant.key,
    });
    expect(res.body).toEqual({
      data: ref.retention(
        events,
        tenant.siteId,
        full({ startDate: '2026-03-11', endDate: '2026-03-20', timeZone: 'Asia/Kolkata' }) as CommonParams & {
          startDate: string;
          endDate: string;
        },
        'day',
      ),
    });
  });

  it("reads the visitors' quarter hours unfiltered with the rollups, the events otherwise", async () => {
    const reads: string[] = [];
    const capturing = h.jsonOn({
      ...h.ch,
      ...(json() === eventsOnly ? { rollups: false } : {}),
      query: (sql, params, settings) => {
        reads.push(sql);
        return h.ch.query(sql, params, settings);
      },
    });
    const s = SCENARIOS[0]!;
    const res = await capturing(site(`retention?${query(s, { mode: s.mode })}`), { key: tenant.key });
    expect(res.body).toEqual({ data: ref.retention(events, tenant.siteId, { ...full(s), ...s }, s.mode) });
    expect(reads.some((sql) => sql.includes('FROM visitor_quarters'))).toBe(json() !== eventsOnly);
  });
});

describe.each(PATHS)('journeys against a brute-force computation, %s', (_, json) => {
  const SCENARIOS: (Partial<CommonParams> & { steps: number; limit: number; startPage?: string })[] = [
    { steps: 3, limit: 500 },
    { startDate: '2026-03-05', endDate: '2026-03-25', timeZone: 'Asia/Kolkata', steps: 5, limit: 40 },
    { steps: 4, limit: 100, startPage: '/pricing' },
    { steps: 2, limit: 500, startPage: '/docs/**', timeZone: 'Australia/Adelaide', endDate: '2026-04-05' },
    {
      startDate: '2026-03-01',
      endDate: '2026-03-31',
      filters: [f('browser', 'not_equals', 'Chrome'), f('exit_page', 'regex', '^/(pricing|signup)')],
      steps: 10,
      limit: 500,
    },
    // A place and a part of the site, as a dashboard filters: the sessions they select keep all
    // their pageviews in range, from a start page too.
    {
      timeZone: 'Europe/Berlin',
      filters: [f('country', 'equals', 'US', 'DE'), f('pathname', 'contains', 'docs', 'checkout')],
      steps: 3,
      limit: 30,
    },
    {
      startDate: '2026-03-08',
      endDate: '2026-03-29',
      filters: [f('device_type', 'equals', 'mobile')],
      steps: 4,
      limit: 500,
      startPage: '/signup',
    },
  ];
  it.each(SCENARIOS.map((s, i) => [i, s] as const))(
    'scenario %i: ranked, ties in byte order',
    async (_, s) => {
      const extra: Record<string, string> = { steps: String(s.steps), limit: String(s.limit) };
      if (s.startPage) extra.start_page = s.startPage;
      const res = await json()<{ journeys: unknown[] }>(site(`journeys?${query(s, extra)}`), {
        key: tenant.key,
      });
      expect(res.status).toBe(200);
      const expected = ref.journeys(selection(events, tenant.siteId, full(s)), s);
      expect(res.body).toEqual({ journeys: expected });
      expect(expected.length).toBeGreaterThan(1);
    },
  );

  it.each(SCENARIOS.map((s, i) => [i, s] as const))(
    'scenario %i: with no journeys read past the limit (tied sessions then make it read them all)',
    async (_, s) => {
      const ch = json() === eventsOnly ? { ...h.ch, rollups: false } : h.ch;
      const opts = { steps: s.steps, limit: s.limit, ...(s.startPage ? { startPage: s.startPage } : {}) };
      const expected = ref.journeys(selection(events, tenant.siteId, full(s)), s);
      expect(await journeys(ch, tenant.siteId, full(s), opts, 0)).toEqual(expected);
    },
  );
});

describe('saved funnels', () => {
  const steps = [page('/pricing', 'Pricing'), event('signup', 'plan', 'pro')];

  it('are created, listed oldest first, replaced and deleted', async () => {
    const t = await h.tenant();
    const base = `/api/sites/${t.siteId}/funnels`;
    const first = await h.json<{ success: boolean; funnelId: number }>(base, {
      key: t.key,
      method: 'POST',
      body: { name: 'Signup', steps },
    });
    expect(first.status).toBe(201);
    expect(first.body.success).toBe(true);
    const second = await h.json<{ funnelId: number }>(base, {
      key: t.key,
      method: 'POST',
      body: { name: 'Docs', steps: [page('/docs'), page('/docs/**')] },
    });
    const list = await h.json<{ data: { id: number; name: string; steps: unknown; updatedAt: string }[] }>(
      base,
      {
        key: t.key,
      },
    );
    expect(list.status).toBe(200);
    expect(list.body.data.map((d) => [d.id, d.name, d.steps])).toEqual([
      [first.body.funnelId, 'Signup', steps],
      [second.body.funnelId, 'Docs', [page('/docs'), page('/docs/**')]],
    ]);

    const replaced = await h.json(`${base}/${first.body.funnelId}`, {
      key: t.key,
      method: 'PUT',
      body: { name: 'Signup (any plan)', steps: [page('/pricing'), event('signup')] },
    });
    expect(replaced.body).toEqual({ success: true, funnelId: first.body.funnelId });
    const after = await h.json<{ data: { name: string; steps: unknown }[] }>(base, { key: t.key });
    expect(after.body.data[0]).toMatchObject({
      name: 'Signup (any plan)',
      steps: [page('/pricing'), event('signup')],
    });

    const deleted = await h.json(`${base}/${second.body.funnelId}`, { key: t.key, method: 'DELETE' });
    expect(deleted.body).toEqual({ success: true });
    const again = await h.json(`${base}/${second.body.funnelId}`, { key: t.key, method: 'DELETE' });
    expect([again.status, again.body.code]).toEqual([404, 'FUNNEL_NOT_FOUND']);
    expect((await h.json<{ data: unknown[] }>(base, { key: t.key })).body.data).toHaveLength(1);
  });

  it('belong to their site: another site of the same user answers 404, deleting the site deletes them', async () => {
    const t = await h.tenant();
    const created = await h.json<{ funnelId: number }>(`/api/sites/${t.siteId}/funnels`, {
      key: t.key,
      method: 'POST',
      body: { name: 'A', steps },
    });
    const sibling = await h.json<{ siteId: number }>(`/api/organizations/${t.organizationId}/sites`, {
      key: t.key,
      method: 'POST',
      body: { name: 'Sibling', domain: 'sibling.example' },
    });
    expect(sibling.status).toBe(201);
    for (const [method, body] of [
      ['PUT', { name: 'B', steps }],
      ['DELETE', undefined],
    ] as const) {
      const res = await h.json(`/api/sites/${sibling.body.siteId}/funnels/${created.body.funnelId}`, {
        key: t.key,
        method,
        body,
      });
      expect([res.status, res.body.code]).toEqual([404, 'FUNNEL_NOT_FOUND']);
    }
    // The foreign key cascades (the delete route also clears the site's events, which is slow here).
    expect(await deleteSite(h.db.sql, t.siteId)).toBe(true);
    const rows = await h.db.sql`select 1 from funnels where funnel_id = ${created.body.funnelId}`;
    expect(rows).toHaveLength(0);
  });

  it('can be written by any member of the organization', async () => {
    const t = await h.tenant();
    const member = await h.member(t.organizationId, 'member');
    const res = await h.json(`/api/sites/${t.siteId}/funnels`, {
      key: member.key,
      method: 'POST',
      body: { name: 'By a member', steps },
    });
    expect(res.status).toBe(201);
  });
});

describe('bad input and access', () => {
  const steps = [page('/pricing'), event('signup')];
  const post = (path: string, body: unknown, key = tenant.key) =>
    h.json(site(path), { key, method: 'POST', body });

  it.each([
    ['one step', { steps: [page('/')] }],
    ['eleven steps', { steps: Array.from({ length: 11 }, () => page('/')) }],
    ['a page without a leading slash', { steps: [page('pricing'), page('/')] }],
    ['an unknown step type', { steps: [{ type: 'click', value: 'x' }, page('/')] }],
    [
      'a property key without a value',
      { steps: [{ type: 'event', value: 'signup', eventPropertyKey: 'plan' }, page('/')] },
    ],
    [
      'a property on a page step',
      { steps: [{ ...page('/'), eventPropertyKey: 'a', eventPropertyValue: 'b' }, page('/')] },
    ],
    ['an empty event name', { steps: [event(''), page('/')] }],
    ['no steps at all', {}],
  ])('analyze refuses %s with a 400', async (_, body) => {
    const res = await post('funnels/analyze', body);
    expect([res.status, res.body.success, res.body.code]).toEqual([400, false, 'INVALID_PAYLOAD']);
    expect(res.body.details).toHaveProperty('fieldErrors');
  });

  it('refuses bad common parameters and bad step-session requests', async () => {
    const badBody = [
      await post('funnels/2/sessions', { steps, mode: 'left' }),
      await post('funnels', { steps }),
      await post('funnels', { name: 'x', steps: [page('/')] }),
      await post('funnels', { name: 'x', steps, extra: 1 }),
    ];
    for (const r of badBody) expect([r.status, r.body.code]).toEqual([400, 'INVALID_PAYLOAD']);
    const bad = [
      await post('funnels/analyze?time_zone=Mars/Base', { steps }),
      await post('funnels/analyze?filters=[{"parameter":"nope"}]', { steps }),
      await post('funnels/analyze?start_date=2026-03-02&end_date=2026-03-01', { steps }),
      await post('funnels/3/sessions', { steps, mode: 'reached' }),
      await post('funnels/0/sessions', { steps, mode: 'reached' }),
      await post('funnels/1/sessions', { steps, mode: 'dropped' }),
      await post('funnels/2/sessions', { steps }),
      await post('funnels/2/sessions?mode=reached', { steps, mode: 'dropped' }),
      await post('funnels/2/sessions?limit=101', { steps, mode: 'reached' }),
    ];
    expect(bad.map((r) => r.status)).toEqual(bad.map(() => 400));
    for (const r of bad) expect(r.body).toMatchObject({ success: false, code: 'INVALID_PARAMS' });
  });

  it.each([
    ['retention?mode=month'],
    ['retention?range=0'],
    ['retention?range=366'],
    ['retention?start_date=2020-01-01&end_date=2026-01-01&mode=day'],
    ['retention?start_date=2299-01-01'],
    ['journeys?steps=1'],
    ['journeys?steps=11'],
    ['journeys?limit=0'],
    ['journeys?limit=501'],
    ['journeys?start_page=pricing'],
    ['journeys?time_zone=Nowhere'],
  ])('GET %s is a 400', async (path) => {
    const res = await h.json(site(path), { key: tenant.key });
    expect([res.status, res.body.code]).toEqual([400, 'INVALID_PARAMS']);
  });

  it('answers another organization with ACCESS_DENIED and no key with MISSING_API_KEY', async () => {
    const calls: [string, string, unknown][] = [
      ['POST', 'funnels/analyze', { steps }],
      ['POST', 'funnels/2/sessions', { steps, mode: 'reached' }],
      ['GET', 'funnels', undefined],
      ['POST', 'funnels', { name: 'x', steps }],
      ['PUT', 'funnels/1', { name: 'x', steps }],
      ['DELETE', 'funnels/1', undefined],
      ['GET', 'retention', undefined],
      ['GET', 'journeys', undefined],
    ];
    for (const [method, path, body] of calls) {
      const foreign = await h.json(site(path), { key: other.key, method, body });
      expect([path, method, foreign.status, foreign.body.code]).toEqual([path, method, 403, 'ACCESS_DENIED']);
      const anonymous = await h.json(site(path), { method, body });
      expect([path, method, anonymous.status, anonymous.body.code]).toEqual([
        path,
        method,
        401,
        'MISSING_API_KEY',
      ]);
    }
  });

  it('lists the new routes in the OpenAPI document', async () => {
    const doc = await h.json<{ paths: Record<string, Record<string, unknown>> }>('/api/openapi.json');
    expect(doc.status).toBe(200);
    expect(Object.keys(doc.body.paths['/api/sites/{siteId}/funnels']!).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.body.paths['/api/sites/{siteId}/funnels/{funnelId}']!).sort()).toEqual([
      'delete',
      'put',
    ]);
    for (const path of ['funnels/analyze', 'funnels/{stepNumber}/sessions', 'retention', 'journeys'])
      expect(doc.body.paths[`/api/sites/{siteId}/${path}`]).toBeDefined();
  });
});
