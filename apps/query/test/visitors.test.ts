import {
  type ClickHouse,
  compactSessionDays,
  forgetKeptReads,
  generateEvents,
  insertEvents,
  LOCAL_SUFFIX,
  planClickHouseMigrations,
  rangeVisitors,
  type StoredEvent,
} from '@trackhouse/clickhouse';
import { uuidv7FromSeed } from '@trackhouse/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLICKHOUSE_MIGRATIONS } from '../../../test/helpers';
import { expectBackfillAsView } from './backfill';
import { createQueryHarness, type QueryHarness } from './harness';
import { full, query } from './params';
import { lateEvents } from './traffic-data';
import * as ref from './traffic-reference';

let h: QueryHarness;
let tenant: Awaited<ReturnType<QueryHarness['tenant']>>;
let events: StoredEvent[];

const DAY_MS = 86_400_000;
/** Days since 1970 of a UTC date. */
const dayOf = (date: string) => Date.parse(`${date}T00:00:00Z`) / DAY_MS;
const stamp = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 23);

/** A pageview like `like` at `ms` by visitor `userId`, its event and session ids seeded by `seeds`. */
function visit(
  like: StoredEvent,
  ms: number,
  seeds: [event: string, session: string],
  userId: string,
  pathname: string,
): StoredEvent {
  return {
    ...like,
    timestamp: stamp(ms),
    event_id: uuidv7FromSeed(ms, seeds[0]),
    session_id: uuidv7FromSeed(ms, seeds[1]),
    user_id: userId,
    type: 'pageview',
    event_name: '',
    properties: '{}',
    props: {},
    pathname,
  };
}

/** Windows of `visitor_days` (migration 0009) start every 32 days: the first ones of 2026. */
const WINDOW_STARTS = [640, 641, 642, 643, 644, 645].map((block) => block * 32);

/**
 * One visitor's pageviews at the first and last millisecond of the UTC days around each window
 * start of the data (a bit's edges), each its own session.
 */
function windowEdges(like: StoredEvent): StoredEvent[] {
  return WINDOW_STARTS.flatMap((start, w) =>
    [start * DAY_MS - 1, start * DAY_MS, (start + 1) * DAY_MS - 1].map((ms, i) =>
      visit(
        like,
        ms,
        [`edge ${w} ${i}`, `edge session ${w} ${i}`],
        `00000000000e${String(w).padStart(2, '0')}${i}0`,
        '/edge',
      ),
    ),
  );
}

/**
 * Visitors of February and March 1970: the days before day 64, left out of `visitor_days`,
 * are read from their events (day 50: one after a range of those days ends).
 */
function early(like: StoredEvent): StoredEvent[] {
  return [
    [40, 'a'],
    [40, 'b'],
    [50, 'd'],
    [70, 'b'],
    [70, 'c'],
  ].map(([day, visitor], i) => {
    const ms = Number(day) * DAY_MS + 3_600_000;
    return visit(like, ms, [`early ${i}`, `early session ${i}`], `000000000000197${visitor}`, '/early');
  });
}

beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '1000000' });
  tenant = await h.tenant();
  const other = await h.tenant();
  // 130 days across six windows, returning visitors on many of them.
  const generated = [
    ...generateEvents({
      siteId: tenant.siteId,
      events: 5000,
      days: 130,
      end: new Date('2026-06-20T12:00:00Z'),
      seed: 41,
    }),
  ];
  const noise = [
    ...generateEvents({
      siteId: other.siteId,
      events: 500,
      days: 130,
      end: new Date('2026-06-20T12:00:00Z'),
      seed: 42,
    }),
  ];
  events = [...generated, ...windowEdges(generated[0]!), ...early(generated[0]!)];
  await insertEvents(h.ch, [...events, ...noise]);
  await compactSessionDays(h.ch, new Date('2027-01-01T00:00:00Z'));
  // Late events (their visitors' rows gain a bit), and a replayed batch of them, stored once.
  const late = lateEvents(generated, 50);
  for (let attempt = 0; attempt < 2; attempt++)
    await h.ch.writer.insert({
      table: 'events',
      values: late,
      format: 'JSONEachRow',
      clickhouse_settings: { insert_deduplication_token: `visitors-late-${tenant.siteId}` },
    });
  events.push(...late);
}, 120_000);
afterAll(async () => {
  await h.close();
});

