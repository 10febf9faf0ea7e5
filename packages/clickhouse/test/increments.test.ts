import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Blocks, blocksOf, combineCounts, stillHolds } from '../src/queries/analytics/increments';
import { emptyCounts, type KeyedCounts } from '../src/queries/analytics/summaries';

const part = (name: string) => blocksOf('20261207', name)!;
const state = (upTo: number, ...names: string[]) => ({ upTo, parts: names.map(part) });

describe('blocksOf', () => {
  it('reads the blocks and data version of a part name, and nothing of another form', () => {
    expect(blocksOf('20261207', '20261207_3_8_2')).toEqual({
      name: '20261207_3_8_2',
      min: 3,
      max: 8,
      version: 3,
    });
    expect(blocksOf('20261207', '20261207_3_8_2_12')).toMatchObject({ min: 3, max: 8, version: 12 });
    for (const name of [
      '20261206_3_8_2',
      '20261207_3_8',
      '20261207_a_8_2',
      '20261207_3_8_2_1_1',
      'all_1_1_0',
    ])
      expect({ name, blocks: blocksOf('20261207', name) }).toEqual({ name, blocks: undefined });
  });
});

describe('stillHolds', () => {
  it('holds while the parts of blocks up to the state are its parts or merges of them', () => {
    const s = state(8, '20261207_1_5_1', '20261207_6_6_0', '20261207_8_8_0');
    // The same parts, and later parts beside them.
    expect(stillHolds(s, s.parts)).toBe(true);
    expect(stillHolds(s, [...s.parts, part('20261207_9_9_0'), part('20261207_11_14_1')])).toBe(true);
    // Its parts merged among themselves (a merge's version is its first block's).
    expect(stillHolds(s, [part('20261207_1_8_2'), part('20261207_10_10_0')])).toBe(true);
  });

  it('fails once a merge spans its last block, a part of it is gone, or a mutation rewrote one', () => {
    const s = state(8, '20261207_1_5_1', '20261207_6_6_0', '20261207_8_8_0');
    // Merged with a later part: what it held is no longer apart.
    expect(stillHolds(s, [part('20261207_1_5_1'), part('20261207_6_9_1')])).toBe(false);
    // A part emptied and dropped.
    expect(stillHolds(s, [part('20261207_1_5_1'), part('20261207_8_8_0')])).toBe(false);
    // A DELETE (a mutation numbered after the state's blocks) rewrote the parts.
    expect(
      stillHolds(s, [part('20261207_1_5_1_20'), part('20261207_6_6_0_20'), part('20261207_8_8_0_20')]),
    ).toBe(false);
    expect(stillHolds(s, [part('20261207_1_8_2_20')])).toBe(false);
  });

  it('fails for parts not made of the state’s, however named', () => {
    const names = fc.array(
      fc.tuple(
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 0, max: 40 }),
      ),
      { minLength: 1, maxLength: 6 },
    );
    fc.assert(
      fc.property(names, names, (a, b) => {
        const parts = (xs: [number, number, number][]): Blocks[] =>
          xs.map(([min, len, v]) => part(`20261207_${min}_${min + len}_1${v > 30 ? `_${v}` : ''}`));
        const before = parts(a);
        const now = parts(b);
        const upTo = Math.max(...before.map((x) => x.max));
        const holds = stillHolds({ upTo, parts: before }, now);
        // Holding means: every block range read then lies in one part now of no later version,
        // and nothing now reaches from up to upTo past it.
        if (holds) {
          for (const x of before)
            expect(now.some((c) => c.min <= x.min && x.max <= c.max && c.max <= upTo)).toBe(true);
          for (const c of now) expect(c.max <= upTo || c.min > upTo).toBe(true);
        }
      }),
    );
  });
});

describe('combineCounts', () => {
  const counts = (rows: [string, number, number][]): KeyedCounts => {
    const c = emptyCounts();
    for (const [v, n, e] of rows) {
      c.byValue.set(v, { v, n_sessions: n, n_events: e, bounces: 0, top_ms: 10 * n, top_n: e });
      c.all_sessions += n;
      c.all_events += e;
    }
    return c;
  };

  it('adds and takes away value by value, dropping values left empty, and leaves its inputs as they were', () => {
    const base = counts([
      ['a', 3, 5],
      ['b', 1, 1],
    ]);
    const plus = counts([
      ['a', 1, 2],
      ['c', 2, 2],
    ]);
    const minus = counts([
      ['a', 1, 1],
      ['b', 1, 1],
    ]);
    const out = combineCounts(base, plus, minus);
    expect([...out.byValue.values()]).toEqual([
      { v: 'a', n_sessions: 3, n_events: 6, bounces: 0, top_ms: 30, top_n: 6 },
      { v: 'c', n_sessions: 2, n_events: 2, bounces: 0, top_ms: 20, top_n: 2 },
    ]);
    expect(out).toMatchObject({ all_sessions: 5, all_events: 8 });
    expect(base.byValue.get('a')).toMatchObject({ n_sessions: 3, n_events: 5 });
  });
});
