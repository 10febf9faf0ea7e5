import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createMemoryStores, createRedisStores, type Stores } from '../src';

const redisUrl = inject('redisUrl');

/**
 * One behavioural suite for both forms of the stores. The Redis form runs when REDIS_URL is set
 * (CI sets it); without it the Redis suite is reported as skipped, with the reason in its name.
 */
const forms: { name: string; make: () => Stores; skip: boolean }[] = [
  { name: 'in-process', make: createMemoryStores, skip: false },
  {
    name: redisUrl ? `redis (${redisUrl})` : 'redis (skipped: REDIS_URL is not set)',
    make: () => createRedisStores(redisUrl, { prefix: `test-${process.pid}-${Date.now()}:` }),
    skip: !redisUrl,
  },
];

for (const form of forms) {
  describe.skipIf(form.skip)(`stores: ${form.name}`, () => {
    let stores: Stores;
    beforeAll(() => {
      stores = form.make();
    });
    afterAll(async () => {
      await stores.close();
    });
    const key = () => randomUUID();

    describe('rate limiter', () => {
      it('allows exactly max hits in a window and reports remaining and reset', async () => {
        const limiter = stores.rateLimiter('t', 3, 10_000);
        const k = key();
        const results = [];
        for (let i = 0; i < 4; i++) results.push(await limiter.hit(k, 1_000_000 + i));
        expect(results.map((r) => r.allowed)).toEqual([true, true, true, false]);
        expect(results.map((r) => r.remaining)).toEqual([2, 1, 0, 0]);
        expect(results[3]!.limit).toBe(3);
        expect(results[3]!.resetSeconds).toBe(10);
      });

      it('slides: a hit frees its slot exactly one window later', async () => {
        const limiter = stores.rateLimiter('t', 2, 1_000);
        const k = key();
        expect((await limiter.hit(k, 5_000)).allowed).toBe(true);
        expect((await limiter.hit(k, 5_500)).allowed).toBe(true);
        expect((await limiter.hit(k, 5_999)).allowed).toBe(false);
        expect((await limiter.hit(k, 6_000)).allowed).toBe(true); // the 5_000 hit has left
        expect((await limiter.hit(k, 6_100)).allowed).toBe(false);
        expect((await limiter.hit(k, 6_500)).allowed).toBe(true); // the 5_500 hit has left
      });

      it('keeps keys and limiter names apart', async () => {
        const a = stores.rateLimiter('a', 1, 10_000);
        const b = stores.rateLimiter('b', 1, 10_000);
        const k = key();
        expect((await a.hit(k, 1)).allowed).toBe(true);
        expect((await a.hit(key(), 1)).allowed).toBe(true);
        expect((await b.hit(k, 1)).allowed).toBe(true);
        expect((await a.hit(k, 2)).allowed).toBe(false);
      });

      it('never admits more than max under 200 concurrent hits', async () => {
        const limiter = stores.rateLimiter('t', 50, 60_000);
        const k = key();
        const results = await Promise.all(Array.from({ length: 200 }, () => limiter.hit(k, Date.now())));
        expect(results.filter((r) => r.allowed)).toHaveLength(50);
      });
    });

    describe('monthly quota', () => {
      it('counts up to the limit and refuses after it without counting', async () => {
        const k = key();
        const counts = [];
        for (let i = 0; i < 4; i++) counts.push(await stores.quota.consume(k, 3, 1, 60));
        expect(counts).toEqual([
          { allowed: true, count: 1 },
          { allowed: true, count: 2 },
          { allowed: true, count: 3 },
          { allowed: false, count: 3 },
        ]);
        expect(await stores.quota.consume(k, 3, 0, 60)).toEqual({ allowed: false, count: 3 });
      });

      it('treats limit 0 as unlimited and amount 0 as a check', async () => {
        const k = key();
        for (let i = 0; i < 5; i++) await stores.quota.consume(k, 0, 1, 60);
        expect(await stores.quota.consume(k, 0, 0, 60)).toEqual({ allowed: true, count: 5 });
        expect(await stores.quota.consume(k, 10, 0, 60)).toEqual({ allowed: true, count: 5 });
      });

      it('never overshoots under 300 concurrent consumers', async () => {
        const k = key();
        const results = await Promise.all(
          Array.from({ length: 300 }, () => stores.quota.consume(k, 100, 1, 60)),
        );
        expect(results.filter((r) => r.allowed)).toHaveLength(100);
        expect(Math.max(...results.map((r) => r.count))).toBe(100);
      });
    });

    describe('sessions', () => {
      it('returns the same id while events keep coming, a new one after the timeout', async () => {
        const k = key();
        const ttl = 1_000;
        expect(await stores.sessions.touch(k, () => 'id-1', ttl)).toBe('id-1');
        expect(await stores.sessions.touch(k, () => 'id-2', ttl)).toBe('id-1');
        await new Promise((r) => setTimeout(r, 600));
        expect(await stores.sessions.touch(k, () => 'id-3', ttl)).toBe('id-1');
        await new Promise((r) => setTimeout(r, 600));
        // 1.2 s after the first event, but each touch slid the expiry: still the same session.
        expect(await stores.sessions.touch(k, () => 'id-4', ttl)).toBe('id-1');
        await new Promise((r) => setTimeout(r, 1_300));
        expect(await stores.sessions.touch(k, () => 'id-5', ttl)).toBe('id-5');
      });

      it('hands one id to concurrent first events of a visitor', async () => {
        const k = key();
        const ids = await Promise.all(
          Array.from({ length: 50 }, (_, i) => stores.sessions.touch(k, () => `c-${i}`, 60_000)),
        );
        expect(new Set(ids).size).toBe(1);
      });
    });

    describe('once', () => {
      it('grants a key once until it expires or is released, even to concurrent claimers', async () => {
        const k = key();
        const claims = await Promise.all(Array.from({ length: 20 }, () => stores.once.claim(k, 60_000)));
        expect(claims.filter(Boolean)).toHaveLength(1);
        await stores.once.release(k);
        expect(await stores.once.claim(k, 60_000)).toBe(true);
        const short = key();
        expect(await stores.once.claim(short, 50)).toBe(true);
        await new Promise((r) => setTimeout(r, 120));
        expect(await stores.once.claim(short, 50)).toBe(true);
      });
    });

    describe('config channel', () => {
      it('delivers published site ids to subscribers until they unsubscribe', async () => {
        const seen: number[] = [];
        let resolveFirst: () => void = () => {};
        const first = new Promise<void>((r) => {
          resolveFirst = r;
        });
        const unsubscribe = await stores.channel.subscribe((id) => {
          seen.push(id);
          resolveFirst();
        });
        await stores.channel.publish(42);
        await first;
        expect(seen).toEqual([42]);
        await unsubscribe();
      });
    });

    it('answers ping', async () => {
      await expect(stores.ping()).resolves.toBeUndefined();
    });
  });
}
