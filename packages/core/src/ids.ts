import { createHash, randomBytes, randomInt } from 'node:crypto';

// Random bytes are drawn 8 KiB at a time: one syscall per 800 ids instead of one per id.
const POOL_SIZE = 8192;
let pool = randomBytes(POOL_SIZE);
let poolOffset = 0;
function random10(): Buffer {
  if (poolOffset + 10 > POOL_SIZE) {
    pool = randomBytes(POOL_SIZE);
    poolOffset = 0;
  }
  const out = pool.subarray(poolOffset, poolOffset + 10);
  poolOffset += 10;
  return out;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
let lastMs = 0;
let sequence = 0;

/**
 * UUID version 7 (RFC 9562): 48-bit Unix milliseconds, then random bits. Within one
 * millisecond a 12-bit counter in rand_a keeps ids of this process increasing.
 */
/** A UUID v7 text: 48 bits of `ms`, the version, 12 bits of `a`, the variant, 62 bits of `tail` (8 bytes). */
function formatV7(ms: number, a: number, tail: ArrayLike<number>): string {
  const b = [
    Math.floor(ms / 2 ** 40) & 0xff,
    Math.floor(ms / 2 ** 32) & 0xff,
    (ms >>> 24) & 0xff,
    (ms >>> 16) & 0xff,
    (ms >>> 8) & 0xff,
    ms & 0xff,
    0x70 | ((a >>> 8) & 0x0f),
    a & 0xff,
    0x80 | (tail[0]! & 0x3f),
    tail[1]!,
    tail[2]!,
    tail[3]!,
    tail[4]!,
    tail[5]!,
    tail[6]!,
    tail[7]!,
  ].map((x) => HEX[x]!);
  return `${b[0]}${b[1]}${b[2]}${b[3]}-${b[4]}${b[5]}-${b[6]}${b[7]}-${b[8]}${b[9]}-${b[10]}${b[11]}${b[12]}${b[13]}${b[14]}${b[15]}`;
}

/**
 * A UUID v7 whose time is `ms` and whose other bits come from SHA-256 of `seed`: the same
 * inputs give the same id, so an id derived this way survives a replay of what it names.
 */
export function uuidv7FromSeed(ms: number, seed: string): string {
  const h = createHash('sha256').update(seed).digest();
  return formatV7(ms, (h[0]! << 8) | h[1]!, h.subarray(2, 10));
}

export function uuidv7(now = Date.now()): string {
  const r = random10();
  if (now > lastMs) {
    lastMs = now;
    sequence = ((r[0]! & 0x07) << 8) | r[1]!; // start low so the counter has room
  } else {
    sequence++;
    if (sequence > 0xfff) {
      lastMs++;
      sequence = 0;
    }
  }
  return formatV7(lastMs, sequence, r.subarray(2, 10));
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniform random base62 text (rejection-free: randomInt is unbiased). */
export function randomBase62(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += BASE62[randomInt(62)];
  return out;
}

export const API_KEY_PREFIX = 'th_';
const API_KEY_RANDOM_LENGTH = 40;

/** A new API key: fixed prefix plus 40 base62 characters (~238 random bits). */
export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBase62(API_KEY_RANDOM_LENGTH);
}

export function isApiKeyShaped(value: string): boolean {
  return (
    value.startsWith(API_KEY_PREFIX) &&
    value.length === API_KEY_PREFIX.length + API_KEY_RANDOM_LENGTH &&
    /^[0-9A-Za-z]+$/.test(value.slice(API_KEY_PREFIX.length))
  );
}

/** Keys carry ≥ 238 random bits, so a plain SHA-256 is a sufficient at-rest hash. */
export function hashSecret(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** Private link keys: 32 hex characters = 128 random bits. */
export function generatePrivateLinkKey(): string {
  return randomBytes(16).toString('hex');
}

/** Record ids for organizations, users and keys: short, URL-safe, random. */
export function recordId(): string {
  return randomBase62(21);
}
