import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, POSTGRES_MIGRATIONS } from '../../../test/helpers';
import {
  createApiKey,
  createGoal,
  createOrganization,
  createSite,
  deleteGoal,
  deleteSite,
  findApiKey,
  findFirstOwner,
  getGoal,
  getOrCreateUser,
  getRole,
  getSite,
  isKeyUsable,
  listApiKeys,
  listGoals,
  listMembers,
  listSites,
  migratePostgres,
  noteKeyUse,
  type Pool,
  revokeApiKey,
  setMembership,
  setPrivateLinkKey,
  updateGoal,
  updateSiteConfig,
} from '../src';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  sql = db.sql;
});
afterAll(async () => {
  await db.drop();
});

describe('migrations', () => {
  it('records each file once and applies nothing on a second run', async () => {
    const rows = await sql<{ name: string }[]>`select name from schema_migrations order by name`;
    expect(rows.map((r) => r.name)).toContain('0001_init.sql');
    expect(await migratePostgres(sql, POSTGRES_MIGRATIONS)).toEqual({ applied: [] });
  });

  it('0002 keeps recording errors for sites created before it, and starts new sites with it off', async () => {
    const file = (name: string) => readFile(join(POSTGRES_MIGRATIONS, name), 'utf8');
    const [init, features] = await Promise.all([file('0001_init.sql'), file('0002_product_features.sql')]);
    // A schema of its own, rolled back: the files themselves, applied as an older install would.
    await sql
      .begin(async (tx) => {
        await tx.unsafe('create schema before_0002; set local search_path to before_0002');
        await tx.unsafe(init);
        await tx`insert into organizations (id, name) values ('o', 'Org')`;
        await tx`insert into sites (id, organization_id, name, domain) values ('old', 'o', 'Old', 'old.example')`;
        await tx.unsafe(features);
        await tx.unsafe(features); // repeatable
        await tx`insert into sites (id, organization_id, name, domain) values ('new', 'o', 'New', 'new.example')`;
        const rows = await tx<
          { id: string; trackErrors: boolean; webVitals: boolean; trackSpaNavigation: boolean }[]
        >`
          select id, track_errors, web_vitals, track_spa_navigation from sites order by id desc`;
        expect(rows).toEqual([
          { id: 'old', trackErrors: true, webVitals: false, trackSpaNavigation: true },
          { id: 'new', trackErrors: false, webVitals: false, trackSpaNavigation: true },
        ]);
        throw new Error('roll back');
      })
      .catch((err: Error) => {
        if (err.message !== 'roll back') throw err;
      });
  });
});

describe('organizations, users and memberships', () => {
  it('adds an existing user (same email, any case) instead of creating a second', async () => {
    const org = await createOrganization(sql, 'Acme');
    const a = await getOrCreateUser(sql, 'Ann@Example.com');
    const b = await getOrCreateUser(sql, 'ann@example.com');
    expect(b.id).toBe(a.id);
    await setMembership(sql, org.id, a.id, 'admin');
    expect(await getRole(sql, org.id, a.id)).toBe('admin');
    await setMembership(sql, org.id, a.id, 'member');
    expect(await getRole(sql, org.id, a.id)).toBe('member');
    expect((await listMembers(sql, org.id)).map((m) => [m.email, m.role])).toEqual([
      ['Ann@Example.com', 'member'],
    ]);
  });

  it('finds the first owner of the oldest organization', async () => {
    const owner = await findFirstOwner(sql);
    const members = owner ? await listMembers(sql, owner.organizationId) : [];
    if (owner) expect(members.find((m) => m.id === owner.userId)?.role).toBe('owner');
    const org = await createOrganization(sql, 'Owned');
    const user = await getOrCreateUser(sql, `owner-${Date.now()}@example.com`);
    await setMembership(sql, org.id, user.id, 'owner');
    expect(await findFirstOwner(sql)).toBeDefined();
  });
});

describe('api keys', () => {
  it('stores only a hash, finds the key by its secret, and honours revocation and expiry', async () => {
    const user = await getOrCreateUser(sql, `keys-${Date.now()}@example.com`);
    const { key, record } = await createApiKey(sql, { userId: user.id, name: 'ci' });
    expect(key).toMatch(/^th_[0-9A-Za-z]{40}$/);
    const stored = await sql<{ keyHash: string }[]>`select key_hash from api_keys where id = ${record.id}`;
    expect(stored[0]!.keyHash).not.toContain(key.slice(3));
    expect(record.prefix).toBe(key.slice(0, 8));

    const found = await findApiKey(sql, key);
    expect(found?.id).toBe(record.id);
    expect(isKeyUsable(found!, new Date())).toBe(true);
    expect(await findApiKey(sql, `${key.slice(0, -1)}${key.endsWith('x') ? 'y' : 'x'}`)).toBeUndefined();

    expect(await revokeApiKey(sql, 'someone-else', record.id)).toBe(false);
    expect(await revokeApiKey(sql, user.id, record.id)).toBe(true);
    expect(isKeyUsable((await findApiKey(sql, key))!, new Date())).toBe(false);

    const expiring = await createApiKey(sql, {
      userId: user.id,
      name: 'short',
      expiresAt: new Date(Date.now() + 1000),
    });
    expect(isKeyUsable(expiring.record, new Date())).toBe(true);
    expect(isKeyUsable(expiring.record, new Date(Date.now() + 2000))).toBe(false);
    expect((await listApiKeys(sql, user.id)).map((k) => k.name)).toEqual(['ci', 'short']);

    // Use is written at most once a minute per key.
    const fresh = (await findApiKey(sql, expiring.key))!;
    expect(fresh.lastUsedAt).toBeNull();
    noteKeyUse(sql, fresh, new Date());
    const firstNoted = fresh.lastUsedAt;
    noteKeyUse(sql, fresh, new Date(Date.now() + 1_000));
    expect(fresh.lastUsedAt).toBe(firstNoted); // within the minute: unchanged, no second write
    await expect.poll(async () => (await findApiKey(sql, expiring.key))?.lastUsedAt).not.toBeNull();
  });
});

