import { Redis } from 'ioredis';
import type { ConfigChannel, MonthlyQuota, OnceStore, RateLimiter, SessionStore, Stores } from './types';

// KEYS[1] log (sorted set of hit times), KEYS[2] sequence for unique members;
// ARGV: now ms, window ms, max. Returns {allowed, count, oldest}.
const SLIDING_WINDOW = `
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local max = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local allowed = 0
if count < max then
  local seq = redis.call('INCR', KEYS[2])
  redis.call('PEXPIRE', KEYS[2], window)
  redis.call('ZADD', KEYS[1], now, now .. ':' .. seq)
  count = count + 1
  allowed = 1
end
redis.call('PEXPIRE', KEYS[1], window)
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2] or now
return {allowed, count, tonumber(oldest)}
`;

// KEYS[1] counter; ARGV: limit (0 = unlimited), amount, ttl seconds. Returns {allowed, count}.
const QUOTA = `
local limit = tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if limit > 0 and current >= limit then return {0, current} end
local count = redis.call('INCRBY', KEYS[1], tonumber(ARGV[2]))
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return {1, count}
`;

// KEYS[1] session; ARGV: candidate id, ttl ms. Returns the live id, extending it.
const SESSION = `
local id = redis.call('GET', KEYS[1])
if not id then id = ARGV[1] end
redis.call('SET', KEYS[1], id, 'PX', tonumber(ARGV[2]))
return id
`;

interface ScriptedRedis extends Redis {
  slidingWindow(
    log: string,
    seq: string,
    now: number,
    window: number,
    max: number,
  ): Promise<[number, number, number]>;
  quota(key: string, limit: number, amount: number, ttl: number): Promise<[number, number]>;
  session(key: string, candidate: string, ttl: number): Promise<string>;
}

/** Stores shared by every replica through one Redis; each check is one atomic Lua script. */
export function createRedisStores(
  url: string,
  opts: { commandTimeoutMs?: number; prefix?: string } = {},
): Stores {
  const PREFIX = opts.prefix ?? 'trackhouse:';
  const CONFIG_CHANNEL = `${PREFIX}site-config`;
  // A command fails after one reconnect attempt or `commandTimeoutMs`, so a caller can fall back
  // (see withLocalFallback) instead of holding requests while Redis is away.
  const redis = new Redis(url, {
    maxRetriesPerRequest: 1,
    commandTimeout: opts.commandTimeoutMs ?? 500,
  }) as ScriptedRedis;
  redis.defineCommand('slidingWindow', { numberOfKeys: 2, lua: SLIDING_WINDOW });
  redis.defineCommand('quota', { numberOfKeys: 1, lua: QUOTA });
  redis.defineCommand('session', { numberOfKeys: 1, lua: SESSION });
  // Keep failures out of the process's unhandled errors; callers see them as rejected commands.
  redis.on('error', () => {});
  let subscriber: Redis | undefined;

  const rateLimiter = (name: string, max: number, windowMs: number): RateLimiter => ({
    async hit(key, nowMs) {
      const base = `${PREFIX}rl:${name}:${key}`;
      const [allowed, count, oldest] = await redis.slidingWindow(base, `${base}:seq`, nowMs, windowMs, max);
      return {
        allowed: allowed === 1,
        limit: max,
        remaining: Math.max(0, max - count),
        resetSeconds: Math.max(1, Math.ceil((oldest + windowMs - nowMs) / 1000)),
      };
    },
  });

  const quota: MonthlyQuota = {
    async consume(key, limit, amount, ttlSeconds) {
      const [allowed, count] = await redis.quota(`${PREFIX}quota:${key}`, limit, amount, ttlSeconds);
      return { allowed: allowed === 1, count };
    },
  };

  const sessions: SessionStore = {
    // The script needs the candidate up front; it keeps it only for a new session.
    touch: (key, createId, ttlMs) => redis.session(`${PREFIX}session:${key}`, createId(), ttlMs),
  };

  const once: OnceStore = {
    async claim(key, ttlMs) {
      return (await redis.set(`${PREFIX}once:${key}`, '1', 'PX', ttlMs, 'NX')) === 'OK';
    },
    async release(key) {
      await redis.del(`${PREFIX}once:${key}`);
    },
  };

  const channel: ConfigChannel = {
    async publish(siteId) {
      await redis.publish(CONFIG_CHANNEL, String(siteId));
    },
    async subscribe(handler) {
      // The subscriber waits for Redis as long as it takes (no retry limit), so a process that
      // starts while Redis is away subscribes once it returns.
      subscriber ??= redis.duplicate({ maxRetriesPerRequest: null, commandTimeout: undefined });
      subscriber.on('error', () => {});
      const listener = (ch: string, message: string) => {
        if (ch === CONFIG_CHANNEL) handler(Number(message));
      };
      subscriber.on('message', listener);
      const subscribed = subscriber.subscribe(CONFIG_CHANNEL).then(() => true);
      subscribed.catch(() => {});
      // Start-up does not wait for an absent Redis: cached site configuration expires after
      // 2 seconds anyway, so a missed notification only delays a change by that much.
      await Promise.race([subscribed, new Promise((r) => setTimeout(r, 1_000).unref())]);
      return async () => {
        subscriber?.off('message', listener);
      };
    },
  };

  return {
    kind: 'redis',
    rateLimiter,
    quota,
    sessions,
    once,
    channel,
    async ping() {
      await redis.ping();
    },
    async close() {
      subscriber?.disconnect();
      redis.disconnect();
    },
  };
}
