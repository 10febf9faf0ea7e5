export interface RateLimitResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the oldest counted request leaves the window (a slot frees up). */
  resetSeconds: number;
}

/** Sliding-window log: at most `max` hits per key in any window of `windowMs`. */
export interface RateLimiter {
  hit(key: string, nowMs: number): Promise<RateLimitResult>;
}

export interface QuotaResult {
  allowed: boolean;
  /** The count after this call. */
  count: number;
}

/**
 * Counts per key (site and month). One atomic step: allowed iff `limit` is 0 (unlimited) or the
 * count is below it, and only then is `amount` added; so the count never passes the limit.
 * `amount` 0 checks without counting.
 */
export interface MonthlyQuota {
  consume(key: string, limit: number, amount: number, ttlSeconds: number): Promise<QuotaResult>;
}

/** Session id per (site, visitor), created on first use, expiring after `ttlMs` without events. */
export interface SessionStore {
  /** The live session id, extended; `createId` makes the id of a new session. */
  touch(key: string, createId: () => string, ttlMs: number): Promise<string>;
}

/** Remembers ids for a while: client-supplied event ids are stored once however often sent. */
export interface OnceStore {
  /** True the first time a key is claimed within `ttlMs`. */
  claim(key: string, ttlMs: number): Promise<boolean>;
  /** Forgets a claim (the event it guarded was not stored after all). */
  release(key: string): Promise<void>;
}

/** Site configuration changed: every ingest replica drops its cached copy. */
export interface ConfigChannel {
  publish(siteId: number): Promise<void>;
  subscribe(handler: (siteId: number) => void): Promise<() => Promise<void>>;
}

export interface Stores {
  readonly kind: 'redis' | 'memory';
  rateLimiter(name: string, max: number, windowMs: number): RateLimiter;
  readonly quota: MonthlyQuota;
  readonly sessions: SessionStore;
  readonly once: OnceStore;
  readonly channel: ConfigChannel;
  ping(): Promise<void>;
  close(): Promise<void>;
}
