import { createClickHouse, embeddedClickHousePath } from '@trackhouse/clickhouse';
import { afterAll, describe, expect, inject, it } from 'vitest';
import {
  createTestDatabase,
  runEntry,
  type StartedServer,
  startEntry,
  tempDir,
  uniqueName,
} from '../../../test/helpers';

const redisUrl = inject('redisUrl');

const BROWSER =
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<number> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': BROWSER, ...headers },
      body: JSON.stringify(body),
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0; // connection refused or reset: not acknowledged
  }
}

/** What a site has stored: events, the custom events' copy and the session rollup, counted. */
interface Stored {
  rows: number;
  distinct: number;
  custom: number;
  byName: number;
  byNameDistinct: number;
  sessions: number;
  rolled: number;
  rolledExact: number;
}

/** Rows and distinct event ids of a site in an embedded data directory no process holds. */
async function countStored(dataDir: string, siteId: number): Promise<Stored> {
  const ch = createClickHouse({
    kind: 'embedded',
    dataDir: embeddedClickHousePath(dataDir),
    queryPoolSize: 1,
  });
  try {
    const [r] = await ch.query<Stored>(
      `SELECT count() AS rows, uniqExact(event_id) AS distinct, countIf(type = 'custom_event') AS custom,
         (SELECT count() FROM events_by_name WHERE site_id = {s:UInt32}) AS byName,
         (SELECT uniqExact(event_id) FROM events_by_name WHERE site_id = {s:UInt32}) AS byNameDistinct,
         uniqExact(session_id) AS sessions,
         (SELECT count() FROM sessions FINAL WHERE site_id = {s:UInt32}) AS rolled,
         (SELECT count() FROM
            (SELECT session_id, min(timestamp) AS first, max(timestamp) AS last FROM events
             WHERE site_id = {s:UInt32} GROUP BY session_id) AS e
          INNER JOIN (SELECT session_id, session_start, session_end FROM sessions FINAL
             WHERE site_id = {s:UInt32}) AS r ON e.session_id = r.session_id
          WHERE e.first = r.session_start AND e.last = r.session_end) AS rolledExact
       FROM events WHERE site_id = {s:UInt32}`,
      { s: siteId },
    );
    if (!r) throw new Error('no count');
    return r;
  } finally {
    await ch.close();
  }
}

/** Faults that need real processes (and so their own embedded engines): no engine opened here
 * until those processes are gone. */
