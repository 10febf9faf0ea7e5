import { storableDeep } from '@trackhouse/core';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase, runEntry, type StartedServer, startEntry, tempDir } from '../../../test/helpers';

const BROWSER =
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

/** Stands for raw bytes that are not UTF-8; replaced in the encoded body (see `encode`). */
const RAW = '\ue000';
const RAW_BYTES = [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0x80, 0x80]];

const hostileChar = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '\ud800',
      '\udbff',
      '\udc00',
      '\udfff',
      '\u0000',
      '\u0001',
      '\u001b',
      '\u007f',
      '\u202e',
      '\u2066',
      '\u200b',
      '\u200d',
      '\ufeff',
      '\ufffd',
      '😀',
      '\u{10ffff}',
      '"',
      '\\',
      '\n',
      RAW,
    ),
  },
);
const hostile = (maxLength: number) => fc.array(hostileChar, { maxLength }).map((chars) => chars.join(''));

/** JSON text as bytes, each RAW marker replaced by a byte sequence no UTF-8 decoder accepts. */
function encode(body: unknown): Uint8Array {
  const parts = JSON.stringify(body).split(RAW);
  const chunks: Buffer[] = [];
  parts.forEach((part, i) => {
    if (i > 0) chunks.push(Buffer.from(RAW_BYTES[i % RAW_BYTES.length]!));
    chunks.push(Buffer.from(part));
  });
  return Buffer.concat(chunks);
}

/** What the stored event must say: the bytes as any UTF-8 decoder reads them, made storable. */
function decoded(bytes: Uint8Array): unknown {
  return storableDeep(JSON.parse(new TextDecoder().decode(bytes)));
}

const TYPES = ['pageview', 'custom_event', 'outbound'] as const;
let sequence = 0;
const eventId = () => `0190dddd-0000-7000-8000-${(++sequence).toString(16).padStart(12, '0')}`;

const hostileEvent = (siteId: number) =>
  fc
    .record({
      type: fc.constantFrom(...TYPES),
      pathname: hostile(40),
      hostname: hostile(20),
      page_title: hostile(40),
      querystring: hostile(20),
      user_id: hostile(20),
      language: hostile(6),
      event_name: hostile(20).map((n) => `e${n}`),
      properties: fc.dictionary(hostile(8), hostile(12), { maxKeys: 3 }).map((o) => JSON.stringify(o)),
    })
    .map((e) => ({ site_id: siteId, event_id: eventId(), ...e }));

type Sent = ReturnType<typeof decodedEvent>;
function decodedEvent(item: unknown) {
  const e = item as Record<string, string>;
  return {
    event_id: e.event_id!,
    type: e.type!,
    pathname: e.pathname!,
    hostname: e.hostname!,
    page_title: e.page_title!,
    querystring: e.querystring!,
    identified_user_id: e.user_id!,
    language: e.language!,
    event_name: e.type === 'pageview' ? '' : e.event_name!,
    properties: storableDeep(JSON.parse(e.properties!)) as unknown,
  };
}

interface Site {
  siteId: number;
  apiKey: string;
}

