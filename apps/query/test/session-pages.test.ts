import {
  buildSummaries,
  compactSessionDays,
  type Filter,
  forgetKeptReads,
  type GoalDefinition,
  generateEvents,
  insertEvents,
  LOCAL_SUFFIX,
  pathBits,
  type StoredEvent,
} from '@trackhouse/clickhouse';
import { uuidv7FromSeed } from '@trackhouse/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_CLICKHOUSE } from '../../../test/helpers';
import { createQueryHarness, type QueryHarness } from './harness';
import { f, full, query } from './params';
import { convertsGoal, goalStats } from './reference';
import { lateEvents } from './traffic-data';
import * as ref from './traffic-reference';

let h: QueryHarness;
let tenant: Awaited<ReturnType<QueryHarness['tenant']>>;
let events: StoredEvent[];

/** Ten days of June 2026 in a zone whose days are cut across UTC days (the first and last). */
const RANGE = { startDate: '2026-06-03', endDate: '2026-06-12', timeZone: 'Asia/Kolkata' };
/** The UTC days lying wholly inside RANGE (2 June 18:30 to 12 June 18:30 UTC). */
const INSIDE = [3, 4, 5, 6, 7, 8, 9, 10, 11].map((d) => 20260600 + d);
const DAY = 20260607;
const PAGES = ['pathname', 'entry_page', 'exit_page', 'page_title'] as const;

/** Filters the session rows can test (row-filters.ts), as a dashboard combines them. */
const FILTERS: Filter[][] = [
  [f('country', 'equals', 'US', 'DE'), f('pathname', 'contains', 'docs', 'pricing', 'late')],
  [f('device_type', 'not_equals', 'desktop')],
  [f('pathname', 'regex', '^/docs')],
  // The session whose country changes: its first event is in the US and it has a pricing
  // page, but no one event is both; counted only from its events.
  [f('country', 'equals', 'US'), f('pathname', 'contains', 'pricing')],
  // Paths of MANY_DAY with bits of their own (pricing, some of the /many/ ones) and without.
  [f('country', 'equals', 'US', 'DE'), f('pathname', 'contains', 'many/1', 'pricing')],
];

/** A day with more distinct paths than a build gives bits (0027): 70 sessions of a path each. */
const MANY_DAY = 20260609;
const MANY = 70;

beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '1000000' });
  tenant = await h.tenant();
  const generated = [
    ...generateEvents({
      siteId: tenant.siteId,
      events: 3000,
      days: 14,
      end: new Date('2026-06-15T12:00:00Z'),
      seed: 41,
      tieRate: 0.1,
    }),
  ];
  events = [
    ...generated,
    ...movingSession(generated[0]!),
    ...sharedTitleSession(generated[0]!),
    ...manyPathSessions(generated[0]!),
  ];
  await insertEvents(h.ch, events);
  await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
}, 120_000);

afterAll(async () => {
  await h.close();
});

/** A pageview like `like` at `at` (ms) in session `sessionId` of `userId`, its id seeded by `seed`. */
function pageviewAt(
  like: StoredEvent,
  at: number,
  sessionId: string,
  userId: string,
  seed: string,
  fields: Partial<StoredEvent>,
): StoredEvent {
  const iso = new Date(at).toISOString();
  return {
    ...like,
    timestamp: `${iso.slice(0, 10)} ${iso.slice(11, 23)}`,
    event_id: uuidv7FromSeed(at, seed),
    session_id: sessionId,
    user_id: userId,
    type: 'pageview',
    event_name: '',
    properties: '{}',
    props: {},
    ...fields,
  };
}

/** A session of 7 June that starts in the US on a docs page and ends in France on the pricing page. */
function movingSession(like: StoredEvent): StoredEvent[] {
  const start = Date.parse('2026-06-07T10:00:00Z');
  const sessionId = uuidv7FromSeed(start, 'moving session');
  return [
    ['US', '/docs/intro'],
    ['FR', '/pricing'],
  ].map(([country, pathname], i) =>
    pageviewAt(like, start + i * 60_000, sessionId, '00000000000000c0', `moving ${i}`, {
      country: country!,
      pathname: pathname!,
    }),
  );
}

