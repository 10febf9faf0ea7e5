interface Entry<V> {
  value: Promise<V>;
  expiresAt: number;
}

/**
 * Loads each key at most once per `ttlMs` (concurrent misses share one load), so the tracking
 * hot path reads Postgres a few times per second at most, whatever the request rate. A failed
 * load is not cached. `delete` drops an entry at once (config-change notifications).
 */
export class TtlCache<K, V> {
  private readonly entries = new Map<K, Entry<V>>();

  constructor(
    private readonly ttlMs: number,
    private readonly load: (key: K) => Promise<V>,
    private readonly maxEntries = 100_000,
  ) {}

  get(key: K, now = Date.now()): Promise<V> {
    const hit = this.entries.get(key);
    if (hit && hit.expiresAt > now) return hit.value;
    if (this.entries.size >= this.maxEntries) this.sweep(now);
    const value = this.load(key);
    const entry = { value, expiresAt: now + this.ttlMs };
    this.entries.set(key, entry);
    value.catch(() => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    });
    return value;
  }

  delete(key: K): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  private sweep(now: number): void {
    for (const [k, e] of this.entries) if (e.expiresAt <= now) this.entries.delete(k);
    // Still full of live entries: drop the oldest insertions.
    for (const k of this.entries.keys()) {
      if (this.entries.size < this.maxEntries) break;
      this.entries.delete(k);
    }
  }
}
