import { createApiKey, listApiKeys } from '@trackhouse/postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueryHarness, type QueryHarness } from './harness';

let h: QueryHarness;
beforeAll(async () => {
  h = await createQueryHarness({
    QUERY_RATE_LIMIT_MAX: '100000',
    API_KEYS_PER_USER_MAX: '5',
    API_KEY_CREATE_LIMIT_PER_DAY: '8',
  });
});
afterAll(async () => {
  await h.close();
});

interface Created {
  id: string;
  key: string;
  expiresAt: string | null;
}
const create = (key: string, body: Record<string, unknown> = { name: 'k' }) =>
  h.json<Created>('/api/user/api-keys', { key, method: 'POST', body });

describe('API key creation over HTTP', () => {
  it('stops at API_KEYS_PER_USER_MAX active keys with 409, and revoking one makes room', async () => {
    const t = await h.tenant(); // holds one key already
    for (let i = 0; i < 4; i++) expect((await create(t.key)).status).toBe(201);
    const refused = await create(t.key);
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({
      success: false,
      error: 'At most 5 active API keys per user: revoke one first',
      code: 'TOO_MANY_API_KEYS',
    });
    const [, second] = await listApiKeys(h.db.sql, t.userId);
    expect((await h.json(`/api/user/api-keys/${second!.id}`, { key: t.key, method: 'DELETE' })).status).toBe(
      200,
    );
    expect((await create(t.key)).status).toBe(201);
    expect((await listApiKeys(h.db.sql, t.userId)).filter((k) => k.revokedAt === null)).toHaveLength(5);
  });

  it('counts expired keys as inactive', async () => {
    const t = await h.tenant();
    for (let i = 0; i < 4; i++)
      await createApiKey(h.db.sql, { userId: t.userId, name: 'old', expiresAt: new Date(Date.now() - 1000) });
    expect((await create(t.key)).status).toBe(201);
  });

  it('holds the active cap exactly under concurrent creations', async () => {
    const t = await h.tenant();
    const results = await Promise.all(Array.from({ length: 8 }, () => create(t.key)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(4);
    expect(results.filter((r) => r.status === 409)).toHaveLength(4);
    expect((await listApiKeys(h.db.sql, t.userId)).filter((k) => k.revokedAt === null)).toHaveLength(5);
  });

  it('allows API_KEY_CREATE_LIMIT_PER_DAY creations per sliding day, revoked ones included, then 429', async () => {
    const t = await h.tenant();
    for (let i = 0; i < 8; i++) {
      const made = await create(t.key);
      expect(made.status).toBe(201);
      // Revoke at once so the active cap never stands in the way.
      await h.json(`/api/user/api-keys/${made.body.id}`, { key: t.key, method: 'DELETE' });
    }
    const refused = await create(t.key);
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({
      success: false,
      error: 'At most 8 API keys may be created per user in 24 hours',
      code: 'RATE_LIMITED',
    });
    const retryAfter = Number(refused.headers.get('Retry-After'));
    expect(retryAfter).toBeGreaterThan(86_000);
    expect(retryAfter).toBeLessThanOrEqual(86_400);
    expect(await listApiKeys(h.db.sql, t.userId)).toHaveLength(9);
  });

  it('lets an expiring key create only keys that expire no later than itself', async () => {
    const t = await h.tenant();
    const limited = await createApiKey(h.db.sql, {
      userId: t.userId,
      name: 'ten days',
      expiresAt: new Date(Date.now() + 10 * 86_400_000),
    });
    const inherited = await create(limited.key, { name: 'no expiry asked' });
    expect(inherited.status).toBe(201);
    expect(inherited.body.expiresAt).toBe(limited.record.expiresAt!.toISOString());
    const shorter = await create(limited.key, { name: 'five days', expiresInDays: 5 });
    expect(shorter.status).toBe(201);
    expect(Date.parse(shorter.body.expiresAt!)).toBeLessThan(limited.record.expiresAt!.getTime());
    const longer = await create(limited.key, { name: 'thirty days', expiresInDays: 30 });
    expect(longer.status).toBe(400);
    expect(longer.body).toMatchObject({
      success: false,
      code: 'INVALID_PAYLOAD',
      details: {
        fieldErrors: { expiresInDays: [expect.stringContaining(limited.record.expiresAt!.toISOString())] },
        formErrors: [],
      },
    });
    // A key without expiry still creates keys without expiry.
    expect((await create(t.key, { name: 'forever' })).body.expiresAt).toBeNull();
  });
});
