import { createHash, randomBytes, randomInt } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';

export { uuidv7 };

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