/** Ranges of 7 to 110 days starting on both sides of window starts, in zones of every offset. */
const RANGES = [
  ['2026-02-16', '2026-02-22', 'UTC'],
  ['2026-02-15', '2026-03-18', 'UTC'],
  ['2026-02-14', '2026-03-18', 'UTC'],
  ['2026-02-17', '2026-03-19', 'Asia/Kolkata'],
  ['2026-03-01', '2026-03-31', 'America/New_York'],
  ['2026-03-19', '2026-04-20', 'Europe/Berlin'],
  ['2026-03-20', '2026-05-23', 'Asia/Kathmandu'],
  ['2026-04-01', '2026-04-30', 'Australia/Adelaide'],
  ['2026-04-21', '2026-05-24', 'Pacific/Chatham'],
  ['2026-02-20', '2026-06-10', 'America/St_Johns'],
  ['2026-05-20', '2026-06-30', 'UTC'],
].map(([startDate, endDate, timeZone]) => ({
  startDate: startDate!,
  endDate: endDate!,
  timeZone: timeZone!,
}));

type Range = (typeof RANGES)[number];
const overview = (range: Partial<Range>) =>
  h.json<{ data: ReturnType<typeof ref.overview> }>(`/api/sites/${tenant.siteId}/overview?${query(range)}`, {
    key: tenant.key,
  });

