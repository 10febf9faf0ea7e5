import { describe, expect, it } from 'vitest';
import {
  ApiError,
  ConfigError,
  ERROR_STATUS,
  flattenIssues,
  generateApiKey,
  isApiKeyShaped,
  loadConfig,
  startOfNextUtcMonth,
  toIso,
  uuidv7,
} from '../src';

describe('uuidv7', () => {
  it('has the version and variant bits, embeds the time, and increases within a millisecond', () => {
    const now = Date.UTC(2026, 10, 21, 4, 11, 56, 19);
    const ids = Array.from({ length: 5000 }, () => uuidv7(now));
    for (const id of ids)
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    expect(Number.parseInt(ids[0]!.replace(/-/g, '').slice(0, 12), 16)).toBeGreaterThanOrEqual(now);
  });
});

describe('config', () => {
  it('applies defaults and treats empty values as unset', () => {
    const c = loadConfig({ PORT: '', TRACK_RATE_LIMIT_MAX: '10' });
    expect(c).toMatchObject({
      HOST: '127.0.0.1',
      PORT: 3000,
      DATA_DIR: './data',
      TRACK_RATE_LIMIT_MAX: 10,
      TRACK_RATE_LIMIT_WINDOW_S: 600,
      QUERY_RATE_LIMIT_MAX: 6000,
      TRUST_PROXY: false,
    });
  });

  it('names every bad variable', () => {
    try {
      loadConfig({ PORT: 'x', DATABASE_URL: 'mysql://a', TRUST_PROXY: 'maybe', SECRET: 'short' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const message = (err as Error).message;
      for (const name of ['PORT', 'DATABASE_URL', 'TRUST_PROXY', 'SECRET'])
        expect(message).toContain(`${name}:`);
    }
  });
});

describe('errors and ids', () => {
  it('maps codes to statuses and renders the spec body', () => {
    const err = new ApiError('RATE_LIMITED', 'slow down', { a: 1 });
    expect(err.status).toBe(429);
    expect(err.toBody()).toEqual({
      success: false,
      error: 'slow down',
      code: 'RATE_LIMITED',
      details: { a: 1 },
    });
    expect(ERROR_STATUS.OVERLOADED).toBe(503);
    expect(
      flattenIssues([
        { path: ['a'], message: 'm1' },
        { path: [], message: 'm2' },
        { path: ['a'], message: 'm3' },
      ]),
    ).toEqual({
      fieldErrors: { a: ['m1', 'm3'] },
      formErrors: ['m2'],
    });
  });

  it('makes API keys of a fixed prefix and 40 base62 characters', () => {
    const key = generateApiKey();
    expect(isApiKeyShaped(key)).toBe(true);
    expect(isApiKeyShaped(`${key}x`)).toBe(false);
    expect(isApiKeyShaped(key.replace('th_', 'xx_'))).toBe(false);
    expect(generateApiKey()).not.toBe(key);
  });

  it('formats timestamps as ISO UTC with milliseconds and finds the next UTC month', () => {
    expect(toIso('2026-11-21 04:11:56.019')).toBe('2026-11-21T04:11:56.019Z');
    expect(toIso(new Date(Date.UTC(2026, 0, 1)))).toBe('2026-01-01T00:00:00.000Z');
    expect(startOfNextUtcMonth(new Date(Date.UTC(2026, 11, 31, 23, 59))).toISOString()).toBe(
      '2027-01-01T00:00:00.000Z',
    );
  });
});
