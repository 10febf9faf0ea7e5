import { createClickHouse, embeddedClickHousePath } from '@trackhouse/clickhouse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, runEntry, tempDir } from '../../../test/helpers';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let dataDir: Awaited<ReturnType<typeof tempDir>>;
const cli = (...args: string[]) =>
  runEntry('apps/cli/src/main.ts', args, { DATABASE_URL: db.url, DATA_DIR: dataDir.path });
const json = async (...args: string[]) => {
  const r = await cli(...args, '--json');
  expect(r.stderr).toBe('');
  const lines = r.stdout.trim().split('\n');
  expect(lines).toHaveLength(1); // exactly one JSON object on stdout
  return { code: r.code, body: JSON.parse(lines[0]!) as Record<string, unknown> };
};

beforeAll(async () => {
  db = await createTestDatabase();
  dataDir = await tempDir('cli');
});
afterAll(async () => {
  await db.drop();
  await dataDir.remove();
});

// Each case runs the CLI as its own processes (ten in one case): seconds each on a loaded machine.
describe('trackhouse CLI', { timeout: 120_000 }, () => {
  it('init creates everything once, then only a key and a site per new domain', async () => {
    const first = await json('init', '--domain', 'example.com');
    expect(first.code).toBe(0);
    expect(Object.keys(first.body).sort()).toEqual(['apiKey', 'organizationId', 'siteId', 'userId']);
    expect(first.body.apiKey).toMatch(/^th_[0-9A-Za-z]{40}$/);
    expect(typeof first.body.siteId).toBe('number');

    const again = await json('init', '--domain', 'example.com');
    expect(again.body.organizationId).toBe(first.body.organizationId);
    expect(again.body.userId).toBe(first.body.userId);
    expect(again.body.siteId).toBe(first.body.siteId);
    expect(again.body.apiKey).not.toBe(first.body.apiKey);

    const other = await json('init', '--domain', 'shop.example.org');
    expect(other.body.organizationId).toBe(first.body.organizationId);
    expect(other.body.siteId).not.toBe(first.body.siteId);

    const keys = await json('keys', 'list', '--user', String(first.body.userId));
    expect((keys.body.data as unknown[]).length).toBe(3);
    const [orgCount] = await db.sql<{ n: number }[]>`select count(*)::int as n from organizations`;
    expect(orgCount!.n).toBe(1);
  });

  it('creates and lists organizations, users, keys and sites', async () => {
    const { body: org } = await json('orgs', 'create', '--name', 'Acme');
    const { body: user } = await json(
      'users',
      'create',
      '--org',
      String(org.organizationId),
      '--email',
      'ops@acme.test',
      '--role',
      'admin',
    );
    // An existing user with that email is added, not duplicated.
    const { body: org2 } = await json('orgs', 'create', '--name', 'Beta');
    const { body: same } = await json(
      'users',
      'create',
      '--org',
      String(org2.organizationId),
      '--email',
      'OPS@acme.test',
      '--role',
      'member',
    );
    expect(same.userId).toBe(user.userId);

    const { body: key } = await json(
      'keys',
      'create',
      '--user',
      String(user.userId),
      '--name',
      'deploy',
      '--expires-in-days',
      '30',
    );
    expect(key.apiKey).toMatch(/^th_/);
    expect(typeof key.keyId).toBe('string');
    const { body: site } = await json(
      'sites',
      'create',
      '--org',
      String(org.organizationId),
      '--name',
      'Docs',
      '--domain',
      'docs.acme.test',
    );
    expect(typeof site.siteId).toBe('number');

    const { body: sites } = await json('sites', 'list', '--org', String(org.organizationId));
    expect(sites.data).toEqual([expect.objectContaining({ siteId: site.siteId, domain: 'docs.acme.test' })]);
    const { body: members } = await json('users', 'list', '--org', String(org2.organizationId));
    expect(members.data).toEqual([expect.objectContaining({ userId: user.userId, role: 'member' })]);
    const { body: keys } = await json('keys', 'list', '--user', String(user.userId));
    expect(keys.data).toEqual([
      expect.objectContaining({ keyId: key.keyId, name: 'deploy', revoked: false }),
    ]);
    expect(JSON.stringify(keys)).not.toContain(String(key.apiKey));
  });

  it('seeds events into ClickHouse with a progress bar, the session rollup included', async () => {
    const { body: site } = await json('init', '--domain', 'seeded.example');
    const r = await cli('seed', '--site', String(site.siteId), '--events', '5000', '--days', '3', '--json');
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('5000/5000 events');
    expect(JSON.parse(r.stdout)).toMatchObject({ siteId: site.siteId, events: 5000, days: 3 });
    const ch = createClickHouse({
      kind: 'embedded',
      dataDir: embeddedClickHousePath(dataDir.path),
      queryPoolSize: 1,
    });
    try {
      const [stored] = await ch.query<{ events: number; sessions: number; rolled: number; span: number }>(
        `SELECT count() AS events, uniqExact(session_id) AS sessions,
           (SELECT count() FROM sessions FINAL WHERE site_id = {s:UInt32}) AS rolled,
           dateDiff('hour', min(timestamp), max(timestamp)) AS span
         FROM events WHERE site_id = {s:UInt32}`,
        { s: site.siteId },
      );
      expect(stored).toMatchObject({ events: 5000, rolled: stored!.sessions });
      expect(stored!.span).toBeGreaterThanOrEqual(70);
    } finally {
      await ch.close();
    }
  });

  it('prints human-readable tables without --json', async () => {
    const r = await cli('orgs', 'list');
    expect(r.code).toBe(0);
    const [header, rule] = r.stdout.split('\n');
    expect(header).toMatch(/^organizationId\s+name\s+createdAt$/);
    expect(rule).toMatch(/^-+\s+-+\s+-+$/);
  });

  it('rejects bad input with a message and a non-zero exit, as one JSON object with --json', async () => {
    const bad = await json('users', 'create', '--org', 'missing', '--email', 'x@y.test');
    expect(bad.code).toBe(2);
    expect(bad.body).toEqual({ success: false, error: 'no organization missing' });
    const role = await json('users', 'create', '--org', 'x', '--email', 'x@y.test', '--role', 'king');
    expect(role.body.error).toMatch(/^--role/);
    const unknown = await cli('frobnicate');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command "frobnicate"');
  });

  it('names the bad variable when the environment is invalid', async () => {
    const r = await runEntry('apps/cli/src/main.ts', ['orgs', 'list'], {
      DATABASE_URL: 'mysql://nope',
      DATA_DIR: dataDir.path,
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('DATABASE_URL');
  });
});
