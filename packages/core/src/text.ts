/**
 * The one rule for text that reaches a store (docs/decisions.md, "Text that cannot be stored").
 *
 * ClickHouse refuses JSON holding a lone UTF-16 surrogate (`\ud800`), PostgreSQL refuses NUL
 * in text, and neither can hold bytes that are not UTF-8. So every string taken from a request
 * is made storable once, where it enters: lone surrogates and NUL become U+FFFD, the character
 * that invalid UTF-8 bytes already become when a body is decoded. Everything else (other control
 * characters, bidi and zero-width marks, astral characters) is kept as sent.
 */
export const REPLACEMENT = '\ufffd';

// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is what must be replaced
const UNSTORABLE = /[\u0000\ud800-\udfff]/;

/** `text` with lone surrogates and NUL replaced by U+FFFD (the same string when it has none). */
export function storable(text: string): string {
  if (!UNSTORABLE.test(text)) return text;
  return text.toWellFormed().replaceAll('\u0000', REPLACEMENT);
}

/** A parsed JSON value with every string and object key made storable (a copy only where needed). */
export function storableDeep<T>(value: T): T {
  if (typeof value === 'string') return storable(value) as T;
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(storableDeep) as T;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[storable(k)] = storableDeep(v);
  return out as T;
}

/**
 * An escape in JSON text that can decode to an unstorable character: `\u0000` or a surrogate
 * half. Valid pairs match too (they are left unchanged by the slower path); a body without any
 * such escape cannot hold an unstorable character, since decoding bytes never yields one.
 */
const RISKY_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/;

/** JSON.parse, with every string made storable. Throws SyntaxError like JSON.parse. */
export function parseStorableJson(text: string): unknown {
  const value: unknown = JSON.parse(text);
  return RISKY_ESCAPE.test(text) ? storableDeep(value) : value;
}
