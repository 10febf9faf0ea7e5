import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { coveringWindows } from '../src/queries/analytics/pages';

/** A millisecond as the engine writes DateTime64(3, 'UTC'). */
const at = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 23);
const msOf = (s: string) => Date.parse(`${s.replace(' ', 'T')}Z`);

const spans = fc.array(
  fc
    .tuple(
      fc.integer({ min: Date.parse('2026-01-01'), max: Date.parse('2026-02-01') }),
      fc.integer({ min: 0, max: 6 * 3_600_000 }),
    )
    .map(([from, length]): [string, string] => [at(from), at(from + length)]),
  { maxLength: 120 },
);

describe('coveringWindows', () => {
  it('covers every span with at most 32 sorted, disjoint windows, closing the narrowest gaps first', () => {
    fc.assert(
      fc.property(spans, (given) => {
        const windows = coveringWindows(given).map(([a, b]) => [msOf(a), msOf(b)] as const);
        expect(windows.length).toBeLessThanOrEqual(32);
        for (const [a, b] of given.map(([a, b]) => [msOf(a), msOf(b)] as const)) {
          expect(windows.some(([from, to]) => from <= a && b <= to)).toBe(true);
        }
        for (let i = 1; i < windows.length; i++) expect(windows[i]![0]).toBeGreaterThan(windows[i - 1]![1]);
        // Every window starts and ends where a span does, and the time between two windows
        // holds no span: the gaps kept are real, and (past 32) each at least as wide as any
        // closed gap between the spans' union inside a window.
        const union: [number, number][] = [];
        for (const [a, b] of given.map(([a, b]) => [msOf(a), msOf(b)] as const).sort((x, y) => x[0] - y[0])) {
          const last = union.at(-1);
          if (last && a <= last[1]) last[1] = Math.max(last[1], b);
          else union.push([a, b]);
        }
        const kept = windows.slice(1).map(([from], i) => from - windows[i]![1]);
        const closed = union
          .slice(1)
          .map(([from], i) => [union[i]![1], from] as const)
          .filter(([end]) => !windows.some(([, to]) => to === end))
          .map(([end, from]) => from - end);
        expect(union.length > 32 ? windows.length : union.length).toBe(windows.length);
        if (kept.length > 0 && closed.length > 0) {
          expect(Math.min(...kept)).toBeGreaterThanOrEqual(Math.max(...closed));
        }
        for (const [from, to] of windows) {
          expect(union.some(([a]) => a === from)).toBe(true);
          expect(union.some(([, b]) => b === to)).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('gives no window for no span, and one for spans that touch', () => {
    expect(coveringWindows([])).toEqual([]);
    expect(
      coveringWindows([
        ['2026-01-01 10:00:00.000', '2026-01-01 11:00:00.000'],
        ['2026-01-01 11:00:00.000', '2026-01-01 12:00:00.000'],
      ]),
    ).toEqual([['2026-01-01 10:00:00.000', '2026-01-01 12:00:00.000']]);
  });
});