/**
 * A session of 8 June in the US whose three pageviews, on two docs pages and the pricing page,
 * share one title: it counts once under that title, with three pageviews.
 */
function sharedTitleSession(like: StoredEvent): StoredEvent[] {
  const start = Date.parse('2026-06-08T09:00:00Z');
  const sessionId = uuidv7FromSeed(start, 'shared title session');
  return ['/docs/a', '/docs/b', '/pricing'].map((pathname, i) =>
    pageviewAt(like, start + i * 30_000, sessionId, '00000000000000c1', `shared title ${i}`, {
      country: 'US',
      pathname,
      page_title: SHARED_TITLE,
    }),
  );
}
const SHARED_TITLE = 'One title for three pages';

/**
 * MANY sessions of MANY_DAY in the US, the i-th with one pageview of `/many/i` (and, the even
 * ones, a second of the pricing page): the day then has more paths than bits.
 */
function manyPathSessions(like: StoredEvent): StoredEvent[] {
  const start = Date.parse('2026-06-09T08:00:00Z');
  return Array.from({ length: MANY }, (_, i) => {
    const at = start + i * 120_000;
    const sessionId = uuidv7FromSeed(at, `many paths ${i}`);
    const userId = `00000000000001${i.toString(16).padStart(2, '0')}`;
    return [`/many/${i}`, ...(i % 2 === 0 ? ['/pricing'] : [])].map((pathname, j) =>
      pageviewAt(like, at + j * 10_000, sessionId, userId, `many paths ${i} ${j}`, {
        country: 'US',
        pathname,
      }),
    );
  }).flat();
}

type Answer = { data: { value: string; count: number; pageviews: number }[]; totalCount: number };

const metric = (parameter: string, filters: Filter[]) =>
  h.json<{ data: Answer }>(
    `/api/sites/${tenant.siteId}/metric?${query({ ...RANGE, filters }, { parameter, limit: '1000' })}`,
    { key: tenant.key },
  );

const expected = (parameter: (typeof PAGES)[number], filters: Filter[]) =>
  ref.metric(ref.selection(events, tenant.siteId, full({ ...RANGE, filters })), parameter);

/** The days built into `session_pages_by_country` for the site. */
const builtDays = async () =>
  (
    await h.ch.query<{ partition: number }>(
      `SELECT DISTINCT partition FROM session_pages_builds WHERE site_id = {s:UInt32} ORDER BY partition`,
      { s: tenant.siteId },
    )
  ).map((r) => Number(r.partition));

/**
 * A session only the build of `day` (of `site`) holds, in the US with a pricing page viewed a
 * million times, 60,000 of them under `title`.
 */
const insertBuiltSession = (day: number, title: string, build = '', site = tenant.siteId) =>
  h.ch
    .command(
      `INSERT INTO session_pages_by_country (site_id, partition, build_id, session_id, session_start, session_end,
       first_event, paths, path_bits, constants_low, constants_high, pageviews, tied, unsure, page_hashes, page_counts,
       title_paths, titles, title_hash_counts, entry_hash, entry_gap, exit_hash, exit_gap)
     SELECT site_id, partition, if({b:String} = '', build_id, toUUID({b:String})), generateUUIDv7(),
       span_start, span_start, tuple('US', '', '', '', '', '', '', '', ''), [cityHash64('/pricing')],
       ${pathBits("[cityHash64('/pricing')]", 'bit_paths')}, 1, 1,
       1000000, 0, 0, [bitShiftRight(cityHash64('/pricing'), 16)], [bitShiftLeft(toUInt64(1000000), 40)],
       [bitShiftRight(cityHash64('/pricing'), 16)], [{t:String}],
       [bitShiftLeft(bitShiftRight(cityHash64({t:String}), 16), 16) + 60000],
       bitShiftRight(cityHash64('/pricing'), 16), -1, bitShiftRight(cityHash64('/pricing'), 16), -1
     FROM session_pages_builds FINAL WHERE site_id = {s:UInt32} AND partition = {d:UInt32} LIMIT 1`,
      { s: site, d: day, t: title, b: build },
    )
    .then(() => forgetKeptReads(h.ch));

