import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { uuidv7 } from '@trackhouse/core';
import type { ClickHouse } from './client';
import type { StoredEvent } from './rows';

export interface SeedOptions {
  siteId: number;
  events: number;
  days: number;
  /** End of the generated period (default: now). */
  end?: Date;
  seed?: number;
  /** Chance that an event reuses the previous event's millisecond (paging ties). */
  tieRate?: number;
}

const PATHS = [
  '/',
  '/pricing',
  '/blog',
  '/blog/launch',
  '/blog/2026/ten-tips',
  '/docs',
  '/docs/api/events',
  '/signup',
  '/login',
  '/checkout/cart',
  '/checkout/pay',
  '/about',
];
const CUSTOM = ['signup', 'add_to_cart', 'purchase', 'play', 'share'];
const PLANS = ['free', 'pro', 'team'];
const SOURCES: [referrer: string, channel: string, utmSource: string, utmMedium: string][] = [
  ['', 'Direct', '', ''],
  ['', 'Direct', '', ''],
  ['https://www.google.com/', 'Organic Search', '', ''],
  ['https://duckduckgo.com/', 'Organic Search', '', ''],
  ['https://www.google.com/', 'Paid Search', 'google', 'cpc'],
  ['https://t.co/x', 'Organic Social', '', ''],
  ['https://news.ycombinator.com/', 'Organic Social', '', ''],
  ['', 'Email', 'newsletter', 'email'],
  ['https://chatgpt.com/', 'AI', '', ''],
  ['https://blog.partner.io/post', 'Referral', '', ''],
];
const CLIENTS: [
  browser: string,
  version: string,
  os: string,
  osVersion: string,
  device: string,
  width: number,
][] = [
  ['Chrome', '131', 'Windows', '10', 'desktop', 1920],
  ['Chrome', '130', 'macOS', '10.15.7', 'desktop', 1440],
  ['Firefox', '132', 'Windows', '10', 'desktop', 1366],
  ['Safari', '17', 'macOS', '14.6', 'desktop', 1512],
  ['Mobile Safari', '17', 'iOS', '17.5', 'mobile', 390],
  ['Chrome', '131', 'Android', '14', 'mobile', 412],
  ['Samsung Internet', '25', 'Android', '13', 'mobile', 384],
  ['Mobile Safari', '17', 'iOS', '17.4', 'tablet', 820],
  ['Edge', '130', 'Windows', '11', 'desktop', 2560],
];
const PLACES: [country: string, region: string, city: string, lat: number, lon: number][] = [
  ['US', 'California', 'San Francisco', 37.77, -122.42],
  ['US', 'New York', 'New York', 40.71, -74.0],
  ['GB', 'England', 'London', 51.51, -0.13],
  ['DE', 'Berlin', 'Berlin', 52.52, 13.4],
  ['FR', 'Île-de-France', 'Paris', 48.86, 2.35],
  ['IN', 'Karnataka', 'Bengaluru', 12.97, 77.59],
  ['BR', 'São Paulo', 'São Paulo', -23.55, -46.63],
  ['JP', 'Tokyo', 'Tokyo', 35.68, 139.69],
];
const LANGS = ['en-US', 'en-GB', 'de-DE', 'fr-FR', 'pt-BR', 'ja-JP'];

/** A small deterministic PRNG (mulberry32): the same seed, the same data. */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const chTime = (ms: number) => {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
};

/**
 * Realistic events, reproducible from `seed`: visitors with sessions of 1–12 events a few
 * seconds to minutes apart, mostly pageviews, some custom events with properties and outbound
 * clicks, a mix of sources, clients and places. Sessions start at an even rate over the period,
 * in time order.
 */
