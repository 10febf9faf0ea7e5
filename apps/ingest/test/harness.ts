import type { ClickHouse } from '@trackhouse/clickhouse';
import { type Config, createLogger, loadConfig } from '@trackhouse/core';
import { createMemoryStores, createRedisStores, type Stores } from '@trackhouse/limits';
import {
  createApiKey,
  createOrganization,
  createSite,
  getOrCreateUser,
  type SiteConfig,
  setMembership,
} from '@trackhouse/postgres';
import { Registry } from 'prom-client';
import { createTestClickHouse, createTestDatabase, tempDir, uniqueName } from '../../../test/helpers';
import { createApp, type IngestDeps, openIngest } from '../src';

export interface Harness {
  app: ReturnType<typeof createApp>;
  deps: IngestDeps;
  db: Awaited<ReturnType<typeof createTestDatabase>>;
  ch: ClickHouse;
  /** A new organization with an owner, an API key and a site (config overrides applied). */
  site(
    config?: Partial<SiteConfig> & { domain?: string },
  ): Promise<{ siteId: number; apiKey: string; organizationId: string; userId: string }>;
  /** Sends everything buffered (every table) to ClickHouse now (the app keeps running). */
  flush(): Promise<void>;
  rows<T = Record<string, unknown>>(siteId: number): Promise<T[]>;
  close(): Promise<void>;
}

export async function createHarness(
  opts: { env?: Record<string, string>; stores?: 'memory' | { redisUrl: string }; ch?: ClickHouse } = {},
): Promise<Harness> {
  // One embedded engine per process: a second harness in the same file shares the first's.
  const shared = opts.ch;
  const [db, chHandle, buffer] = await Promise.all([
    createTestDatabase(),
    shared ? { ch: shared, close: async () => {} } : createTestClickHouse(),
    tempDir('buffer'),
  ]);
  const config: Config = loadConfig({ DATA_DIR: buffer.path, INGEST_BUFFER_DIR: buffer.path, ...opts.env });
  const stores: Stores =
    opts.stores && opts.stores !== 'memory'
      ? createRedisStores(opts.stores.redisUrl, { prefix: `${uniqueName('test')}:` })
      : createMemoryStores();
  const ingest = await openIngest({
    log: createLogger('silent'),
    registry: new Registry(),
    sql: db.sql,
    ch: chHandle.ch,
    stores,
    secret: 'harness-secret-0123456789',
    settings: config,
    readiness: [],
  });
  const harness: Harness = {
    app: createApp(ingest),
    deps: ingest,
    db,
    ch: chHandle.ch,
    async site(overrides = {}) {
      const org = await createOrganization(db.sql, uniqueName('org'));
      const user = await getOrCreateUser(db.sql, `${uniqueName('u')}@example.com`);
      await setMembership(db.sql, org.id, user.id, 'owner');
      const { domain = 'example.com', ...config } = overrides;
      const site = await createSite(db.sql, {
        organizationId: org.id,
        name: domain,
        domain,
        createdBy: user.id,
        ...config,
      });
      const { key } = await createApiKey(db.sql, { userId: user.id, name: 'test' });
      return { siteId: site.siteId, apiKey: key, organizationId: org.id, userId: user.id };
    },
    async flush() {
      await ingest.writers.drain();
    },
    rows: (siteId) =>
      chHandle.ch.query(
        `SELECT * EXCEPT (timestamp), toString(timestamp) AS timestamp FROM events WHERE site_id = {site:UInt32} ORDER BY timestamp, event_id`,
        { site: siteId },
      ),
    async close() {
      await ingest.close();
      await stores.close();
      await Promise.all([db.drop(), chHandle.close(), buffer.remove()]);
    },
  };
  return harness;
}
