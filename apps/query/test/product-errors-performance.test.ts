import { type CommonParams, generateEvents, insertEvents, type StoredEvent } from '@trackhouse/clickhouse';
import { uuidv7FromSeed } from '@trackhouse/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueryHarness, type QueryHarness } from './harness';
import { f, full, query } from './params';
import * as ref from './product-reference-errperf';
import { selectEvents } from './reference';
import type { Bucket } from './traffic-reference';

let h: QueryHarness;
let tenant: Awaited<ReturnType<QueryHarness['tenant']>>;
let exact: Awaited<ReturnType<QueryHarness['tenant']>>;
let events: StoredEvent[];

const chTime = (iso: string) => iso.replace('T', ' ').replace('Z', '');

/**
 * Hand-made events on 2026-03-10 (UTC): error properties under the names other clients use, a
 * value that is no number, an error without a name, names tying on count, a performance event
 * measuring nothing, a button without text.
 */
function craftedEvents(template: StoredEvent): StoredEvent[] {
  let n = 0;
  const make = (iso: string, type: StoredEvent['type'], name: string, props: Record<string, string>) => {
    const at = Date.parse(iso);
    return {
      ...template,
      timestamp: chTime(iso),
      event_id: uuidv7FromSeed(at, `crafted-${n++}`),
      session_id: uuidv7FromSeed(at, `crafted-session-${iso.slice(0, 13)}`),
      type,
      event_name: name,
      properties: JSON.stringify(props),
      props,
    } satisfies StoredEvent;
  };
  return [
    make('2026-03-10T10:00:00.000Z', 'error', 'LegacyError', {
      message: 'old browser',
      fileName: 'https://example.com/old.js',
      lineno: '17',
      colno: '4',
    }),
    make('2026-03-10T10:00:00.000Z', 'error', 'LegacyError', {
      message: 'old browser',
      lineNumber: '21',
      columnNumber: 'n/a',
      line_number: 'unknown',
    }),
    make('2026-03-10T10:05:00.000Z', 'error', '', { message: 'no name' }),
    make('2026-03-10T11:00:00.000Z', 'error', 'Zeta', { message: 'z' }),
    make('2026-03-10T11:00:01.000Z', 'error', 'Zeta', { message: 'z' }),
    make('2026-03-10T11:00:02.000Z', 'error', 'Alpha', { message: 'a' }),
    make('2026-03-10T12:00:02.000Z', 'error', 'Alpha', { message: 'a' }),
    { ...make('2026-03-10T12:30:00.000Z', 'performance', 'web-vitals', {}), properties: '{}' },
    make('2026-03-10T12:31:00.000Z', 'button_click', '', { plan: 'free' }),
    make('2026-03-10T12:32:00.000Z', 'button_click', '', { text: 'Zeta' }),
    make('2026-03-10T12:33:00.000Z', 'button_click', '', { text: 'Alpha' }),
  ];
}

beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '1000000' });
  tenant = await h.tenant();
  exact = await h.tenant();
  const other = await h.tenant();
  const site = tenant.siteId;
  // Around the spring changes (US March 8, EU March 29, Adelaide April 5) and the autumn ones
  // (EU October 25, US November 1).
  const spring = [
    ...generateEvents({
      siteId: site,
      events: 5000,
      days: 45,
      end: new Date('2026-04-08T12:00:00Z'),
      seed: 31,
    }),
  ];
  const autumn = [
    ...generateEvents({
      siteId: site,
      events: 1500,
      days: 12,
      end: new Date('2026-11-03T12:00:00Z'),
      seed: 32,
    }),
  ];
  const base = [...spring, ...autumn];
  const product = ref.productEvents(base, 33);
  const crafted = craftedEvents({ ...spring[0]!, site_id: site });
  const noise = generateEvents({
    siteId: other.siteId,
    events: 600,
    days: 45,
    end: new Date('2026-04-08Z'),
    seed: 34,
  });
  const noiseList = [...noise];
  const vitals = (lcp: number | null, cls: number | null, inp: number | null, fcp = 1800): StoredEvent => ({
    ...spring[0]!,
    site_id: exact.siteId,
    event_id: uuidv7FromSeed(Date.parse('2026-03-10T00:00:00Z'), `exact-${lcp}-${cls}-${inp}`),
    type: 'performance',
    event_name: 'web-vitals',
    properties: '{}',
    props: {},
    lcp,
    cls,
    inp,
    fcp,
    ttfb: 0,
  });
  await insertEvents(h.ch, [
    ...base,
    ...product,
    ...crafted,
    ...noiseList,
    ...ref.productEvents(noiseList, 35),
    vitals(4000, 0, null),
    vitals(1000, 0, null),
    vitals(3000, 0.3, null),
    vitals(2000, null, null, 1000),
  ]);
  events = [...base, ...product, ...crafted];
}, 120_000);
afterAll(async () => {
  await h.close();
});

