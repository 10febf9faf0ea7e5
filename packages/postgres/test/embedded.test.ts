import { afterAll, describe, expect, it } from 'vitest';
import { POSTGRES_MIGRATIONS, tempDir } from '../../../test/helpers';
import { createOrganization, listOrganizations, migratePostgres, openDatabase } from '../src';

describe('embedded PostgreSQL under DATA_DIR', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  it('starts a real server, lets a second opener reuse it, and keeps data across restarts', async () => {
    const dir = await tempDir('pg');
    cleanups.push(dir.remove);

    const first = await openDatabase({ dataDir: dir.path });
    expect(first.kind).toBe('embedded');
    await migratePostgres(first.sql, POSTGRES_MIGRATIONS);
    const org = await createOrganization(first.sql, 'Persisted');
    const [row] = await first.sql<{ version: string }[]>`select version()`;
    const version = row?.version;
    expect(version).toMatch(/^PostgreSQL/);

    // A second process (here: a second opener) finds the running server instead of starting one.
    const second = await openDatabase({ dataDir: dir.path });
    expect((await listOrganizations(second.sql)).map((o) => o.id)).toContain(org.id);
    await second.close();
    // The first opener still works: the second did not stop a server it does not own.
    await first.ping();
    await first.close();

    const reopened = await openDatabase({ dataDir: dir.path });
    cleanups.push(() => reopened.close());
    expect((await listOrganizations(reopened.sql)).map((o) => o.id)).toContain(org.id);
  });
});
