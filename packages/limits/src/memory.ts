import { EventEmitter } from 'node:events';
import type { ConfigChannel, MonthlyQuota, OnceStore, RateLimiter, SessionStore, Stores } from './types';

/** In-process stores for standalone mode: one process, so a Map is the shared state. */
export function createMemoryStores(): Stores {
  const sessions = new Map<string, { id: string; expiresAt: number }>();
  const windows = new Map<string, number[]>();
  const counters = new Map<string, { count: number; expiresAt: number }>();
  const events = new EventEmitter();
  events.setMaxListeners(0);

  // Expired entries are swept so memory stays bounded by the active keys.
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [k, v] of sessions) if (v.expiresAt <= now) sessions.delete(k);
    for (const [k, v] of counters) if (v.expiresAt <= now) counters.delete(k);
    for (const [k, until] of claims) if (until <= now) claims.delete(k);
  }, 60_000);
  sweep.unref();

  const rateLimiter = (name: string, max: number, windowMs: number): RateLimiter => ({
    async hit(key, nowMs) {
      const id = `${name}:${key}`;
      const log = windows.get(id) ?? [];
      while (log.length > 0 && log[0]! <= nowMs - windowMs) log.shift();
      const allowed = log.length < max;
      if (allowed) log.push(nowMs);
      if (log.length === 0) windows.delete(id);
      else windows.set(id, log);
      const oldest = log[0] ?? nowMs;
      return {
        allowed,
        limit: max,
        remaining: Math.max(0, max - log.length),
        resetSeconds: Math.max(1, Math.ceil((oldest + windowMs - nowMs) / 1000)),
      };
    },
  });

  const quota: MonthlyQuota = {
    async consume(key, limit, amount, ttlSeconds) {
      const now = Date.now();
      const entry = counters.get(key);
      const current = entry && entry.expiresAt > now ? entry.count : 0;
      if (limit > 0 && current >= limit) return { allowed: false, count: current };
      const count = current + amount;
      counters.set(key, { count, expiresAt: now + ttlSeconds * 1000 });
      return { allowed: true, count };
    },
  };

  const sessionStore: SessionStore = {
    async touch(key, createId, ttlMs) {
      const now = Date.now();
      const entry = sessions.get(key);
      const id = entry && entry.expiresAt > now ? entry.id : createId();
      sessions.set(key, { id, expiresAt: now + ttlMs });
      return id;
    },
  };

  const claims = new Map<string, number>();
  const once: OnceStore = {
    async claim(key, ttlMs) {
      const now = Date.now();
      const until = claims.get(key);
      if (until !== undefined && until > now) return false;
      claims.set(key, now + ttlMs);
      return true;
    },
    async release(key) {
      claims.delete(key);
    },
  };

  const channel: ConfigChannel = {
    async publish(siteId) {
      events.emit('site', siteId);
    },
    async subscribe(handler) {
      events.on('site', handler);
      return async () => {
        events.off('site', handler);
      };
    },
  };

  return {
    kind: 'memory',
    rateLimiter,
    quota,
    sessions: sessionStore,
    once,
    channel,
    async ping() {},
    async close() {
      clearInterval(sweep);
      events.removeAllListeners();
    },
  };
}
