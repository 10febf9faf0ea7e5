/**
 * @trackhouse/node — send pageviews and custom events to a trackhouse (or Rybbit-compatible)
 * server. Zero runtime dependencies; never throws from a send, never crashes the host process.
 */

export type PropertyValue = string | number | boolean | (string | number | boolean)[];
export type Properties = Record<string, PropertyValue>;

/** Event fields of the tracking API (SPEC section 6). */
export interface Payload {
  pathname?: string;
  hostname?: string;
  page_title?: string;
  querystring?: string;
  referrer?: string;
  user_agent?: string;
  ip_address?: string;
  user_id?: string;
  language?: string;
  screenWidth?: number;
  screenHeight?: number;
}

export interface TrackResult {
  ok: boolean;
  /** HTTP status of the last attempt; 0 when no answer came (network error, timeout, closed). */
  status: number;
  error?: string;
}

export interface TrackhouseOptions {
  /** The API root, ending in `/api` (a trailing slash is fine), e.g. `https://stats.example.com/api`. */
  analyticsHost: string;
  siteId: string | number;
  apiKey: string;
  /** Log each request (never the key) with console.debug. */
  debug?: boolean;
  /** Send through `/track/batch`: at most `maxEvents` per request, at least every `flushIntervalMs`. */
  batch?: { maxEvents?: number; flushIntervalMs?: number };
  /** Per-attempt timeout (default 10 s). */
  timeoutMs?: number;
  /** Retries after the first attempt for network errors, 5xx and 429 (default 3). */
  maxRetries?: number;
  /** First backoff delay, doubled per retry, unless the server sends Retry-After (default 500 ms). */
  retryDelayMs?: number;
}

interface Queued {
  event: Record<string, unknown>;
  resolve: (r: TrackResult) => void;
}

const MAX_RETRY_AFTER_MS = 60_000;

function fail(message: string): never {
  throw new TypeError(`Trackhouse: ${message}`);
}

function checkProperties(properties: unknown): Properties | undefined {
  if (properties === undefined) return undefined;
  if (properties === null || typeof properties !== 'object' || Array.isArray(properties)) {
    fail('properties must be an object');
  }
  const scalar = (v: unknown) =>
    typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
  for (const [key, value] of Object.entries(properties)) {
    const ok = scalar(value) || (Array.isArray(value) && value.every(scalar));
    if (!ok) fail(`property "${key}" must be a string, finite number, boolean, or an array of these`);
  }
  return properties as Properties;
}

