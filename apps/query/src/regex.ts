import { RE2JS } from 're2js';

/**
 * The characters of regular expressions one request may carry (all `regex` and `not_regex`
 * values together). Checking a pattern costs up to ~10 ms per 250 characters (case-folded
 * Unicode classes), and ClickHouse compiles them again: the total is what stays bounded.
 */
export const MAX_REGEX_CHARS = 2048;

/** RE2's largest repetition count. */
const MAX_REPEAT = 1000;
const COUNTED_REPEAT = /\{(\d+)(,?)(\d*)\}/g;

/**
 * The pattern with every valid repetition count cut to at most 2: the same syntax, but a
 * program that stays small (re2js expands `x{1000}` into a thousand copies of `x` while it
 * compiles, long after the syntax was checked). Invalid counts are left for the parser to
 * refuse. Braces that are no repetition (`\x{41}`, `[{9}]`) keep a valid form too: only
 * digits between braces change.
 */
function withSmallCounts(pattern: string): string {
  return pattern.replace(COUNTED_REPEAT, (whole, n: string, comma: string, m: string) => {
    const min = Number(n);
    const max = m === '' ? undefined : Number(m);
    if (min > MAX_REPEAT || (max !== undefined && (max > MAX_REPEAT || max < min))) return whole;
    if (!comma) return `{${Math.min(min, 1)}}`;
    return max === undefined ? `{${Math.min(min, 1)},}` : `{${Math.min(min, 1)},${Math.min(max, 2)}}`;
  });
}

/**
 * Why `pattern` is no RE2 expression (the syntax ClickHouse runs), or undefined when it is.
 * Nested repetitions beyond RE2's limits (`(a{100}){100}`) pass here; the engine refuses them
 * and the query service answers 400 for it.
 */
export function re2Problem(pattern: string): string | undefined {
  try {
    RE2JS.compile(withSmallCounts(pattern));
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : 'invalid';
  }
}
