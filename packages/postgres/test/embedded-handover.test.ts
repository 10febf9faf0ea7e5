import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type SpawnedEntry, spawnEntry, tempDir } from '../../../test/helpers';
import { connect, startEmbeddedPostgres } from '../src';

const HOLDER = 'packages/postgres/test/fixtures/hold-postgres.ts';

function pidFile(dataDir: string): string {
  return join(dataDir, 'postgres', 'postmaster.pid');
}

function serverPid(dataDir: string): number {
  return Number(readFileSync(pidFile(dataDir), 'utf8').split('\n')[0]);
}

async function answers(url: string): Promise<boolean> {
  const sql = connect(url, 1);
  try {
    const [row] = await sql<{ one: number }[]>`select 1 as one`;
    return row?.one === 1;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

describe('embedded PostgreSQL between processes (restarts, crashes, the CLI)', () => {
  const children: SpawnedEntry[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null) c.child.kill('SIGKILL');
    for (const c of cleanups.reverse()) await c();
  });

  it('waits for a server that is still shutting down, says so, then starts its own', async () => {
    const dir = await tempDir('pg-stopping');
    cleanups.push(dir.remove);
    const previous = await startEmbeddedPostgres(dir.path);
    cleanups.push(() => previous.stop());
    // A session still open keeps a smart shutdown going: the server stays in "stopping".
    const session = connect(previous.url, 1);
    await session`select 1`;
    const pid = serverPid(dir.path);
    process.kill(pid, 'SIGTERM');
    // The signal is handled asynchronously: start only once the server says it is stopping (the
    // state line of postmaster.pid), else the next start would find it still ready and share it.
    const stoppingBy = Date.now() + 20_000;
    while (readFileSync(pidFile(dir.path), 'utf8').split('\n')[7]?.trim() !== 'stopping') {
      if (Date.now() > stoppingBy) throw new Error('the server never reported "stopping"');
      await new Promise((r) => setTimeout(r, 20));
    }

    let told: (message: string) => void = () => {};
    const waiting = new Promise<string>((r) => {
      told = r;
    });
    const next = startEmbeddedPostgres(dir.path, { onWait: (m) => told(m) });
    expect(await waiting).toBe(`embedded PostgreSQL (pid ${pid}) is shutting down, waiting…`);
    await session.end();

    const server = await next;
    cleanups.push(() => server.stop());
    expect(server.origin).toBe('started');
    expect(serverPid(dir.path)).not.toBe(pid);
    expect(await answers(server.url)).toBe(true);
    await server.stop();
    expect(existsSync(pidFile(dir.path))).toBe(false);
  }, 60_000);

  it('takes over a server left by a killed process and stops it on close', async () => {
    const dir = await tempDir('pg-orphan');
    cleanups.push(dir.remove);
    const killed = spawnEntry(HOLDER, { DATA_DIR: dir.path });
    children.push(killed);
    await killed.waitFor(/postgres started/);
    killed.child.kill('SIGKILL');
    await killed.exited;
    const pid = serverPid(dir.path);

    // As the CLI opens it: no take-over asked for, yet nobody else will ever stop this one.
    const adopted = await startEmbeddedPostgres(dir.path);
    cleanups.push(() => adopted.stop());
    expect({ origin: adopted.origin, owned: adopted.owned }).toEqual({ origin: 'adopted', owned: true });
    expect(serverPid(dir.path)).toBe(pid);
    expect(await answers(adopted.url)).toBe(true);
    await adopted.stop();
    expect(existsSync(pidFile(dir.path))).toBe(false);
  }, 60_000);

  it('lets a service take over the server a CLI command started; the CLI then leaves it running', async () => {
    const dir = await tempDir('pg-handover');
    cleanups.push(dir.remove);
    const cli = spawnEntry(HOLDER, { DATA_DIR: dir.path });
    children.push(cli);
    await cli.waitFor(/postgres started/);

    const service = await startEmbeddedPostgres(dir.path, { takeOver: true });
    cleanups.push(() => service.stop());
    expect(service.origin).toBe('adopted');
    cli.child.kill('SIGTERM');
    expect(await cli.exited, cli.output()).toBe(0);
    expect(await answers(service.url)).toBe(true);

    await service.stop();
    expect(existsSync(pidFile(dir.path))).toBe(false);
  }, 60_000);

  it('shares a server whose owner still runs when not taking over (the CLI beside the server)', async () => {
    const dir = await tempDir('pg-shared');
    cleanups.push(dir.remove);
    const owner = spawnEntry(HOLDER, { DATA_DIR: dir.path });
    children.push(owner);
    await owner.waitFor(/postgres started/);

    const cli = await startEmbeddedPostgres(dir.path);
    expect({ origin: cli.origin, owned: cli.owned }).toEqual({ origin: 'shared', owned: false });
    await cli.stop();
    expect(await answers(cli.url)).toBe(true);
    owner.child.kill('SIGTERM');
    expect(await owner.exited, owner.output()).toBe(0);
    expect(existsSync(pidFile(dir.path))).toBe(false);
  }, 60_000);
});
