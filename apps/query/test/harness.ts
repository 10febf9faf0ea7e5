import type { ClickHouse } from '@trackhouse/clickhouse';
import { createLogger, loadConfig } from '@trackhouse/core';
import { createMemoryStores } from '@trackhouse/limits';
import {
  createApiKey,
  createOrganization,
  createSite,
  getOrCreateUser,
  type Role,
  setMembership,
} from '@trackhouse/postgres';
import { Registry } from 'prom-client';
import { createTestClickHouse, createTestDatabase, uniqueName } from '../../../test/helpers';
import { createApp, type QueryDeps } from '../src';

export type QueryHarness = Awaited<ReturnType<typeof createQueryHarness>>;

/**
 * The query app on a fresh database and embedded engine, with helpers to make tenants.
 * `overrides` replaces parsed settings with values the environment cannot express (a read
 * timeout of a microsecond).
 */
export async function createQueryHarness(
  env: Record<string, string> = {},
  sharedCh?: ClickHouse,
  overrides: Partial<QueryDeps['settings']> = {},
) {
  // One embedded engine per process: a second harness in the same file shares the first's.
  const [db, chHandle] = await Promise.all([
    createTestDatabase(),
    sharedCh ? { ch: sharedCh, close: async () => {} } : createTestClickHouse(),
  ]);
  const stores = createMemoryStores();
  const config = { ...loadConfig(env), ...overrides };
  const appOn = (ch: ClickHouse, extra: Partial<QueryDeps> = {}) =>
    createApp({
      log: createLogger('silent'),
      registry: new Registry(),
      sql: db.sql,
      ch,
      stores,
      readiness: [],
      settings: config,
      ...extra,
    });
  const requester =
    (target: ReturnType<typeof appOn>) =>
    (
      path: string,
      init: { key?: string; method?: string; body?: unknown; headers?: Record<string, string> } = {},
    ) =>
      target.request(path, {
        method: init.method ?? 'GET',
        headers: {
          ...(init.key ? { authorization: `Bearer ${init.key}` } : {}),
          ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...init.headers,
        },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
      });
  const jsonOf =
    (req: ReturnType<typeof requester>) =>
    async <T = Record<string, unknown>>(path: string, init: Parameters<typeof req>[1] = {}) => {
      const res = await req(path, init);
      return { status: res.status, body: (await res.json()) as T, headers: res.headers };
    };
  const app = appOn(chHandle.ch);
  const request = requester(app);
  return {
    app,
    db,
    ch: chHandle.ch,
    stores,
    request,
    json: jsonOf(request),
    /**
     * `json` of the same app, database and stores on another ClickHouse handle (the same engine
     * with `rollups: false`: answers from the events alone).
     */
    jsonOn: (ch: ClickHouse) => jsonOf(requester(appOn(ch))),
    /** `json` of an app with more dependencies (the background builder of summaries). */
    jsonWith: (extra: Partial<QueryDeps>) => jsonOf(requester(appOn(chHandle.ch, extra))),
    config,
    /** An organization with a user of `role` (and a key), and optionally a site. */
    async tenant(role: Role = 'owner', site = true) {
      const org = await createOrganization(db.sql, uniqueName('org'));
      const user = await getOrCreateUser(db.sql, `${uniqueName('u')}@example.com`);
      await setMembership(db.sql, org.id, user.id, role);
      const { key } = await createApiKey(db.sql, { userId: user.id, name: 'test' });
      const created = site
        ? await createSite(db.sql, {
            organizationId: org.id,
            name: 'Site',
            domain: 'example.com',
            createdBy: user.id,
          })
        : undefined;
      return { organizationId: org.id, userId: user.id, key, siteId: created?.siteId ?? 0 };
    },
    /** Another user with `role` in an existing organization. */
    async member(organizationId: string, role: Role) {
      const user = await getOrCreateUser(db.sql, `${uniqueName('m')}@example.com`);
      await setMembership(db.sql, organizationId, user.id, role);
      const { key } = await createApiKey(db.sql, { userId: user.id, name: 'member' });
      return { userId: user.id, key };
    },
    async close() {
      await stores.close();
      await Promise.all([db.drop(), chHandle.close()]);
    },
  };
}
