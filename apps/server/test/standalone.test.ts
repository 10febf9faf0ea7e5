import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runEntry, type StartedServer, startEntry, tempDir } from '../../../test/helpers';

const SERVER = 'apps/server/src/main.ts';

describe('standalone server (embedded ClickHouse and PostgreSQL under DATA_DIR)', () => {
  const started: StartedServer[] = [];
  let dataDir: Awaited<ReturnType<typeof tempDir>>;
  afterAll(async () => {
    for (const s of started) await s.stop('SIGKILL');
    await dataDir?.remove();
  });

  it('serves, lets the CLI work while it runs, stops cleanly on SIGTERM and keeps data on restart', async () => {
    dataDir = await tempDir('standalone');
    const env = { DATA_DIR: dataDir.path };
    const first = await startEntry(SERVER, env);
    started.push(first);
    expect(first.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const health = await fetch(`${first.url}/api/health`);
    expect(health.status).toBe(200);
    expect(health.headers.get('x-request-id')).toBeTruthy();
    const ready = await fetch(`${first.url}/api/ready`);
    expect(await ready.json()).toEqual({
      status: 'ready',
      checks: { postgres: 'ok', 'memory-stores': 'ok', clickhouse: 'ok' },
    });

    // `pnpm start` serves the dashboard at / (built when missing or stale).
    const page = await fetch(first.url);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await page.text()).toMatch(/src="\/assets\/index-[\w-]+\.js"/);

    const init = await runEntry('apps/cli/src/main.ts', ['init', '--json'], env);
    expect(init.code).toBe(0);
    const created = JSON.parse(init.stdout) as { siteId: number; organizationId: string };
    expect(created.siteId).toBe(1);

    // While the server holds the embedded engine, migrate says so instead of failing.
    const migrate = await runEntry('apps/cli/src/main.ts', ['migrate', '--json'], env);
    expect(migrate.code).toBe(0);
    expect(JSON.parse(migrate.stdout).clickhouse.status).toMatch(/held by the running server/);

    expect(await first.stop('SIGTERM')).toBe(0);
    // Our embedded PostgreSQL stopped with us: its pid file is gone.
    expect(existsSync(join(dataDir.path, 'postgres', 'postmaster.pid'))).toBe(false);

    const second = await startEntry(SERVER, env);
    started.push(second);
    const sites = await runEntry('apps/cli/src/main.ts', ['sites', 'list', '--json'], env);
    expect(JSON.parse(sites.stdout).data).toEqual([
      expect.objectContaining({ siteId: 1, organizationId: created.organizationId }),
    ]);
    expect(await second.stop('SIGTERM')).toBe(0);
  }, 120_000);

  it('refuses to start with an invalid variable and names it', async () => {
    const r = await runEntry(SERVER, [], { PORT: 'eighty', DATA_DIR: '/nonexistent-unused' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('PORT: must be a number');
  });
});