const get = async <T>(path: string, c: Partial<CommonParams>, extra: Record<string, string> = {}) => {
  const res = await h.json<T>(`/api/sites/${tenant.siteId}/${path}?${query(c, extra)}`, { key: tenant.key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
};

type Scenario = Partial<CommonParams> & { buckets: Bucket[]; dimension: string };
const SCENARIOS: Scenario[] = [
  { buckets: ['day', 'week', 'month'], dimension: 'pathname' },
  {
    startDate: '2026-03-01',
    endDate: '2026-03-15',
    timeZone: 'America/New_York',
    buckets: ['day', 'hour'],
    dimension: 'country',
  },
  {
    startDate: '2026-03-08',
    endDate: '2026-03-08',
    timeZone: 'America/New_York',
    buckets: ['fifteen_minutes'],
    dimension: 'browser',
  },
  {
    startDate: '2026-03-20',
    endDate: '2026-04-07',
    timeZone: 'Asia/Kolkata',
    buckets: ['day', 'hour'],
    dimension: 'device_type',
  },
  {
    startDate: '2026-04-01',
    endDate: '2026-04-07',
    timeZone: 'Australia/Adelaide',
    buckets: ['hour', 'day'],
    dimension: 'operating_system',
  },
  {
    startDate: '2026-10-24',
    endDate: '2026-11-02',
    timeZone: 'Europe/Berlin',
    buckets: ['hour', 'day'],
    dimension: 'pathname',
  },
  {
    startDate: '2026-03-01',
    endDate: '2026-04-08',
    timeZone: 'Europe/Berlin',
    filters: [f('device_type', 'equals', 'desktop'), f('pathname', 'not_contains', '/blog')],
    buckets: ['day', 'week'],
    dimension: 'browser',
  },
  {
    timeZone: 'Asia/Kolkata',
    filters: [f('entry_page', 'regex', '^/(pricing|docs)'), f('user_id', 'not_equals', 'customer-9')],
    buckets: ['day'],
    dimension: 'pathname',
  },
];

const label = (s: Scenario) =>
  `${s.startDate ?? 'open'}..${s.endDate ?? 'open'} ${s.timeZone ?? 'UTC'}${s.filters ? ' filtered' : ''}`;

describe.each(SCENARIOS.map((s) => [label(s), s] as const))('%s', (_, scenario) => {
  let memo: StoredEvent[] | undefined;
  const selected = () => {
    memo ??= selectEvents(events, tenant.siteId, full(scenario));
    return memo;
  };

  it('errors/names: every name ranked, paged, with the number of names', async () => {
    const expected = ref.errorNames(selected());
    expect(expected.length).toBeGreaterThan(1);
    const all = await get<{ data: { data: unknown[]; totalCount: number } }>('errors/names', scenario, {
      limit: '1000',
    });
    expect(all.data).toEqual({ data: expected, totalCount: expected.length });
    const second = await get<{ data: { data: unknown[]; totalCount: number } }>('errors/names', scenario, {
      limit: '2',
      page: '2',
    });
    expect(second.data).toEqual({ data: expected.slice(2, 4), totalCount: expected.length });
    const past = await get<{ data: { data: unknown[]; totalCount: number } }>('errors/names', scenario, {
      limit: '10',
      page: '50',
    });
    expect(past.data).toEqual({ data: [], totalCount: expected.length });
  });

  it('errors/events and errors/time-series of the most and least frequent names', async () => {
    const names = ref.errorNames(selected());
    const now = Date.now();
    for (const name of [names[0]!.value, names.at(-1)!.value]) {
      const expected = ref.errorEvents(selected(), name);
      const page = await get<{ data: { data: unknown[]; totalCount: number } }>('errors/events', scenario, {
        errorMessage: name,
        limit: '100',
      });
      expect(page.data).toEqual({ data: expected.slice(0, 100), totalCount: expected.length });
      const second = await get<{ data: { data: unknown[]; totalCount: number } }>('errors/events', scenario, {
        errorMessage: name,
        limit: '3',
        page: '2',
      });
      expect(second.data.data).toEqual(expected.slice(3, 6));
      for (const bucket of scenario.buckets) {
        const series = await get<{ data: unknown[] }>('errors/time-series', scenario, {
          errorMessage: name,
          bucket,
        });
        expect(series.data, bucket).toEqual(ref.errorBucketed(selected(), full(scenario), name, bucket, now));
      }
    }
  });

  it('performance/overview and performance/time-series', async () => {
    const expected = ref.performanceOverview(selected());
    expect(expected.total_performance_events).toBeGreaterThan(0);
    const overview = await get<{ data: unknown }>('performance/overview', scenario);
    expect(overview.data).toEqual(expected);
    const now = Date.now();
    for (const bucket of scenario.buckets) {
      const series = await get<{ data: unknown[] }>('performance/time-series', scenario, { bucket });
      expect(series.data, bucket).toEqual(ref.performanceBucketed(selected(), full(scenario), bucket, now));
    }
  });

  it('performance/by-dimension: values ranked by samples, paged', async () => {
    const expected = ref.performanceByDimension(selected(), scenario.dimension as keyof StoredEvent);
    expect(expected.length).toBeGreaterThan(0);
    const answer = await get<{ data: { data: Record<string, unknown>[]; totalCount: number } }>(
      'performance/by-dimension',
      scenario,
      { dimension: scenario.dimension, limit: '1000' },
    );
    expect(answer.data.totalCount).toBe(expected.length);
    // Means are sums divided: the engine adds in another order, so they agree to rounding only.
    const withoutMeans = (item: Record<string, unknown>) =>
      Object.fromEntries(Object.entries(item).filter(([k]) => !k.endsWith('_avg')));
    expect(answer.data.data.map(withoutMeans)).toEqual(expected.map(withoutMeans));
    answer.data.data.forEach((item, i) => {
      for (const v of ['lcp', 'cls', 'inp', 'fcp', 'ttfb']) {
        const want = expected[i]![`${v}_avg`] as number | null;
        if (want === null) expect(item[`${v}_avg`]).toBeNull();
        else expect(item[`${v}_avg`] as number).toBeCloseTo(want, 9);
      }
    });
    const second = await get<{ data: { data: Record<string, unknown>[]; totalCount: number } }>(
      'performance/by-dimension',
      scenario,
      { dimension: scenario.dimension, limit: '2', page: '2' },
    );
    expect(second.data.data.map((i) => i.value)).toEqual(expected.slice(2, 4).map((i) => i.value));
  });

  it('events/autocapture of every type', async () => {
    let values = 0;
    for (const type of ['button_click', 'copy', 'form_submit', 'input_change', 'outbound']) {
      const expected = ref.autocapture(selected(), type);
      values += expected.length;
      const answer = await get<{ data: { data: unknown[]; totalCount: number } }>(
        'events/autocapture',
        scenario,
        {
          type,
          limit: '1000',
        },
      );
      expect(answer.data, type).toEqual({ data: expected, totalCount: expected.length });
      const second = await get<{ data: { data: unknown[] } }>('events/autocapture', scenario, {
        type,
        limit: '2',
        page: '2',
      });
      expect(second.data.data, type).toEqual(expected.slice(2, 4));
      const suggestions = await get<{ data: unknown[] }>('events/autocapture/values', scenario, { type });
      expect(suggestions.data, type).toEqual(ref.autocaptureValues(selected(), type));
      const top = await get<{ data: unknown[] }>('events/autocapture/values', scenario, { type, limit: '2' });
      expect(top.data, type).toEqual(ref.autocaptureValues(selected(), type).slice(0, 2));
    }
    expect(values).toBeGreaterThan(4);
  });
});

describe('definitions on hand-made values', () => {
  it('percentiles interpolate between closest ranks; NULL is not a sample, 0 is; a p75 on a threshold is the better rating', async () => {
    const res = await h.json<{ data: Record<string, unknown> }>(
      `/api/sites/${exact.siteId}/performance/overview`,
      {
        key: exact.key,
      },
    );
    expect(res.body.data).toMatchObject({
      total_performance_events: 4,
      lcp_p50: 2500,
      lcp_p75: 3250,
      lcp_p90: 3700,
      lcp_p99: 3970,
      lcp_samples: 4,
      lcp_rating: 'needs-improvement',
      cls_p50: 0,
      cls_p75: 0.15,
      cls_samples: 3,
      cls_rating: 'needs-improvement',
      inp_p50: null,
      inp_p75: null,
      inp_samples: 0,
      inp_rating: null,
      fcp_p50: 1800,
      fcp_p75: 1800,
      fcp_rating: 'good',
      ttfb_p99: 0,
      ttfb_samples: 4,
      ttfb_rating: 'good',
      thresholds: {
        lcp: [2500, 4000],
        cls: [0.1, 0.25],
        inp: [200, 500],
        fcp: [1800, 3000],
        ttfb: [800, 1800],
      },
    });
  });

  it('error properties of other clients, names tying on count, an unnamed error', async () => {
    const day = { startDate: '2026-03-10', endDate: '2026-03-10' };
    const names = await get<{ data: { data: { value: string; count: number }[] } }>('errors/names', day, {
      limit: '1000',
    });
    const crafted = names.data.data.filter((n) => ['Alpha', 'LegacyError', 'Zeta'].includes(n.value));
    expect(crafted.map((n) => n.value)).toEqual(['Alpha', 'LegacyError', 'Zeta']);
    expect(names.data.data.some((n) => n.value === '')).toBe(false);
    const legacy = await get<{ data: { data: Record<string, unknown>[] } }>('errors/events', day, {
      errorMessage: 'LegacyError',
    });
    // Both on one millisecond: newest first, then by event id descending.
    expect(legacy.data.data).toEqual(
      ref.errorEvents(selectEvents(events, tenant.siteId, full(day)), 'LegacyError'),
    );
    expect(
      legacy.data.data.map(({ message, stack, fileName, lineNumber, columnNumber }) => ({
        message,
        stack,
        fileName,
        lineNumber,
        columnNumber,
      })),
    ).toEqual(
      expect.arrayContaining([
        {
          message: 'old browser',
          stack: null,
          fileName: 'https://example.com/old.js',
          lineNumber: 17,
          columnNumber: 4,
        },
        { message: 'old browser', stack: null, fileName: null, lineNumber: 21, columnNumber: null },
      ]),
    );
  });

  it('an unknown error name has no events and zeros in every bucket', async () => {
    const c = { startDate: '2026-03-29', endDate: '2026-03-29', timeZone: 'Europe/Berlin' };
    const none = await get<{ data: { data: unknown[]; totalCount: number } }>('errors/events', c, {
      errorMessage: 'NoSuchError',
    });
    expect(none.data).toEqual({ data: [], totalCount: 0 });
    const series = await get<{ data: { error_count: number }[] }>('errors/time-series', c, {
      errorMessage: 'NoSuchError',
      bucket: 'hour',
    });
    expect(series.data).toHaveLength(23);
    expect(series.data.every((b) => b.error_count === 0)).toBe(true);
  });
});

describe('malformed parameters and access', () => {
  const bad: [string, string][] = [
    ['errors/names', 'limit=0'],
    ['errors/names', 'limit=1001'],
    ['errors/names', 'page=1001'],
    ['errors/names', 'start_date=2026-03-02&end_date=2026-03-01'],
    ['errors/names', 'filters=nope'],
    ['errors/events', ''],
    ['errors/events', 'errorMessage='],
    ['errors/events', `errorMessage=${'x'.repeat(257)}`],
    ['errors/events', 'errorMessage=TypeError&limit=101'],
    ['errors/time-series', 'bucket=day'],
    ['errors/time-series', 'errorMessage=TypeError&bucket=year'],
    ['errors/time-series', 'errorMessage=TypeError&bucket=hour'],
    ['errors/time-series', 'errorMessage=TypeError&bucket=minute&start_date=2026-03-01&end_date=2026-03-03'],
    ['errors/time-series', 'errorMessage=TypeError&bucket=day&start_date=2020-01-01&end_date=2026-01-01'],
    ['performance/overview', 'time_zone=Mars/Olympus'],
    ['performance/time-series', 'bucket=year'],
    ['performance/time-series', 'bucket=fifteen_minutes&start_date=2026-03-01'],
    ['performance/time-series', 'bucket=hour&start_date=2026-01-01&end_date=2026-03-31'],
    ['performance/by-dimension', ''],
    ['performance/by-dimension', 'dimension=screen_width'],
    ['performance/by-dimension', 'dimension=pathname&page=0'],
    ['events/autocapture', ''],
    ['events/autocapture', 'type=pageview'],
    ['events/autocapture', 'type=copy&limit=1001'],
    ['events/autocapture/values', 'type=pageview'],
    ['events/autocapture/values', 'type=copy&limit=0'],
  ];
  it.each(bad)('%s?%s → 400 with details', async (path, qs) => {
    const res = await h.json<{ success: boolean; code: string; details: { fieldErrors: object } }>(
      `/api/sites/${tenant.siteId}/${path}?${qs}`,
      { key: tenant.key },
    );
    expect([res.status, res.body.success, res.body.code]).toEqual([400, false, 'INVALID_PARAMS']);
    expect(res.body.details).toHaveProperty('fieldErrors');
  });

  const paths = [
    'errors/names',
    'errors/events?errorMessage=TypeError',
    'errors/time-series?errorMessage=TypeError',
    'performance/overview',
    'performance/time-series',
    'performance/by-dimension?dimension=pathname',
    'events/autocapture?type=copy',
    'events/autocapture/values?type=form_submit',
  ];
  it.each(paths)('%s: a key of another organization, no key', async (path) => {
    const stranger = await h.tenant('owner', false);
    const denied = await h.json(`/api/sites/${tenant.siteId}/${path}`, { key: stranger.key });
    expect([denied.status, denied.body.code]).toEqual([403, 'ACCESS_DENIED']);
    const anonymous = await h.json(`/api/sites/${tenant.siteId}/${path}`);
    expect([anonymous.status, anonymous.body.code]).toEqual([401, 'MISSING_API_KEY']);
    const unknown = await h.json(`/api/sites/999999/${path}`, { key: tenant.key });
    expect(unknown.status).toBe(404);
  });

  it('every route is in the OpenAPI document', async () => {
    const doc = await h.json<{ paths: Record<string, unknown> }>('/api/openapi.json');
    for (const path of paths)
      expect(doc.body.paths).toHaveProperty([`/api/sites/{siteId}/${path.split('?')[0]}`]);
  });
});