export function* generateEvents(opts: SeedOptions): Generator<StoredEvent> {
  const r = rng(opts.seed ?? 1);
  const pick = <T>(list: readonly T[]) => list[Math.floor(r() * list.length)]!;
  const end = (opts.end ?? new Date()).getTime();
  const span = opts.days * 86_400_000;
  const visitors = Math.max(1, Math.floor(opts.events / 12));
  const tieRate = opts.tieRate ?? 0;
  let produced = 0;
  while (produced < opts.events) {
    const visitor = Math.floor(r() * visitors);
    const userId = visitor.toString(16).padStart(16, '0');
    const client = CLIENTS[visitor % CLIENTS.length]!;
    const place = PLACES[(visitor >> 3) % PLACES.length]!;
    const language = LANGS[visitor % LANGS.length]!;
    const [referrer, channel, utmSource, utmMedium] = pick(SOURCES);
    const querystring = utmSource ? `?utm_source=${utmSource}&utm_medium=${utmMedium}` : '';
    const length = Math.min(opts.events - produced, 1 + Math.floor(r() * r() * 12));
    // Sessions start in time order at an even rate, as live traffic arrives; the id carries the
    // start time, as the ingest service's ids do.
    let ms = end - span + Math.floor(((produced + r()) / opts.events) * span);
    const sessionId = uuidv7(ms);
    for (let i = 0; i < length; i++) {
      if (i > 0 && r() >= tieRate) ms += 1_000 + Math.floor(r() * 240_000);
      if (ms >= end) ms = end - 1;
      const roll = r();
      const type = i === 0 || roll < 0.75 ? 'pageview' : roll < 0.95 ? 'custom_event' : 'outbound';
      const pathname = pick(PATHS);
      let eventName = '';
      let properties: Record<string, unknown> = {};
      if (type === 'custom_event') {
        eventName = pick(CUSTOM);
        properties = { plan: pick(PLANS), value: Math.floor(r() * 5), trial: r() < 0.3 };
      } else if (type === 'outbound') {
        properties = {
          url: pick([
            'https://github.com/trackhouse',
            'https://docs.example.org/',
            'https://x.com/trackhouse',
          ]),
          text: 'link',
        };
      }
      const props: Record<string, string> = {};
      for (const [k, v] of Object.entries(properties))
        props[k] = typeof v === 'string' ? v : JSON.stringify(v);
      yield {
        site_id: opts.siteId,
        timestamp: chTime(ms),
        event_id: uuidv7(ms),
        type,
        event_name: eventName,
        properties: JSON.stringify(properties),
        props,
        session_id: sessionId,
        user_id: userId,
        identified_user_id: visitor % 10 === 0 ? `customer-${visitor}` : '',
        pathname,
        querystring: i === 0 ? querystring : '',
        hostname: 'example.com',
        page_title: `Page ${pathname}`,
        referrer: i === 0 ? referrer : '',
        channel,
        utm_source: utmSource,
        utm_medium: utmMedium,
        utm_campaign: utmSource ? 'fall' : '',
        utm_term: '',
        utm_content: '',
        browser: client[0],
        browser_version: client[1],
        operating_system: client[2],
        operating_system_version: client[3],
        device_type: client[4],
        language,
        country: place[0],
        region: place[1],
        city: place[2],
        lat: place[3],
        lon: place[4],
        screen_width: client[5],
        screen_height: Math.round(client[5] * 0.6),
      };
      produced++;
    }
  }
}

/** Inserts rows given as JSONEachRow text: the embedded engine reads a temporary file. */
async function insertLines(ch: ClickHouse, text: string, dir: string, n: number): Promise<void> {
  if (ch.kind === 'embedded') {
    const file = join(dir, `batch-${n}.ndjson`);
    const out = createWriteStream(file);
    out.end(text);
    await finished(out);
    const r = await ch.writer.exec({ query: `INSERT INTO events FROM INFILE '${file}' FORMAT JSONEachRow` });
    r.stream.resume();
    await rm(file);
  } else {
    const r = await ch.writer.exec({
      query: 'INSERT INTO events FORMAT JSONEachRow',
      values: Readable.from([text]),
    });
    r.stream.resume();
  }
}

/**
 * Inserts events in batches of `batchRows`, reporting progress: a generator (the CLI's seed,
 * millions of rows) or an array (tests, which keep the rows to compute expected answers).
 */
export async function insertEvents(
  ch: ClickHouse,
  events: Iterable<StoredEvent>,
  opts: { batchRows?: number; onProgress?: (done: number) => void } = {},
): Promise<number> {
  const batchRows = opts.batchRows ?? 200_000;
  const dir = await mkdtemp(join(tmpdir(), 'trackhouse-seed-'));
  let done = 0;
  try {
    const iterator = events[Symbol.iterator]();
    for (let batch = 0; ; batch++) {
      let text = '';
      let rows = 0;
      // next() by hand: breaking out of for…of would close a generator.
      for (let item = iterator.next(); !item.done; item = iterator.next()) {
        text += `${JSON.stringify(item.value)}\n`;
        if (++rows >= batchRows) break;
      }
      if (rows === 0) return done;
      await insertLines(ch, text, dir, batch);
      done += rows;
      opts.onProgress?.(done);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Generates and inserts events (the CLI's seed), then merges the session rollup's past days as
 * live traffic would have had them: weeks of history arrive here in minutes, while the table
 * merges a day's partition only an hour after its last insert.
 */
export async function seedEvents(
  ch: ClickHouse,
  opts: SeedOptions & { batchRows?: number; onProgress?: (done: number) => void },
): Promise<number> {
  const inserted = await insertEvents(ch, generateEvents(opts), opts);
  await compactSessionDays(ch, new Date());
  return inserted;
}

/**
 * Merges each partition of the session rollup (one per UTC day a session began) that holds
 * several parts, for the days before `today`. Returns the partitions merged.
 */
export async function compactSessionDays(ch: ClickHouse, today: Date): Promise<string[]> {
  const rows = await ch.query<{ id: string }>(
    `SELECT partition_id AS id FROM system.parts
     WHERE database = currentDatabase() AND table = 'sessions' AND active
     GROUP BY partition_id HAVING count() > 1 AND partition_id < {today:String}
     ORDER BY partition_id`,
    { today: today.toISOString().slice(0, 10).replaceAll('-', '') },
  );
  const ids = rows.map((r) => r.id).filter((id) => /^\d{8}$/.test(id));
  // A partition id is not a value OPTIMIZE can bind; these are eight digits from system.parts.
  for (const id of ids) await ch.command(`OPTIMIZE TABLE sessions PARTITION ID '${id}' FINAL`);
  return ids;
}
