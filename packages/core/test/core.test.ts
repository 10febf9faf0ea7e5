import { Hono } from 'hono';
import pino from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  ApiError,
  ConfigError,
  clientAddress,
  createHttpApp,
  ERROR_STATUS,
  flattenIssues,
  generateApiKey,
  isApiKeyShaped,
  loadConfig,
  startOfNextUtcMonth,
  toIso,
  uuidv7,
  uuidv7FromSeed,
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
      TRUST_PROXY: 0,
    });
  });

  it('reads TRUST_PROXY as a number of proxy hops', () => {
    expect(loadConfig({ TRUST_PROXY: 'true' }).TRUST_PROXY).toBe(1);
    expect(loadConfig({ TRUST_PROXY: 'false' }).TRUST_PROXY).toBe(0);
    expect(loadConfig({ TRUST_PROXY: '2' }).TRUST_PROXY).toBe(2);
    expect(() => loadConfig({ TRUST_PROXY: '99' })).toThrow(/TRUST_PROXY/);
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

describe('client address behind proxies', () => {
  const addressOf = async (hops: number, forwarded?: string) => {
    const app = new Hono();
    app.get('/', (c) => c.text(clientAddress(c, hops)));
    const res = await app.request('/', { headers: forwarded ? { 'x-forwarded-for': forwarded } : {} });
    return res.text();
  };

  it('takes the entry the trusted proxies wrote, never one the client wrote', async () => {
    expect(await addressOf(1, '6.6.6.6, 1.2.3.4')).toBe('1.2.3.4');
    expect(await addressOf(2, '9.9.9.9, 1.2.3.4, 10.0.0.2')).toBe('1.2.3.4');
    expect(await addressOf(2, '1.2.3.4')).toBe('1.2.3.4');
    expect(await addressOf(1, '2001:db8::1')).toBe('2001:db8::1');
  });

  it('ignores the header without trusted proxies, and entries that are not addresses', async () => {
    expect(await addressOf(0, '6.6.6.6')).toBe('');
    expect(await addressOf(1, '6.6.6.6, not-an-ip')).toBe('');
  });
});

describe('access log', () => {
  it('writes one line per request with the service named once', async () => {
    const lines: string[] = [];
    const log = pino({ base: { service: 'query' } }, { write: (line: string) => lines.push(line) });
    const app = createHttpApp({ service: 'query', log, registry: new Registry() });
    app.get('/x', (c) => c.text('ok'));
    await app.request('/x');
    expect(lines).toHaveLength(1);
    expect(lines[0]!.match(/"service":/g)).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ service: 'query', method: 'GET', path: '/x', status: 200 });
  });
});

describe('seeded UUID v7', () => {
  it('is the same for the same time and seed, carries the time, and differs by seed', () => {
    const ms = Date.parse('2026-11-20T10:00:00.123Z');
    const id = uuidv7FromSeed(ms, 'site:visitor:1');
    expect(uuidv7FromSeed(ms, 'site:visitor:1')).toBe(id);
    expect(uuidv7FromSeed(ms, 'site:visitor:2')).not.toBe(id);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16)).toBe(ms);
  });
});
