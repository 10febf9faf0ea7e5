import { describe, expect, it } from 'vitest';
import { generateEvents, type StoredEvent } from '../src';

const generate = (seed: number, events = 10_000) => [
  ...generateEvents({ siteId: 1, events, days: 7, end: new Date('2026-03-10T00:00:00Z'), seed }),
];

function share<T>(items: T[], test: (t: T) => boolean): number {
  return items.filter(test).length / items.length;
}

describe('seeded traffic', () => {
  it('is the same for the same seed, ids included, and different for another', () => {
    const text = (seed: number) => JSON.stringify(generate(seed, 2000));
    expect(text(5)).toBe(text(5));
    expect(text(6)).not.toBe(text(5));
  });

  it('looks like real traffic: sessions of several pages, a share of bounces, skewed values', () => {
    const events = generate(1);
    expect(events).toHaveLength(10_000);
    const sessions = new Map<string, StoredEvent[]>();
    for (const e of events) sessions.set(e.session_id, [...(sessions.get(e.session_id) ?? []), e]);
    const pages = [...sessions.values()].map((list) => list.filter((e) => e.type === 'pageview').length);
    const bounces = share(pages, (n) => n === 1);
    expect(bounces).toBeGreaterThan(0.3);
    expect(bounces).toBeLessThan(0.55);
    expect(Math.max(...pages)).toBeGreaterThanOrEqual(10);
    // Every session starts with its landing pageview, the only event carrying referrer and UTM.
    for (const list of sessions.values()) {
      expect(list[0]!.type).toBe('pageview');
      expect(list.slice(1).every((e) => e.referrer === '' && e.utm_source === '')).toBe(true);
      const times = list.map((e) => e.timestamp);
      expect(times).toEqual([...times].sort());
    }
    const landings = [...sessions.values()].map((list) => list[0]!);
    expect(share(landings, (e) => e.channel === 'Direct')).toBeGreaterThan(0.2);
    expect(share(landings, (e) => e.channel === 'Organic Search')).toBeGreaterThan(0.15);
    expect(share(landings, (e) => e.utm_campaign !== '')).toBeGreaterThan(0.03);
    // A few values carry most of the traffic, a long tail the rest.
    const byPath = new Map<string, number>();
    for (const e of events)
      if (e.type === 'pageview') byPath.set(e.pathname, (byPath.get(e.pathname) ?? 0) + 1);
    const counts = [...byPath.values()].sort((a, b) => b - a);
    expect(byPath.size).toBeGreaterThan(30);
    expect(counts[0]! / counts.at(-1)!).toBeGreaterThan(20);
    expect(new Set(events.map((e) => e.country)).size).toBeGreaterThan(15);
    expect(new Set(events.map((e) => e.browser)).size).toBeGreaterThan(5);
    for (const type of ['custom_event', 'outbound', 'error'] as const)
      expect(share(events, (e) => e.type === type)).toBeGreaterThan(0);
    expect(share(events, (e) => e.identified_user_id !== '')).toBeGreaterThan(0.01);
  });

  it('gives visitors ids spread over the whole key space, as the ingest service does', () => {
    const events = generate(3);
    const ids = [...new Set(events.map((e) => e.user_id))];
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{16}$/);
    // One id per visitor, another for each other visitor (visitors told apart by their identified ids).
    const identified = new Map<string, Set<string>>();
    for (const e of events)
      if (e.identified_user_id !== '')
        identified.set(
          e.identified_user_id,
          (identified.get(e.identified_user_id) ?? new Set()).add(e.user_id),
        );
    expect(identified.size).toBeGreaterThan(5);
    for (const users of identified.values()) expect(users.size).toBe(1);
    expect(new Set([...identified.values()].map((u) => [...u][0])).size).toBe(identified.size);
    // Not dense: the first hex digit takes most of its 16 values, and the keys spread over the
    // upper half of the space as much as the lower.
    expect(new Set(ids.map((id) => id[0])).size).toBeGreaterThan(12);
    expect(share(ids, (id) => id[0]! >= '8')).toBeGreaterThan(0.35);
    expect(share(ids, (id) => id[0]! >= '8')).toBeLessThan(0.65);
  });

  it('stops the sessions still going at the end of the period there: no event on or after it, no tie', () => {
    const end = new Date('2026-03-10T00:00:00Z');
    const events = [...generateEvents({ siteId: 1, events: 50_000, days: 1, end, seed: 4 })];
    expect(events).toHaveLength(50_000);
    const last = '2026-03-09 23:59:59.999';
    expect(events.every((e) => e.timestamp <= last)).toBe(true);
    // Without ties asked for (tieRate 0), no session has two events in one millisecond.
    const seen = new Set<string>();
    const tied = events.filter((e) => {
      const key = `${e.session_id} ${e.timestamp}`;
      const again = seen.has(key);
      seen.add(key);
      return again;
    });
    expect(tied).toEqual([]);
    // Sessions do run up to the end: the last minute has events.
    expect(events.some((e) => e.timestamp >= '2026-03-09 23:59:00.000')).toBe(true);
  });

  it('starts sessions in time order, with ids that carry their start', () => {
    const events = generate(2);
    const starts = new Map<string, string>();
    for (const e of events) if (!starts.has(e.session_id)) starts.set(e.session_id, e.timestamp);
    const ordered = [...starts.values()];
    expect(ordered).toEqual([...ordered].sort());
    for (const [id, start] of starts) {
      const ms = Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16);
      expect(new Date(ms).toISOString().replace('T', ' ').slice(0, 23)).toBe(start);
    }
  });

  it('adds what the browser client captures when asked: web vitals, clicks, copies, forms', () => {
    const events = [
      ...generateEvents({
        siteId: 1,
        events: 20_000,
        days: 7,
        end: new Date('2026-03-10T00:00:00Z'),
        seed: 3,
        product: true,
      }),
    ];
    expect(events).toHaveLength(20_000);
    const perf = events.filter((e) => e.type === 'performance');
    expect(share(events, (e) => e.type === 'performance')).toBeGreaterThan(0.05);
    expect(share(events, (e) => e.type === 'performance')).toBeLessThan(0.2);
    expect(perf.every((e) => e.event_name === 'web-vitals' && e.properties === '{}')).toBe(true);
    // Some vitals not measured, CLS often exactly 0, the others positive.
    for (const v of ['lcp', 'cls', 'inp', 'ttfb'] as const)
      expect(perf.some((e) => e[v] === null)).toBe(true);
    expect(share(perf, (e) => e.cls === 0)).toBeGreaterThan(0.3);
    expect(perf.every((e) => e.fcp! > 0 && (e.lcp === null || e.lcp! >= e.fcp! - 1))).toBe(true);
    // Only performance events carry vitals.
    expect(events.filter((e) => e.type !== 'performance').every((e) => e.lcp === undefined)).toBe(true);
    for (const [type, key] of [
      ['button_click', 'text'],
      ['copy', 'text'],
      ['input_change', 'inputName'],
      ['form_submit', 'formAction'],
    ] as const) {
      const typed = events.filter((e) => e.type === type);
      expect(typed.length, type).toBeGreaterThan(0);
      expect(
        typed.every((e) => key in JSON.parse(e.properties) && e.event_name === ''),
        type,
      ).toBe(true);
    }
    // Off unless asked: the other tests' data stays as it was.
    const plain = generate(3, 5000);
    expect(plain.some((e) => !['pageview', 'custom_event', 'outbound', 'error'].includes(e.type))).toBe(
      false,
    );
  });
});
