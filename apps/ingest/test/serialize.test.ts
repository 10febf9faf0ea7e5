import { describe, expect, it } from 'vitest';
import { serializeRow } from '../src/pipeline';

describe('serializeRow', () => {
  it('writes valid JSON that round-trips every value, leaving out defaults', () => {
    const row = {
      site_id: 7,
      timestamp: '2026-11-21 04:11:56.019',
      pathname: '/a"b\\c\n\u0001 ünïcødé 🎉',
      page_title: '',
      properties: '{"x":"y"}',
      props: { x: 'y', 'q"k': '\\' },
      lat: 0,
      lon: -0.5,
      referrer: 'lone \ud800 surrogate',
    };
    const line = serializeRow(row);
    expect(line.endsWith('}\n')).toBe(true);
    const parsed = JSON.parse(line);
    expect(parsed).toEqual({
      site_id: 7,
      timestamp: '2026-11-21 04:11:56.019',
      pathname: '/a"b\\c\n\u0001 ünïcødé 🎉',
      properties: '{"x":"y"}',
      props: { x: 'y', 'q"k': '\\' },
      lon: -0.5,
      referrer: 'lone \ud800 surrogate',
    });
    expect(serializeRow({ site_id: 1, props: {} })).toBe('{"site_id":1}\n');
  });
});