describe('ingest processes under faults', () => {
  const servers: StartedServer[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    for (const c of cleanups.reverse()) await c();
  });

  it('kill -9 during a burst loses no acknowledged event and stores none twice', async () => {
    const db = await createTestDatabase();
    const dir = await tempDir('kill9');
    cleanups.push(db.drop, dir.remove);
    const env = { DATA_DIR: dir.path, DATABASE_URL: db.url, INGEST_FLUSH_INTERVAL_MS: '200' };
    const init = await runEntry('apps/cli/src/main.ts', ['init', '--json'], env);
    const { siteId } = JSON.parse(init.stdout) as { siteId: number };

    const server = await startEntry('apps/server/src/main.ts', env);
    servers.push(server);
    let acknowledged = 0;
    let sent = 0;
    const worker = async (w: number) => {
      for (let i = 0; i < 100_000; i++) {
        sent++;
        const status = await post(`${server.url}/api/track`, {
          site_id: siteId,
          pathname: `/w${w}/${i}`,
          ip_address: '8.8.8.8',
          // Some custom events: the materialized view's table must come out of the replay whole too.
          ...(i % 4 === 0 ? { type: 'custom_event', event_name: 'tick' } : {}),
        });
        if (status === 200) acknowledged++;
        if (status === 0) return;
      }
    };
    const workers = Array.from({ length: 20 }, (_, w) => worker(w));
    const deadline = Date.now() + 60_000;
    while (acknowledged < 1500 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(acknowledged).toBeGreaterThanOrEqual(1500);
    server.child.kill('SIGKILL');
    await Promise.all(workers);
    expect(await server.stop()).toBeNull(); // killed by the signal

    // Restart: the buffer is replayed into ClickHouse; SIGTERM drains it and exits.
    const again = await startEntry('apps/server/src/main.ts', env);
    servers.push(again);
    expect(await again.stop('SIGTERM')).toBe(0);
    // The restart drained the buffer whole: a short count below then means a lost row, not rows
    // still waiting on disk. Its output goes with each failure, to tell which step lost them.
    const log = again.output().slice(-8000);
    expect(log, log).not.toMatch(/rows left in the buffer/);
    const stored = await countStored(dir.path, siteId);
    expect(stored.rows, `acknowledged ${acknowledged} of ${sent} sent\n${log}`).toBeGreaterThanOrEqual(
      acknowledged,
    );
    expect(stored.rows).toBeLessThanOrEqual(sent);
    expect(stored.distinct).toBe(stored.rows);
    expect(stored.custom).toBeGreaterThan(0);
    expect(stored.byName).toBe(stored.custom);
    expect(stored.byNameDistinct).toBe(stored.byName);
    // The per-session rollup: one row per session, with its first and last event time.
    expect(stored.rolled).toBe(stored.sessions);
    expect(stored.rolledExact).toBe(stored.sessions);
  }, 120_000);

  it.skipIf(!redisUrl)(
    'shares one rate limit and one monthly quota across two ingest processes (Redis)',
    async () => {
      const db = await createTestDatabase();
      cleanups.push(db.drop);
      const prefix = `${uniqueName('two')}:`;
      const common = {
        DATABASE_URL: db.url,
        REDIS_URL: redisUrl,
        REDIS_PREFIX: prefix,
        SECRET: 'shared-secret-0123456789',
        TRACK_RATE_LIMIT_MAX: '10',
      };
      const dirs = await Promise.all([tempDir('ingest-a'), tempDir('ingest-b')]);
      cleanups.push(...dirs.map((d) => d.remove));
      const init = await runEntry('apps/cli/src/main.ts', ['init', '--json'], {
        ...common,
        DATA_DIR: dirs[0].path,
      });
      const { siteId, apiKey } = JSON.parse(init.stdout) as { siteId: number; apiKey: string };
      const a = await startEntry('apps/ingest/src/main.ts', { ...common, DATA_DIR: dirs[0].path });
      const b = await startEntry('apps/ingest/src/main.ts', { ...common, DATA_DIR: dirs[1].path });
      servers.push(a, b);

      const auth = { authorization: `Bearer ${apiKey}` };
      const limited = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          post(`${(i % 2 ? a : b).url}/api/track`, { site_id: siteId }, auth),
        ),
      );
      expect(limited.filter((s) => s === 200)).toHaveLength(10);
      expect(limited.filter((s) => s === 429)).toHaveLength(20);

      // 10 pageviews are counted already; 7 more fit under a limit of 17.
      await db.sql`update sites set monthly_pageview_limit = 17 where site_id = ${siteId}`;
      const keys = await Promise.all(
        [1, 2, 3].map(() =>
          runEntry(
            'apps/cli/src/main.ts',
            [
              'keys',
              'create',
              '--user',
              init.stdout ? JSON.parse(init.stdout).userId : '',
              '--name',
              'k',
              '--json',
            ],
            { ...common, DATA_DIR: dirs[0].path },
          ),
        ),
      );
      await new Promise((r) => setTimeout(r, 2_100)); // the site cache of each process refreshes
      const quota = await Promise.all(
        keys.flatMap((k, ki) =>
          Array.from({ length: 8 }, (_, i) =>
            post(
              `${(i % 2 ? a : b).url}/api/track`,
              { site_id: siteId },
              { authorization: `Bearer ${JSON.parse(k.stdout).apiKey}` },
            ),
          ).map((p) => p.then((status) => ({ ki, status }))),
        ),
      );
      expect(quota.filter((q) => q.status === 200)).toHaveLength(7);
      expect(quota.filter((q) => q.status === 429)).toHaveLength(17);
    },
    120_000,
  );
});