/**
 * Path goals the filtered goal list counts from the rows (one of them a path no session has,
 * one the pricing page a path filter passes), and an event goal, counted from the events.
 */
const GOALS: (GoalDefinition & { name: string })[] = [
  { name: 'docs', goalType: 'path', config: { pathPattern: '/docs/**' } },
  { name: 'pricing', goalType: 'path', config: { pathPattern: '/pricing' } },
  { name: 'nowhere', goalType: 'path', config: { pathPattern: '/nowhere/*' } },
  { name: 'signup', goalType: 'event', config: { eventName: 'signup' } },
];
let goalIds: number[] = [];

type Site = { siteId: number; key: string };
type GoalCounts = { sessions: number | undefined; conversions: number | undefined };

/** Goals made on `site`, their ids in the order given. */
async function addGoals(site: Site, goals: GoalDefinition[]): Promise<number[]> {
  const ids: number[] = [];
  for (const [i, goal] of goals.entries()) {
    const res = await h.json<{ goalId: number }>(`/api/sites/${site.siteId}/goals`, {
      key: site.key,
      method: 'POST',
      body: { name: `goal ${i}`, ...goal },
    });
    expect(res.status).toBe(201);
    ids.push(res.body.goalId);
  }
  return ids;
}

/** The goal list of `site` over `range` with `filters`: per goal of `ids`, its sessions and conversions. */
async function goalCounts(
  site: Site,
  range: typeof RANGE,
  filters: Filter[],
  ids: number[],
): Promise<GoalCounts[]> {
  const res = await h.json<{ data: { goalId: number; total_sessions: number; total_conversions: number }[] }>(
    `/api/sites/${site.siteId}/goals?${query({ ...range, filters }, { page_size: '100' })}`,
    { key: site.key },
  );
  expect(res.status).toBe(200);
  return ids.map((id) => {
    const g = res.body.data.find((r) => r.goalId === id);
    return { sessions: g?.total_sessions, conversions: g?.total_conversions };
  });
}

/** The reference's goal list of `all` (events of `siteId`), as goalCounts gives it. */
function referenceGoals(
  all: StoredEvent[],
  siteId: number,
  range: typeof RANGE,
  filters: Filter[],
  goals: GoalDefinition[],
): { sessions: number; conversions: number }[] {
  const selected = ref.selection(all, siteId, full({ ...range, filters })).selected;
  return goals.map((g) => {
    const e = goalStats(selected, g);
    return { sessions: e.total_sessions, conversions: e.total_conversions };
  });
}

/** The filtered goal list of the tenant over RANGE, per goal of GOALS (made at the first call). */
async function goalList(filters: Filter[]) {
  if (goalIds.length === 0) goalIds = await addGoals(tenant, GOALS);
  return goalCounts(tenant, RANGE, filters, goalIds);
}

const expectedGoals = (filters: Filter[]) => referenceGoals(events, tenant.siteId, RANGE, filters, GOALS);

/** The filtered overview of the tenant over RANGE. */
const overviewOf = async (filters: Filter[]) => {
  const res = await h.json<{ data: ReturnType<typeof ref.overview> }>(
    `/api/sites/${tenant.siteId}/overview?${query({ ...RANGE, filters })}`,
    { key: tenant.key },
  );
  expect(res.status).toBe(200);
  return res.body.data;
};

/**
 * The session totals that read the built days' sessions (rollup.ts) equal the brute-force
 * reference: the overview, its day and hour buckets, the sessions list.
 */
async function totalsMatch(filters: Filter[]) {
  const selected = ref.selection(events, tenant.siteId, full({ ...RANGE, filters }));
  expect({ filters, overview: await overviewOf(filters) }).toEqual({
    filters,
    overview: ref.overview(selected),
  });
  for (const bucket of ['day', 'hour'] as const) {
    const res = await h.json<{ data: unknown[] }>(
      `/api/sites/${tenant.siteId}/overview-bucketed?${query({ ...RANGE, filters }, { bucket })}`,
      { key: tenant.key },
    );
    expect({ filters, bucket, data: res.body.data }).toEqual({
      filters,
      bucket,
      data: ref.overviewBucketed(selected, full({ ...RANGE, filters }), bucket, Date.now()),
    });
  }
  const sessions = await h.json<{ data: unknown[]; totalCount: number }>(
    `/api/sites/${tenant.siteId}/sessions?${query({ ...RANGE, filters }, { limit: '100' })}`,
    { key: tenant.key },
  );
  const all = ref.sessions(selected);
  expect({ filters, ...sessions.body }).toEqual({ filters, data: all.slice(0, 100), totalCount: all.length });
}