describe('distinct visitors from the days they have events on', () => {
  it.each(RANGES)(
    'counts the visitors of $startDate to $endDate in $timeZone as the events do',
    async (range) => {
      const expected = ref.overview(ref.selection(events, tenant.siteId, full(range)));
      expect(await rangeVisitors(h.ch, tenant.siteId, full(range))).toBe(expected.users);
      const res = await overview(range);
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual(expected);
    },
  );

  it.each([
    ['2026-03-14', '2026-03-14', 'UTC'],
    ['2026-03-14', '2026-03-14', 'Asia/Kolkata'],
    ['2026-03-14', '2026-03-15', 'America/New_York'],
    ['1970-01-01', '1970-03-31', 'UTC'],
    ['1970-02-10', '1970-02-10', 'UTC'],
  ])(
    'counts the visitors of a short or early range (%s to %s in %s) as the events do',
    async (startDate, endDate, timeZone) => {
      const range = { startDate, endDate, timeZone };
      const expected = ref.overview(ref.selection(events, tenant.siteId, full(range))).users;
      expect(expected).toBeGreaterThan(0);
      expect(await rangeVisitors(h.ch, tenant.siteId, full(range))).toBe(expected);
    },
  );

  it('counts exactly from a window merged into one part with newer parts beside it', async () => {
    await h.ch.command('OPTIMIZE TABLE visitor_days FINAL');
    // Each window's partition is one merged part: counted as its rows (rangeVisitors).
    const split = () =>
      h.ch.query<{ partition: string }>(
        `SELECT partition_id AS partition FROM system.parts
         WHERE database = currentDatabase() AND table = 'visitor_days' AND active
         GROUP BY partition_id HAVING count() > 1 OR max(level) = 0`,
      );
    expect(await split()).toEqual([]);
    const merged = await Promise.all(RANGES.map((range) => rangeVisitors(h.ch, tenant.siteId, full(range))));
    expect(merged).toEqual(
      RANGES.map((r) => ref.overview(ref.selection(events, tenant.siteId, full(r))).users),
    );
    // Newer parts beside the merged ones: late events of visitors the merged parts hold, two inserts.
    const late = lateEvents(events.slice(2000), 30);
    await insertEvents(h.ch, late.slice(0, 15));
    await insertEvents(h.ch, late.slice(15));
    events.push(...late);
    expect((await split()).length).toBeGreaterThan(0);
    for (const range of RANGES) {
      const expected = ref.overview(ref.selection(events, tenant.siteId, full(range)));
      expect(await rangeVisitors(h.ch, tenant.siteId, full(range))).toBe(expected.users);
      expect((await overview(range)).body.data).toEqual(expected);
    }
  });

  it('reads the whole days of a long range from their bits, the partial ones from the events', async () => {
    const site = await h.tenant();
    const like = { ...events[0]!, site_id: site.siteId };
    await insertEvents(h.ch, windowEdges(like));
    // Berlin in March is an hour ahead: 2 to 15 March holds the UTC days 2 to 14 March whole.
    const range = { startDate: '2026-03-02', endDate: '2026-03-15', timeZone: 'Europe/Berlin' };
    const users = async (r = range) =>
      (
        await h.json<{ data: { users: number } }>(`/api/sites/${site.siteId}/overview?${query(r)}`, {
          key: site.key,
        })
      ).body.data.users;
    const before = await users();
    expect(before).toBe(ref.overview(ref.selection(windowEdges(like), site.siteId, full(range))).users);
    // Rows of visitors without events: seen only where the table is read, and by their bits.
    const row = (key: bigint, day: number) => {
      const block = Math.floor(day / 32);
      return [
        {
          site_id: site.siteId,
          block,
          user_key: key.toString(),
          days: (1n << BigInt(day - 32 * block)).toString(),
        },
        {
          site_id: site.siteId,
          block: block - 1,
          user_key: key.toString(),
          days: (1n << BigInt(day - 32 * block + 32)).toString(),
        },
      ];
    };
    await h.ch.writer.insert({
      table: 'visitor_days',
      values: [
        ...row(0xfeed01n, dayOf('2026-03-02')),
        ...row(0xfeed02n, dayOf('2026-03-14')),
        // The range's first UTC day is partial: read from its events.
        ...row(0xfeed03n, dayOf('2026-03-01')),
        // So is its last, but none of that day's events lies after the range's end (23:00):
        // read from its bits.
        ...row(0xfeed04n, dayOf('2026-03-15')),
      ],
      format: 'JSONEachRow',
    });
    expect(await users()).toBe(before + 3);
    // An event after the range's end on its last day: that day is read from its events again.
    const after = {
      ...windowEdges(like)[0]!,
      timestamp: '2026-03-15 23:30:00.000',
      user_id: '00000000000af7e1',
    };
    await insertEvents(h.ch, [{ ...after, event_id: uuidv7FromSeed(1, 'after the end') }]);
    expect(await users()).toBe(before + 2);
    // A range under a week counts its sessions' visitors: the rows are not read.
    const week = { ...range, endDate: '2026-03-07' };
    expect(await users(week)).toBe(
      ref.overview(ref.selection(windowEdges(like), site.siteId, full(week))).users,
    );
  });

  it("reads an ended range's visitors once while the parts it counts stand, again when one changes", async () => {
    const site = await h.tenant();
    const like = { ...events[0]!, site_id: site.siteId };
    const stored = windowEdges(like);
    await insertEvents(h.ch, stored);
    forgetKeptReads(h.ch);
    let sent = 0;
    const counting: ClickHouse = {
      ...h.ch,
      query: (sql, params, settings) => {
        sent++;
        return h.ch.query(sql, params, settings);
      },
    };
    const read = async (range: Range) => {
      sent = 0;
      const users = await rangeVisitors(counting, site.siteId, full(range));
      expect(users).toBe(ref.overview(ref.selection(stored, site.siteId, full(range))).users);
      return sent;
    };
    const range = { startDate: '2026-03-01', endDate: '2026-03-31', timeZone: 'Europe/Berlin' };
    // The engine's own merges held meanwhile: one between two reads gives the parts new names,
    // and the second read counts again, as it should.
    const merges = (verb: 'STOP' | 'START') =>
      Promise.all(['visitor_days', 'events'].map((t) => h.ch.command(`SYSTEM ${verb} MERGES ${t}`)));
    await merges('STOP');
    try {
      expect(await read(range)).toBeGreaterThan(1);
      // Only the parts are looked up.
      expect(await read(range)).toBe(1);
      // A new visitor of the range: a new part of its events' month and of its window.
      const late = { ...stored[0]!, timestamp: '2026-03-20 10:00:00.000', user_id: '00000000000fe7e1' };
      stored.push({ ...late, event_id: uuidv7FromSeed(2, 'a late visitor') });
      await insertEvents(h.ch, [stored.at(-1)!]);
      expect(await read(range)).toBeGreaterThan(1);
      expect(await read(range)).toBe(1);
    } finally {
      await merges('START');
    }
    // Merged: new parts, the same visitors, counted again.
    await h.ch.command('OPTIMIZE TABLE visitor_days FINAL');
    expect(await read(range)).toBeGreaterThan(1);
    // A range not yet ended everywhere counts what was written since at every read (splitCount).
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    const recent = { startDate: day(Date.now() - 20 * DAY_MS), endDate: day(Date.now()), timeZone: 'UTC' };
    expect(await read(recent)).toBeGreaterThan(1);
    expect(await read(recent)).toBeGreaterThan(1);
  });

  it("keeps a running range's visitors of its merged window and first partial day, counting what was written since at every read", async () => {
    const site = await h.tenant();
    const now = Date.now();
    const generated = [
      ...generateEvents({
        siteId: site.siteId,
        events: 3000,
        days: 20,
        end: new Date(now - 60_000),
        seed: 44,
      }),
    ];
    const visitor = (ms: number, i: number) =>
      visit(
        generated[0]!,
        ms,
        [`new visitor ${i}`, `new visitor session ${i}`],
        `00000000000c0de${i}`,
        '/new',
      );
    // A visitor tomorrow before and after the end of Kolkata's range below: its last UTC day is
    // read from the events, those before the end counted beside the merged part.
    const tomorrow = (Math.floor(now / DAY_MS) + 1) * DAY_MS;
    // Two visitors seen only in the partial UTC day Kolkata's range starts with (at 21:00 UTC
    // the day before its first date), one of them seen again today after the merge below.
    const kolkataHead = Math.floor((now - 10 * DAY_MS) / DAY_MS) * DAY_MS - 3 * 3_600_000;
    const stored = [
      ...generated,
      visitor(tomorrow + 10 * 3_600_000, 1),
      visitor(tomorrow + 20 * 3_600_000, 2),
      visitor(kolkataHead, 4),
      visitor(kolkataHead + 60_000, 5),
    ];
    await insertEvents(h.ch, stored);
    await h.ch.command('OPTIMIZE TABLE visitor_days FINAL');
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    // Ranges ending today or tomorrow, starting on a partial UTC day (Berlin: an hour of it;
    // Kolkata: five and a half), or a whole one (UTC).
    const ranges = [
      { startDate: day(now - 14 * DAY_MS), endDate: day(now), timeZone: 'Europe/Berlin' },
      { startDate: day(now - 10 * DAY_MS), endDate: day(now + DAY_MS), timeZone: 'Asia/Kolkata' },
      { startDate: day(now - 8 * DAY_MS), endDate: day(now), timeZone: 'UTC' },
    ];
    const sent: string[] = [];
    const watched: ClickHouse = {
      ...h.ch,
      query: (sql, params, settings) => {
        sent.push(sql);
        return h.ch.query(sql, params, settings);
      },
    };
    let all = stored;
    /** Every range's visitors against the reference; how many read the merged part whole. */
    const read = async () => {
      sent.length = 0;
      for (const range of ranges)
        expect({ range, users: await rangeVisitors(watched, site.siteId, full(range)) }).toEqual({
          range,
          users: ref.overview(ref.selection(all, site.siteId, full(range))).users,
        });
      return sent.filter((sql) => sql.includes('count() - countIf(user_key IN')).length;
    };
    // On a cluster parts are per shard and no part is taken as merged: the counts alone are checked.
    const whole = h.ch.cluster ? 0 : ranges.length;
    expect(await read()).toBe(whole);
    expect(await read()).toBe(0);
    // Written since the merge, in two parts: late events of the merged part's visitors, a new
    // visitor today, and one of the starting partial day's.
    const late = [
      ...lateEvents(generated.slice(-1000), 20),
      visitor(now - 30_000, 3),
      { ...visitor(now - 20_000, 5), event_id: uuidv7FromSeed(now, 'visitor 5 again') },
    ];
    await insertEvents(h.ch, late.slice(0, 10));
    await insertEvents(h.ch, late.slice(10));
    all = [...stored, ...late];
    expect(await read()).toBe(0);
    // Merged again: a part of another name, read whole once.
    await h.ch.command('OPTIMIZE TABLE visitor_days FINAL');
    expect(await read()).toBe(whole);
    expect(await read()).toBe(0);
    // The window merged again right after the merged part was looked up: its rows all lie in
    // another part; the count finds the part it named gone, and counts again. With a visitor
    // written since (beside the part), and with nothing (the part alone, not yet kept).
    const raced = async () => {
      let merge = !h.ch.cluster;
      const merging: ClickHouse = {
        ...h.ch,
        query: async (sql, params, settings) => {
          const rows = await h.ch.query(sql, params, settings);
          if (merge && sql.includes("groupArrayIf(name, table = 'events')")) {
            merge = false;
            await h.ch.command('OPTIMIZE TABLE visitor_days FINAL');
          }
          return rows as never;
        },
      };
      expect(await rangeVisitors(merging, site.siteId, full(ranges[0]!))).toBe(
        ref.overview(ref.selection(all, site.siteId, full(ranges[0]!))).users,
      );
      expect(merge).toBe(false);
    };
    all = [...all, visitor(now - 10_000, 6)];
    await insertEvents(h.ch, [all.at(-1)!]);
    await raced();
    await raced();
  });

  it("stores by the migration's backfill what the view stores, and running it again changes nothing", async () => {
    await expectBackfillAsView(h.ch, {
      migration: '0009',
      table: 'visitor_days',
      siteId: tenant.siteId,
      stored: () =>
        h.ch.query<{ block: number; user_key: string; days: string }>(
          `SELECT block, toString(user_key) AS user_key, toString(groupBitOr(days)) AS days FROM visitor_days
           WHERE site_id = {s:UInt32} GROUP BY block, user_key ORDER BY block, user_key`,
          { s: tenant.siteId },
        ),
    });
    const range = RANGES[9]!;
    expect((await overview(range)).body.data).toEqual(
      ref.overview(ref.selection(events, tenant.siteId, full(range))),
    );
  });
  it("stores by visitor_quarters' backfill what its view stores, and running it again changes nothing", async () => {
    const stored = () =>
      h.ch.query<{ quarter: number; keys: string[] }>(
        // Keys as text: 64-bit keys lose digits as JSON numbers.
        `SELECT quarter, arrayMap(k -> toString(k), arraySort(groupUniqArray(user_key))) AS keys FROM visitor_quarters
         WHERE site_id = {s:UInt32} GROUP BY quarter ORDER BY quarter`,
        { s: tenant.siteId },
      );
    // One row per visitor and quarter hour of its events, as the reference has them.
    const expected = new Map<number, Set<string>>();
    for (const e of events) {
      const quarter = Math.floor(Date.parse(`${e.timestamp.replace(' ', 'T')}Z`) / 900_000);
      const keys = expected.get(quarter) ?? new Set();
      keys.add(BigInt(`0x${e.user_id}`).toString());
      expected.set(quarter, keys);
    }
    expect((await stored()).map((r) => [Number(r.quarter), [...r.keys].sort()])).toEqual(
      [...expected.entries()].sort((a, b) => a[0] - b[0]).map(([q, keys]) => [q, [...keys].sort()]),
    );
    await expectBackfillAsView(h.ch, {
      migration: '0011',
      table: 'visitor_quarters',
      siteId: tenant.siteId,
      stored,
    });
  });
  it("computes by visitor_hours' backfill what its view stores", async () => {
    const stored = () =>
      h.ch.query<{ day: number; key: string; hours: number }>(
        `SELECT day, toString(user_key) AS key, groupBitOr(hours) AS hours FROM visitor_hours
         WHERE site_id = {s:UInt32} GROUP BY day, user_key`,
        { s: tenant.siteId },
      );
    // One row per visitor and UTC day of its events, its hours as bits, as the reference has them.
    const expected = new Map<string, number>();
    for (const e of events) {
      const ms = Date.parse(`${e.timestamp.replace(' ', 'T')}Z`);
      const at = `${Math.floor(ms / 86_400_000)} ${BigInt(`0x${e.user_id}`)}`;
      expected.set(at, ((expected.get(at) ?? 0) | (1 << Math.floor((ms % 86_400_000) / 3_600_000))) >>> 0);
    }
    const rows = (found: { day: number; key: string; hours: number }[]) =>
      found.map((r) => `${r.day} ${r.key} ${r.hours}`).sort();
    expect(rows(await stored())).toEqual([...expected].map(([at, hours]) => `${at} ${hours}`).sort());
    // The backfill's SELECT (in the handle's form), for this site: the table is partitioned by
    // day, so deleting and writing again the suite's months of days, as the other backfills'
    // tests do, writes a part per day for tens of seconds. Its rows add up by OR, so storing them
    // twice changes nothing.
    const [planned] = (await planClickHouseMigrations(CLICKHOUSE_MIGRATIONS, h.ch.cluster)).filter((m) =>
      m.file.startsWith('0017_'),
    );
    const [insert] = planned!.statements.filter((s) => /^INSERT\s/i.test(s));
    expect(insert).toMatch(/^INSERT\s+INTO\s+visitor_hours\s/i);
    const select = insert!.replace(/^INSERT\s+INTO\s+\w+\s+/i, '').replace(/\sSETTINGS\s[\s\S]*$/i, '');
    const backfilled = await h.ch.query<{ day: number; key: string; hours: number }>(
      `SELECT day, toString(user_key) AS key, groupBitOr(hours) AS hours FROM (${select})
       WHERE site_id = {s:UInt32} GROUP BY day, user_key`,
      { s: tenant.siteId },
    );
    expect(rows(backfilled)).toEqual(rows(await stored()));
  });
  it("stores by sessions_by_visitor's backfill what its view stores, and running it again changes nothing", async () => {
    const stored = () =>
      h.ch.query<{
        key: string;
        session: string;
        start: string;
        end: string;
        pageviews: number;
        all: number;
        iid: string;
      }>(
        `SELECT toString(user_key) AS key, toString(session_id) AS session, toString(min(session_start)) AS start,
           toString(max(session_end)) AS end, length(groupUniqArrayArray(pageview_ids)) AS pageviews,
           length(groupUniqArrayArray(event_ids)) AS all, tupleElement(max(identified), 3) AS iid
         FROM sessions_by_visitor WHERE site_id = {s:UInt32}
         GROUP BY user_key, session_id ORDER BY key, session`,
        { s: tenant.siteId },
      );
    // One row per visitor and session, as the events have them (the ids' latest not checked
    // here: the engine orders event ids as UUIDs, the backfill must only agree with the view).
    const expected = new Map<string, { start: string; end: string; pageviews: number; all: number }>();
    for (const e of events) {
      const at = `${BigInt(`0x${e.user_id}`)} ${e.session_id}`;
      const s = expected.get(at) ?? { start: e.timestamp, end: e.timestamp, pageviews: 0, all: 0 };
      expected.set(at, {
        // The same text form throughout: text order is time order.
        start: [s.start, e.timestamp].sort()[0]!,
        end: [s.end, e.timestamp].sort()[1]!,
        pageviews: s.pageviews + (e.type === 'pageview' ? 1 : 0),
        all: s.all + 1,
      });
    }
    const rows = (await stored()).map((r) => [`${r.key} ${r.session}`, r.start, r.end, r.pageviews, r.all]);
    expect(rows.sort()).toEqual(
      [...expected].map(([at, s]) => [at, s.start, s.end, s.pageviews, s.all]).sort(),
    );
    await expectBackfillAsView(h.ch, {
      migration: '0020',
      table: 'sessions_by_visitor',
      siteId: tenant.siteId,
      stored,
    });
  });
  it('keeps the sessions by visitor in granules of 1,024 rows, the table of 0019 dropped', async () => {
    // Where the rows lie: a cluster stores them in the local table of each node.
    const [made] = await h.ch.query<{ q: string }>(
      `SELECT create_table_query AS q FROM system.tables
       WHERE database = currentDatabase() AND name = {name:String}`,
      { name: h.ch.cluster ? `sessions_by_visitor${LOCAL_SUFFIX}` : 'sessions_by_visitor' },
    );
    expect(made?.q).toMatch(/ORDER BY \(site_id, user_key, session_id\)/);
    expect(made?.q).toMatch(/index_granularity = 1024\b/);
    const [old] = await h.ch.query<{ n: number }>(
      `SELECT count() AS n FROM system.tables
       WHERE database = currentDatabase() AND startsWith(name, 'visitor_sessions')`,
    );
    expect(Number(old?.n)).toBe(0);
  });
});
