import type { Stores } from './types';

/**
 * Production stores that keep tracking up while Redis is unreachable: each call goes to Redis,
 * and when that fails it is answered by the in-process form instead. During an outage limits
 * hold per replica rather than across replicas, and a visitor may get a second session id on
 * another replica; events keep being accepted, which is what an analytics ingest is for.
 * `onFallback` sees each failure (log and count it).
 */
export function withLocalFallback(
  primary: Stores,
  local: Stores,
  onFallback: (err: unknown) => void,
  retryAfterMs = 1_000,
): Stores {
  // After a failure, calls go straight to the local form for `retryAfterMs`: an outage costs
  // one timed-out command per second instead of one per request.
  let skipUntil = 0;
  const guard =
    <A extends unknown[], R>(main: (...a: A) => Promise<R>, spare: (...a: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      if (Date.now() < skipUntil) return spare(...args);
      try {
        return await main(...args);
      } catch (err) {
        skipUntil = Date.now() + retryAfterMs;
        onFallback(err);
        return spare(...args);
      }
    };
  return {
    kind: primary.kind,
    rateLimiter(name, max, windowMs) {
      const main = primary.rateLimiter(name, max, windowMs);
      const spare = local.rateLimiter(name, max, windowMs);
      return { hit: guard(main.hit, spare.hit) };
    },
    quota: { consume: guard(primary.quota.consume, local.quota.consume) },
    sessions: { touch: guard(primary.sessions.touch, local.sessions.touch) },
    once: {
      claim: guard(primary.once.claim, local.once.claim),
      release: guard(primary.once.release, local.once.release),
    },
    channel: {
      // A lost notification is covered by the 2-second cache lifetime of every replica.
      publish: guard(primary.channel.publish, local.channel.publish),
      subscribe: primary.channel.subscribe,
    },
    ping: primary.ping,
    async close() {
      await primary.close();
      await local.close();
    },
  };
}