/**
 * Every filtered page breakdown, the filtered goal list and the session totals equal the
 * brute-force reference.
 */
async function answersMatch() {
  for (const filters of FILTERS) {
    await totalsMatch(filters);
    for (const parameter of PAGES) {
      const res = await metric(parameter, filters);
      expect(res.status).toBe(200);
      expect({ parameter, filters, ...res.body.data }).toEqual({
        parameter,
        filters,
        ...expected(parameter, filters),
      });
    }
    expect({ filters, goals: await goalList(filters) }).toEqual({ filters, goals: expectedGoals(filters) });
  }
}

// Builds are of a single engine's parts; a cluster reads every session as before.
describe.skipIf(TEST_CLICKHOUSE === 'cluster')('filtered pages and goals from session_pages', () => {
  // This test and the next check every answer several times and build days meanwhile: through
  // the HTTP bridge on a busy machine they took over the default 30 s.
  it('builds the settled days a range holds, a week per read, and answers as the events do', async () => {
    expect(await builtDays()).toEqual([]);
    const first = await metric('pathname', FILTERS[0]!);
    expect(first.body.data).toEqual(expected('pathname', FILTERS[0]!));
    const week = await builtDays();
    expect(week).toHaveLength(7);
    expect(INSIDE).toEqual(expect.arrayContaining(week));
    await answersMatch();
    // Only days whose sessions all lie in the range: the ones cut by the zone are read as before.
    expect(await builtDays()).toEqual(INSIDE);
    const shared = (await metric('page_title', FILTERS[0]!)).body.data.data.find(
      (r) => r.value === SHARED_TITLE,
    );
    expect(shared).toMatchObject({ count: 1, pageviews: 3 });
    // Read again from the builds: the same answers, nothing built twice.
    await answersMatch();
    const [builds] = await h.ch.query<{ n: number }>(
      'SELECT count() AS n FROM session_pages_builds WHERE site_id = {s:UInt32}',
      { s: tenant.siteId },
    );
    expect(Number(builds?.n)).toBe(INSIDE.length);
  }, 90_000);

  it('reads a built day while its parts are current, and its sessions again after a late event', async () => {
    const filters = FILTERS[0]!;
    // A session only the build holds, in the US with a pricing page viewed a million times,
    // 60,000 of them under a title only the build names: seen in the answer, it shows the build
    // was read.
    await insertBuiltSession(DAY, 'Only in session_pages');
    await h.ch.command(
      `INSERT INTO session_pages_builds
       SELECT * REPLACE (arrayConcat(title_names, ['Only in session_pages']) AS title_names)
       FROM session_pages_builds FINAL WHERE site_id = {s:UInt32} AND partition = {d:UInt32}`,
      { s: tenant.siteId, d: DAY },
    );
    forgetKeptReads(h.ch);
    const pricing = async () =>
      (await metric('pathname', filters)).body.data.data.find((r) => r.value === '/pricing');
    const truth = expected('pathname', filters).data.find((r) => r.value === '/pricing');
    expect((await pricing())?.pageviews).toBe((truth?.pageviews ?? 0) + 1_000_000);
    const titles = async () => (await metric('page_title', filters)).body.data.data;
    expect((await titles()).find((r) => r.value === 'Only in session_pages')).toMatchObject({
      count: 1,
      pageviews: 60_000,
    });
    // So do the session totals and the sessions list: one more session, of a million pageviews,
    // by one more visitor.
    const truthTotals = ref.overview(ref.selection(events, tenant.siteId, full({ ...RANGE, filters })));
    const totals = await overviewOf(filters);
    expect({ sessions: totals.sessions, users: totals.users }).toEqual({
      sessions: truthTotals.sessions + 1,
      users: truthTotals.users + 1,
    });
    expect(totals.pages_per_session * totals.sessions).toBeGreaterThan(1_000_000);
    const listed = await h.json<{ totalCount: number }>(
      `/api/sites/${tenant.siteId}/sessions?${query({ ...RANGE, filters })}`,
      { key: tenant.key },
    );
    expect(listed.body.totalCount).toBe(truthTotals.sessions + 1);
    // The goal list reads it too: one more session, converting the pricing goal alone.
    const goals = expectedGoals(filters);
    expect(await goalList(filters)).toEqual(
      goals.map((g, i) => ({
        sessions: g.sessions + 1,
        conversions: g.conversions + (GOALS[i]!.name === 'pricing' ? 1 : 0),
      })),
    );

    // Late events in sessions of that day: its partitions gain a part, its build is left.
    const late = lateEvents(
      events.filter((e) => e.timestamp.startsWith('2026-06-07')),
      5,
    );
    await h.ch.writer.insert({
      table: 'events',
      values: late,
      format: 'JSONEachRow',
      clickhouse_settings: { insert_deduplication_token: `session-pages-late-${tenant.siteId}` },
    });
    events = [...events, ...late];
    await answersMatch();
    expect((await metric('pathname', filters)).body.data.data.map((r) => r.value)).toContain('/late');
    expect((await titles()).map((r) => r.value)).not.toContain('Only in session_pages');

    // Merged into one part again: a new build of the new parts, the same answers.
    await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
    await answersMatch();
    const [day] = await h.ch.query<{ n: number }>(
      'SELECT count() AS n FROM session_pages_builds WHERE site_id = {s:UInt32} AND partition = {d:UInt32}',
      { s: tenant.siteId, d: DAY },
    );
    expect(Number(day?.n)).toBe(2);
  }, 90_000);

  it('keeps the built days a range read: a build taken away behind the service is read until they are forgotten', async () => {
    const filters = FILTERS[0]!;
    // A day no test before changed: one build, of its current parts.
    const day = INSIDE.find((d) => d !== DAY)!;
    const pricing = async () =>
      (await metric('pathname', filters)).body.data.data.find((r) => r.value === '/pricing')?.pageviews ?? 0;
    const truth = expected('pathname', filters).data.find((r) => r.value === '/pricing')?.pageviews ?? 0;
    // A session only the day's build holds: seen in the answer, it shows the build was read.
    await insertBuiltSession(day, 'Only in session_pages');
    expect(await pricing()).toBe(truth + 1_000_000);
    // The build's row taken away: the build kept from the last read is still read.
    await h.ch.command(
      `ALTER TABLE session_pages_builds DELETE WHERE site_id = {s:UInt32} AND partition = {d:UInt32}
       SETTINGS mutations_sync = 2`,
      { s: tenant.siteId, d: day },
    );
    expect(await pricing()).toBe(truth + 1_000_000);
    // Forgotten: the day has no build, is built again from its parts, without that session.
    forgetKeptReads(h.ch);
    expect(await pricing()).toBe(truth);
    await answersMatch();
  });

  it('is built ahead of the reads by the background builder, every settled day of its window', async () => {
    const { other, events: generated } = await otherSite(600, 42);
    const now = new Date('2026-06-20T12:00:00Z');
    const report = await buildSummaries(h.ch, other.siteId, { days: 12, now });
    const days = (
      await h.ch.query<{ partition: number }>(
        'SELECT DISTINCT partition FROM session_pages_builds WHERE site_id = {s:UInt32} ORDER BY partition',
        { s: other.siteId },
      )
    ).map((r) => Number(r.partition));
    const eventDays = [
      ...new Set(generated.map((e) => Number(e.timestamp.slice(0, 10).replaceAll('-', '')))),
    ];
    expect(report.pageDays).toBe(days.length);
    expect(days.length).toBeGreaterThanOrEqual(5);
    expect(eventDays).toEqual(expect.arrayContaining(days));
    // Nothing left to build.
    expect((await buildSummaries(h.ch, other.siteId, { days: 12, now })).pageDays).toBe(0);
  });

  // Layout 0 as migration 0021 finds builds, 2 as 0025 does (its rows were in `session_pages`),
  // 3 as 0026 does (its rows without their visitors), 4 as 0027 does (without their path bits).
  it.each([0, 2, 3, 4])(
    'never reads a build of an earlier layout (%i), and builds its day anew',
    async (layout) => {
      const day = 20260605;
      const old = `01900000-0000-7000-8000-0000000000d${layout}`;
      // The day's build replaced by one of that layout whose one session has a title it names:
      // were that build read, the title would show.
      await h.ch.command(
        `ALTER TABLE session_pages_builds DELETE WHERE site_id = {s:UInt32} AND partition = {d:UInt32}
       SETTINGS mutations_sync = 2`,
        { s: tenant.siteId, d: day },
      );
      forgetKeptReads(h.ch);
      const part = (table: string) =>
        `(SELECT name FROM system.parts WHERE database = currentDatabase() AND active
        AND table = '${table}' AND partition_id = toString({d:UInt32}))`;
      await h.ch.command(
        `INSERT INTO session_pages_builds (site_id, partition, facts_part, paths_part, build_id, span_start,
         span_end, sessions, title_names, layout)
       SELECT {s:UInt32}, {d:UInt32}, ${part('session_facts')}, ${part('session_paths')}, toUUID({b:String}),
         toDateTime64('2026-06-05 00:00:00', 3, 'UTC'), toDateTime64('2026-06-05 23:59:59', 3, 'UTC'), 1,
         ['Only in an old build'], {l:UInt8}`,
        { s: tenant.siteId, d: day, b: old, l: layout },
      );
      forgetKeptReads(h.ch);
      await insertBuiltSession(day, 'Only in an old build', old);
      const builds = async () =>
        h.ch.query<{ build: string; layout: number }>(
          `SELECT toString(build_id) AS build, layout FROM session_pages_builds
         WHERE site_id = {s:UInt32} AND partition = {d:UInt32} ORDER BY layout`,
          { s: tenant.siteId, d: day },
        );
      expect((await builds()).map((b) => [b.build, Number(b.layout)])).toEqual([[old, layout]]);

      const filters = FILTERS[0]!;
      const titles = (await metric('page_title', filters)).body.data;
      expect(titles.data.map((r) => r.value)).not.toContain('Only in an old build');
      expect(titles).toEqual(expected('page_title', filters));
      // Built anew in the current layout (its row replaces the old one once the two merge).
      const current = (await builds()).filter((b) => Number(b.layout) !== layout);
      expect(current).toHaveLength(1);
      expect(current[0]?.build).not.toBe(old);
    },
  );

  it('tests a day of more paths than bits by its bits where a path has one, by the paths where not', async () => {
    const filters = FILTERS[4]!;
    // Built by the answer; then the day's build gives bits to 63 of its paths only, some of the
    // filter's passing paths among them and some not, and its rows with other paths flag them.
    expect(await metric('pathname', filters)).toMatchObject({ status: 200 });
    const [build] = await h.ch.query<{ bits: string[]; flagged: number; sessions: number }>(
      `SELECT any(arrayMap(x -> toString(x), b.bit_paths)) AS bits,
         countIf(bitTest(r.path_bits, 63)) AS flagged, count() AS sessions
       FROM session_pages_by_country AS r
       INNER JOIN (SELECT build_id, bit_paths FROM session_pages_builds FINAL
         WHERE site_id = {s:UInt32} AND partition = {d:UInt32} AND layout = 5) AS b USING build_id
       WHERE r.site_id = {s:UInt32} AND r.partition = {d:UInt32}`,
      { s: tenant.siteId, d: MANY_DAY },
    );
    expect(build?.bits).toHaveLength(63);
    expect(Number(build?.flagged)).toBeGreaterThan(0);
    const hashes = await h.ch.query<{ path: string; h: string }>(
      `SELECT pathname AS path, toString(cityHash64(pathname)) AS h FROM site_paths FINAL
       WHERE site_id = {s:UInt32} AND (pathname = '/pricing' OR startsWith(pathname, '/many/1'))`,
      { s: tenant.siteId },
    );
    const withBit = hashes.filter((r) => build?.bits.includes(r.h)).map((r) => r.path);
    expect(withBit).toContain('/pricing');
    expect(withBit.length).toBeGreaterThan(1);
    expect(withBit.length).toBeLessThan(hashes.length);
    // Counted from the bits and the paths alike, as the events count them.
    await totalsMatch(filters);
    for (const parameter of PAGES) {
      expect({ parameter, ...(await metric(parameter, filters)).body.data }).toEqual({
        parameter,
        ...expected(parameter, filters),
      });
    }
    expect(await goalList(filters)).toEqual(expectedGoals(filters));
  });

  it('reads titles that share a hash from their events, each counted apart', async () => {
    // Two titles whose cityHash64 share their top 48 bits, each on one session's pricing page.
    const { other, events: all } = await otherSite(400, 43, (generated) =>
      ['Title 11199828', 'Title 17293041'].flatMap((title, i) =>
        titledSession(generated[0]!, Date.parse('2026-06-13T09:00:00Z') + i * 3_600_000, title),
      ),
    );
    const res = await otherTitles(other, all);
    for (const title of ['Title 11199828', 'Title 17293041'])
      expect(res.body.data.data.find((r) => r.value === title)).toMatchObject({ count: 1, pageviews: 1 });
    // The day of both sessions was built: the answer read it from the events for the clash alone.
    const [built] = await h.ch.query<{ n: number }>(
      `SELECT count() AS n FROM session_pages_builds
       WHERE site_id = {s:UInt32} AND partition = 20260613 AND has(title_names, 'Title 11199828')
         AND has(title_names, 'Title 17293041')`,
      { s: other.siteId },
    );
    expect(Number(built?.n)).toBe(1);
  });

  it('counts more path goals than one mask holds, each goal apart', async () => {
    const { other, events: all } = await otherSite(800, 45);
    const patterns = ['/docs/**', '/pricing', '/nowhere/*', '/docs/*', '/blog/**', '/checkout/*', '/', '/**'];
    // 70 goals, past the 64 of one mask, nine in a row per pattern: the second mask's six, all
    // of the last pattern, read from the first mask's bits would answer the first pattern.
    const goals: GoalDefinition[] = Array.from({ length: 70 }, (_, i) => ({
      goalType: 'path',
      config: { pathPattern: patterns[Math.floor(i / 9) % patterns.length]! },
    }));
    const ids = await addGoals(other, goals);
    const range = { startDate: '2026-06-11', endDate: '2026-06-15', timeZone: 'UTC' };
    for (const filters of FILTERS) {
      expect({ filters, answer: await goalCounts(other, range, filters, ids) }).toEqual({
        filters,
        answer: referenceGoals(all, other.siteId, range, filters, goals),
      });
    }
    // A session only a build holds, on the pricing page: one more session, and one more
    // conversion of each goal whose pattern matches the page (the last pattern's six in the
    // second mask among them). Seen in the answer, it shows the rows were read.
    const [day] = await h.ch.query<{ partition: number }>(
      'SELECT min(partition) AS partition FROM session_pages_builds WHERE site_id = {s:UInt32}',
      { s: other.siteId },
    );
    await insertBuiltSession(Number(day?.partition), 'A built title', '', other.siteId);
    const pricing = { ...all[0]!, type: 'pageview' as const, pathname: '/pricing' };
    const filters = FILTERS[0]!;
    expect(await goalCounts(other, range, filters, ids)).toEqual(
      referenceGoals(all, other.siteId, range, filters, goals).map((g, i) => ({
        sessions: g.sessions + 1,
        conversions: g.conversions + (convertsGoal(pricing, goals[i]!) ? 1 : 0),
      })),
    );
  });

  it('reads a session with more pageviews of one title than its number holds from its events', async () => {
    const { other, events: all } = await otherSite(200, 44, (generated) =>
      titledSession(generated[0]!, Date.parse('2026-06-13T09:00:00Z'), 'A much viewed title', 65_536),
    );
    const res = await otherTitles(other, all);
    expect(res.body.data.data.find((r) => r.value === 'A much viewed title')).toMatchObject({
      count: 1,
      pageviews: 65_536,
    });
    // Its row is built, marked to be read from its events.
    const [row] = await h.ch.query<{ tied: number }>(
      `SELECT tied FROM session_pages_by_country WHERE site_id = {s:UInt32} AND has(titles, 'A much viewed title')`,
      { s: other.siteId },
    );
    expect(Number(row?.tied)).toBe(1);
  });
});

