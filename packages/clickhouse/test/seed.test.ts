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
});