describe('sites', () => {
  it('creates with the spec defaults, updates config fields, and deletes with its goals', async () => {
    const org = await createOrganization(sql, 'Sites');
    const site = await createSite(sql, {
      organizationId: org.id,
      name: 'Blog',
      domain: 'blog.example',
      createdBy: null,
    });
    expect(site).toMatchObject({
      name: 'Blog',
      domain: 'blog.example',
      public: false,
      saltUserIds: false,
      blockBots: true,
      trackOutbound: true,
      trackUrlParams: true,
      excludedIPs: [],
      excludedCountries: [],
      monthlyPageviewLimit: null,
      privateLinkKey: null,
      // The browser client's features: as the official client and the reference product ship.
      trackInitialPageView: true,
      trackSpaNavigation: true,
      trackErrors: false,
      webVitals: false,
      sessionReplay: false,
      trackButtonClicks: false,
      trackCopy: false,
      trackFormInteractions: false,
    });
    expect(Number.isInteger(site.siteId)).toBe(true);
    expect(typeof site.id).toBe('string');

    const updated = await updateSiteConfig(sql, site.siteId, {
      public: true,
      excludedIPs: ['10.0.0.0/8'],
      excludedCountries: ['DE'],
      monthlyPageviewLimit: 1000,
      webVitals: true,
      trackSpaNavigation: false,
    });
    expect(updated).toMatchObject({
      public: true,
      excludedIPs: ['10.0.0.0/8'],
      excludedCountries: ['DE'],
      monthlyPageviewLimit: 1000,
      blockBots: true,
      webVitals: true,
      trackSpaNavigation: false,
      trackInitialPageView: true,
    });
    expect(updated!.updatedAt.getTime()).toBeGreaterThanOrEqual(site.updatedAt.getTime());

    expect(await setPrivateLinkKey(sql, site.siteId, 'abc')).toBe(true);
    expect((await getSite(sql, site.siteId))?.privateLinkKey).toBe('abc');

    const goal = await createGoal(sql, site.siteId, {
      name: 'Signup',
      goalType: 'path',
      config: { pathPattern: '/signup' },
    });
    expect((await listSites(sql, org.id)).map((s) => s.siteId)).toEqual([site.siteId]);
    expect(await deleteSite(sql, site.siteId)).toBe(true);
    expect(await getSite(sql, site.siteId)).toBeUndefined();
    expect(await getGoal(sql, site.siteId, goal.goalId)).toBeUndefined();
    expect(await deleteSite(sql, site.siteId)).toBe(false);
  });
});

describe('goals', () => {
  it('scopes every goal operation to its site', async () => {
    const org = await createOrganization(sql, 'Goals');
    const a = await createSite(sql, {
      organizationId: org.id,
      name: 'A',
      domain: 'a.example',
      createdBy: null,
    });
    const b = await createSite(sql, {
      organizationId: org.id,
      name: 'B',
      domain: 'b.example',
      createdBy: null,
    });
    const goal = await createGoal(sql, a.siteId, {
      name: 'Buy',
      goalType: 'event',
      config: { eventName: 'purchase', eventPropertyKey: 'plan', eventPropertyValue: 2 },
    });
    expect(goal.config).toEqual({ eventName: 'purchase', eventPropertyKey: 'plan', eventPropertyValue: 2 });
    expect(await getGoal(sql, b.siteId, goal.goalId)).toBeUndefined();
    expect(
      await updateGoal(sql, b.siteId, goal.goalId, {
        name: 'x',
        goalType: 'path',
        config: { pathPattern: '/' },
      }),
    ).toBeUndefined();
    expect(await deleteGoal(sql, b.siteId, goal.goalId)).toBe(false);
    const changed = await updateGoal(sql, a.siteId, goal.goalId, {
      name: 'Checkout',
      goalType: 'path',
      config: { pathPattern: '/checkout/**' },
    });
    expect(changed).toMatchObject({
      name: 'Checkout',
      goalType: 'path',
      config: { pathPattern: '/checkout/**' },
    });
    expect((await listGoals(sql, a.siteId)).map((g) => g.goalId)).toEqual([goal.goalId]);
    expect(await deleteGoal(sql, a.siteId, goal.goalId)).toBe(true);
  });
});