/** Another site's filtered page titles (the first filters) over 11-15 June, as the reference has them. */
async function otherTitles(other: { siteId: number; key: string }, all: StoredEvent[]) {
  const range = { startDate: '2026-06-11', endDate: '2026-06-15', timeZone: 'UTC' };
  const filters = FILTERS[0]!;
  const res = await h.json<{ data: Answer }>(
    `/api/sites/${other.siteId}/metric?${query({ ...range, filters }, { parameter: 'page_title', limit: '1000' })}`,
    { key: other.key },
  );
  expect(res.status).toBe(200);
  expect(res.body.data).toEqual(
    ref.metric(ref.selection(all, other.siteId, full({ ...range, filters })), 'page_title'),
  );
  return res;
}

/**
 * Another site with `count` generated events over five days of June (and `extra` ones made
 * from them), stored and each day compacted into one part.
 */
async function otherSite(count: number, seed: number, extra: (g: StoredEvent[]) => StoredEvent[] = () => []) {
  const other = await h.tenant();
  const generated = [
    ...generateEvents({
      siteId: other.siteId,
      events: count,
      days: 5,
      end: new Date('2026-06-15T12:00:00Z'),
      seed,
    }),
  ];
  const all = [...generated, ...extra(generated)];
  await insertEvents(h.ch, all);
  await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
  return { other, events: all };
}