/** Sends one generated request; returns the decoded events the server acknowledged as stored. */
async function send(url: string, site: Site, kind: 'keyless' | 'keyed' | 'batch', events: unknown[]) {
  const body = kind === 'batch' ? { events } : events[0];
  const bytes = encode(body);
  const res = await fetch(`${url}${kind === 'batch' ? '/api/track/batch' : '/api/track'}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'user-agent': BROWSER,
      ...(kind === 'keyless' ? {} : { authorization: `Bearer ${site.apiKey}` }),
    },
    body: bytes,
  });
  const answer = (await res.json()) as Record<string, unknown>;
  expect(res.status, JSON.stringify(answer)).toBeLessThan(500);
  if (res.status >= 400) {
    expect(answer).toMatchObject({ success: false, error: expect.any(String), code: expect.any(String) });
    return [];
  }
  const sent = decoded(bytes);
  const items = kind === 'batch' ? (sent as { events: unknown[] }).events : [sent];
  if (kind !== 'batch') return answer.tracked === false ? [] : items.map(decodedEvent);
  const results = answer.results as { index: number; success: boolean; tracked?: boolean }[];
  return results.filter((r) => r.success && r.tracked !== false).map((r) => decodedEvent(items[r.index]));
}

async function hostileTraffic(url: string, site: Site, acknowledged: Map<string, Sent>, runs: number) {
  const kind = fc.constantFrom('keyless' as const, 'keyed' as const, 'batch' as const);
  await fc.assert(
    fc.asyncProperty(
      kind,
      fc.array(hostileEvent(site.siteId), { minLength: 1, maxLength: 5 }),
      async (k, list) => {
        for (const e of await send(url, site, k, k === 'batch' ? list : list.slice(0, 1)))
          acknowledged.set(e.event_id, e);
      },
    ),
    { numRuns: runs },
  );
}

async function cleanTraffic(url: string, site: Site, acknowledged: Map<string, Sent>, label: string) {
  for (let i = 0; i < 10; i++) {
    const event = {
      site_id: site.siteId,
      event_id: eventId(),
      type: 'pageview',
      pathname: `/${label}/${i}`,
      hostname: 'example.com',
      page_title: 'Clean',
      querystring: '',
      user_id: '',
      language: 'en',
      event_name: 'x',
      properties: '{}',
    };
    for (const e of await send(url, site, 'keyless', [event])) acknowledged.set(e.event_id, e);
  }
}

/** Every stored event of the site through the events API, newest first, following the cursor. */
async function readAll(url: string, site: Site): Promise<Map<string, Record<string, unknown>>> {
  const found = new Map<string, Record<string, unknown>>();
  let cursor: string | null = null;
  do {
    const query: string = `page_size=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const res = await fetch(`${url}/api/sites/${site.siteId}/events?${query}`, {
      headers: { authorization: `Bearer ${site.apiKey}` },
    });
    expect(res.status).toBe(200);
    const page = (await res.json()) as { data: Record<string, unknown>[]; cursor: { next: string | null } };
    for (const e of page.data) found.set(e.event_id as string, e);
    cursor = page.cursor.next;
  } while (cursor);
  return found;
}

/** Waits until every acknowledged event is readable (the flusher runs every 100 ms), then compares. */
async function expectReadable(url: string, site: Site, acknowledged: Map<string, Sent>) {
  const deadline = Date.now() + 30_000;
  let stored = await readAll(url, site);
  while ([...acknowledged.keys()].some((id) => !stored.has(id)) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    stored = await readAll(url, site);
  }
  const missing = [...acknowledged.keys()].filter((id) => !stored.has(id));
  expect(missing, 'acknowledged events missing from the events API').toEqual([]);
  expect(stored.size).toBe(acknowledged.size);
  for (const [id, sent] of acknowledged) {
    const row = stored.get(id)!;
    const { properties, ...fields } = sent;
    expect({ ...row, properties: JSON.parse(row.properties as string) }).toMatchObject({
      ...fields,
      properties,
    });
  }
}

describe('hostile input through the standalone server', () => {
  const servers: StartedServer[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    for (const c of cleanups.reverse()) await c();
  });

  it('reads back every acknowledged event, storable, after hostile traffic, a kill -9 and a restart', async () => {
    const db = await createTestDatabase();
    const dir = await tempDir('hostile');
    cleanups.push(db.drop, dir.remove);
    const env = {
      DATA_DIR: dir.path,
      DATABASE_URL: db.url,
      INGEST_FLUSH_INTERVAL_MS: '100',
      TRACK_RATE_LIMIT_MAX: '100000',
    };
    const init = await runEntry('apps/cli/src/main.ts', ['init', '--domain', 'example.com', '--json'], env);
    expect(init.code, init.stderr).toBe(0);
    const site = JSON.parse(init.stdout) as Site;
    const acknowledged = new Map<string, Sent>();

    const first = await startEntry('apps/server/src/main.ts', env);
    servers.push(first);
    await hostileTraffic(first.url, site, acknowledged, 120);
    await cleanTraffic(first.url, site, acknowledged, 'before-kill');
    first.child.kill('SIGKILL');
    await first.stop();

    // The buffer of the killed process is replayed; hostile traffic goes on, then clean traffic.
    const second = await startEntry('apps/server/src/main.ts', env);
    servers.push(second);
    await hostileTraffic(second.url, site, acknowledged, 60);
    await cleanTraffic(second.url, site, acknowledged, 'after-kill');
    expect(acknowledged.size).toBeGreaterThan(100);
    // The traffic did carry what the stores cannot hold: it reached them as U+FFFD.
    const texts = [...acknowledged.values()].map((e) => JSON.stringify(e));
    expect(texts.filter((t) => t.includes('\ufffd')).length).toBeGreaterThan(20);
    await expectReadable(second.url, site, acknowledged);
    expect(await second.stop('SIGTERM')).toBe(0);

    const third = await startEntry('apps/server/src/main.ts', env);
    servers.push(third);
    await expectReadable(third.url, site, acknowledged);
    expect(await third.stop('SIGTERM')).toBe(0);
  }, 240_000);
});
