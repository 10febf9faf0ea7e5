import { describe, expect, it } from 'vitest';
import { parseStorableJson, REPLACEMENT, storable, storableDeep } from '../src';

describe('storable text', () => {
  it('replaces lone surrogates and NUL with U+FFFD and keeps everything else', () => {
    expect(storable('/p\ud800')).toBe(`/p${REPLACEMENT}`);
    expect(storable('\udc00x\ud83d')).toBe(`${REPLACEMENT}x${REPLACEMENT}`);
    expect(storable('a\u0000b')).toBe(`a${REPLACEMENT}b`);
    const kept = 'ok \u0001\u001f\u200b\u202e😀 é';
    expect(storable(kept)).toBe(kept);
  });

  it('makes keys and nested values storable, and leaves other values alone', () => {
    expect(storableDeep({ 'k\u0000': ['\ud800', 1, null, { x: '\udfff' }], n: 2, b: true })).toEqual({
      [`k${REPLACEMENT}`]: [REPLACEMENT, 1, null, { x: REPLACEMENT }],
      n: 2,
      b: true,
    });
  });

  it('parses JSON whose escapes decode to unstorable characters into storable strings', () => {
    expect(parseStorableJson('{"p":"/p\\ud800","q":"\\u0000","e":"\\ud83d\\ude00"}')).toEqual({
      p: `/p${REPLACEMENT}`,
      q: REPLACEMENT,
      e: '😀',
    });
    expect(() => parseStorableJson('{')).toThrow(SyntaxError);
  });
});