/** A session in the US of `pageviews` pageviews 10 ms apart, on the pricing page under `title`, from `start`. */
function titledSession(like: StoredEvent, start: number, title: string, pageviews = 1): StoredEvent[] {
  const sessionId = uuidv7FromSeed(start, `titled session ${title}`);
  return Array.from({ length: pageviews }, (_, i) => {
    const iso = new Date(start + i * 10).toISOString();
    return {
      ...like,
      timestamp: `${iso.slice(0, 10)} ${iso.slice(11, 23)}`,
      event_id: uuidv7FromSeed(start + i * 10, `titled ${title} ${i}`),
      session_id: sessionId,
      user_id: '00000000000000c2',
      type: 'pageview',
      event_name: '',
      properties: '{}',
      props: {},
      country: 'US',
      pathname: '/pricing',
      page_title: title,
    };
  });
}

it('holds titles as hashes, unsure sessions flagged, attributes as dictionaries, builds by layout, rows by country, their visitors, their paths as bits (0021-0027)', async () => {
  const columns = async (table: string) =>
    new Map(
      (
        await h.ch.query<{ name: string; type: string }>(
          `SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = {t:String}`,
          { t: h.ch.cluster ? `${table}${LOCAL_SUFFIX}` : table },
        )
      ).map((c) => [c.name, c.type]),
    );
  const pages = await columns('session_pages_by_country');
  expect([...pages.keys()]).toEqual(expect.arrayContaining(['title_hash_counts', 'unsure']));
  expect(pages.has('title_counts')).toBe(false);
  // The rows of 0016-0023, column for column, sorted within a build by the first event's country,
  // with each session's visitor after its end (0026).
  const earlier = [...(await columns('session_pages'))];
  const end = earlier.findIndex(([name]) => name === 'session_end') + 1;
  // And each session's paths as bits (0027), last.
  expect([...pages]).toEqual([
    ...earlier.slice(0, end),
    ['user_key', 'UInt64'],
    ...earlier.slice(end),
    ['path_bits', 'UInt64'],
  ]);
  const [table] = await h.ch.query<{ key: string }>(
    `SELECT sorting_key AS key FROM system.tables WHERE database = currentDatabase() AND name = {t:String}`,
    { t: h.ch.cluster ? `session_pages_by_country${LOCAL_SUFFIX}` : 'session_pages_by_country' },
  );
  expect(table?.key).toBe('site_id, partition, build_id, first_event.country, session_id');
  // Every attribute of the first event, and only those, dictionary-encoded.
  expect(pages.get('first_event')?.match(/LowCardinality\(String\)/g)).toHaveLength(9);
  expect([...(await columns('session_pages_builds')).keys()]).toEqual(
    expect.arrayContaining(['title_names', 'layout', 'bit_paths']),
  );
});