export class Trackhouse {
  private readonly endpoint: string;
  private readonly siteId: string;
  private readonly apiKey: string;
  private readonly debug: boolean;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly retryDelayMs: number;
  private readonly batch: { maxEvents: number; flushIntervalMs: number } | undefined;
  private queue: Queued[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;
  private inFlight = new Set<Promise<void>>();
  private closed = false;

  constructor(options: TrackhouseOptions) {
    if (!options || typeof options !== 'object') fail('options are required');
    const host = options.analyticsHost;
    if (typeof host !== 'string' || host.trim() === '') fail('analyticsHost is required');
    let url: URL;
    try {
      url = new URL(host.trim());
    } catch {
      fail(`analyticsHost is not a URL: ${host}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') fail('analyticsHost must be an http(s) URL');
    if (!/\/api\/?$/.test(url.pathname))
      fail('analyticsHost must end in /api, e.g. https://stats.example.com/api');
    this.endpoint = url.toString().replace(/\/+$/, '');
    const siteId = String(options.siteId ?? '').trim();
    if (!/^[1-9]\d*$/.test(siteId)) fail('siteId must be a positive integer (number or string)');
    this.siteId = siteId;
    if (typeof options.apiKey !== 'string' || options.apiKey.trim() === '') fail('apiKey is required');
    this.apiKey = options.apiKey.trim();
    this.debug = options.debug === true;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.maxRetries = options.maxRetries ?? 3;
    this.retryDelayMs = options.retryDelayMs ?? 500;
    if (!(this.timeoutMs > 0)) fail('timeoutMs must be positive');
    if (!Number.isInteger(this.maxRetries) || this.maxRetries < 0)
      fail('maxRetries must be a whole number ≥ 0');
    if (options.batch) {
      const maxEvents = options.batch.maxEvents ?? 100;
      const flushIntervalMs = options.batch.flushIntervalMs ?? 2_000;
      if (!Number.isInteger(maxEvents) || maxEvents < 1 || maxEvents > 1000)
        fail('batch.maxEvents must be 1..1000');
      if (!(flushIntervalMs > 0)) fail('batch.flushIntervalMs must be positive');
      this.batch = { maxEvents, flushIntervalMs };
      this.timer = setInterval(() => void this.flush(), flushIntervalMs);
      this.timer.unref?.();
    }
  }

  /** Tracks a pageview. */
  pageview(payload: Payload = {}): Promise<TrackResult> {
    return this.track({ ...payload, type: 'pageview' });
  }

  /** Tracks a custom event; properties are strings, numbers, booleans or arrays of these. */
  event(eventName: string, payload: Payload = {}, properties?: Properties): Promise<TrackResult> {
    if (typeof eventName !== 'string' || eventName.length === 0 || eventName.length > 256) {
      fail('eventName must be a non-empty string of at most 256 characters');
    }
    const checked = checkProperties(properties);
    return this.track({
      ...payload,
      type: 'custom_event',
      event_name: eventName,
      ...(checked ? { properties: JSON.stringify(checked) } : {}),
    });
  }

  /** Sends every queued event now (batching mode); resolves when they were answered. */
  async flush(): Promise<void> {
    while (this.queue.length > 0) {
      const take = this.queue.splice(0, this.batch?.maxEvents ?? this.queue.length);
      await this.track0(this.sendBatch(take));
    }
    await Promise.all([...this.inFlight]);
  }

  /** Flushes and stops the batching timer; later calls resolve `{ok: false, error: 'closed'}`. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }

  private track(fields: Record<string, unknown>): Promise<TrackResult> {
    if (this.closed) return Promise.resolve({ ok: false, status: 0, error: 'closed' });
    // Every event carries an id of its own that each retry repeats: when an answer is lost
    // after the server stored the event, the retry is recognised and stored once.
    const event = { site_id: this.siteId, event_id: crypto.randomUUID(), ...fields };
    if (!this.batch) return this.send('/track', event).then(({ result }) => result);
    return new Promise((resolve) => {
      this.queue.push({ event, resolve });
      if (this.queue.length >= this.batch!.maxEvents) {
        const take = this.queue.splice(0, this.batch!.maxEvents);
        void this.track0(this.sendBatch(take));
      }
    });
  }

  private track0(p: Promise<void>): Promise<void> {
    this.inFlight.add(p);
    return p.finally(() => this.inFlight.delete(p));
  }

  private async sendBatch(items: Queued[]): Promise<void> {
    const { result, body } = await this.send('/track/batch', { events: items.map((i) => i.event) });
    const perItem = (body as { results?: { index: number; success: boolean; error?: string }[] } | undefined)
      ?.results;
    items.forEach((item, index) => {
      const r = perItem?.[index];
      if (!result.ok || !r) item.resolve(result);
      else
        item.resolve(
          r.success
            ? { ok: true, status: result.status }
            : { ok: false, status: result.status, error: r.error ?? 'rejected' },
        );
    });
  }

  /** One request with retries; never throws. */
  private async send(path: string, body: unknown): Promise<{ result: TrackResult; body?: unknown }> {
    const url = `${this.endpoint}${path}`;
    const text = JSON.stringify(body);
    let delay = this.retryDelayMs;
    for (let attempt = 0; ; attempt++) {
      const started = Date.now();
      let status = 0;
      let error: string | undefined;
      let retryAfterMs: number | undefined;
      let answer: unknown;
      try {
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${this.apiKey}` },
          body: text,
          signal: AbortSignal.timeout(this.timeoutMs),
        });
        status = res.status;
        const raw = await res.text();
        try {
          answer = raw ? JSON.parse(raw) : undefined;
        } catch {
          answer = undefined;
        }
        if (!res.ok) error = (answer as { error?: string } | undefined)?.error ?? `HTTP ${res.status}`;
        const header = res.headers.get('retry-after');
        if (header && /^\d+$/.test(header))
          retryAfterMs = Math.min(Number(header) * 1000, MAX_RETRY_AFTER_MS);
      } catch (err) {
        error =
          err instanceof Error
            ? err.name === 'TimeoutError'
              ? `timed out after ${this.timeoutMs} ms`
              : err.message
            : String(err);
      }
      this.log(
        `POST ${url} → ${status || 'no answer'} in ${Date.now() - started} ms${error ? ` (${error})` : ''}`,
      );
      const retryable = status === 0 || status === 429 || status >= 500;
      if (!error) return { result: { ok: true, status }, body: answer };
      if (!retryable || attempt >= this.maxRetries)
        return { result: { ok: false, status, error }, body: answer };
      await new Promise((r) => setTimeout(r, retryAfterMs ?? delay));
      delay *= 2;
    }
  }

  private log(message: string): void {
    // The key travels only in the Authorization header, which is never logged.
    if (this.debug) console.debug(`[trackhouse] ${message}`);
  }
}
