import { existsSync, readFileSync, watch } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  runEntry,
  type SpawnedEntry,
  type StartedServer,
  spawnEntry,
  startEntry,
  tempDir,
} from '../../../test/helpers';

const SERVER = 'apps/server/src/main.ts';
const CLI = 'apps/cli/src/main.ts';
const ROUNDS = 6;
const EVENTS_PER_ROUND = 40;
const BROWSER =
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

async function track(url: string, siteId: number, pathname: string): Promise<number> {
  try {
    const res = await fetch(`${url}/api/track`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': BROWSER },
      body: JSON.stringify({ site_id: siteId, pathname, ip_address: '8.8.8.8' }),
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0; // refused or reset by the stopping server: not acknowledged
  }
}

/** Resolves once `name` appears in `dir` (or at once when it is there already). */
function appears(dir: string, name: string): Promise<void> {
  return new Promise((resolveSeen) => {
    const watcher = watch(dir, () => {
      if (existsSync(join(dir, name))) {
        watcher.close();
        resolveSeen();
      }
    });
    if (existsSync(join(dir, name))) {
      watcher.close();
      resolveSeen();
    }
  });
}

describe('standalone restarts on one DATA_DIR (embedded PostgreSQL and ClickHouse)', () => {
  const started: (StartedServer | SpawnedEntry)[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const s of started) {
      if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
    }
    for (const c of cleanups.reverse()) await c();
  });

  it('comes up right after every SIGTERM stop, exits 0 each time and keeps every acknowledged event', async () => {
    const dir = await tempDir('restart');
    cleanups.push(dir.remove);
    const env = { DATA_DIR: dir.path, INGEST_FLUSH_INTERVAL_MS: '100' };
    const init = await runEntry(CLI, ['init', '--json'], env);
    expect(init.code, init.stderr).toBe(0);
    const site = JSON.parse(init.stdout) as { siteId: number; apiKey: string };

    const acknowledged: string[] = [];
    const pidFile = join(dir.path, 'postgres', 'postmaster.pid');
    let server = await startEntry(SERVER, env);
    started.push(server);
    for (let round = 0; round < ROUNDS; round++) {
      const ready = await fetch(`${server.url}/api/ready`);
      expect(ready.status, server.output()).toBe(200);

      // Traffic in flight when the stop arrives: what got a 200 must survive the restarts.
      const current = server;
      let sent = 0;
      let stopping: Promise<number | null> | undefined;
      const stop = () => {
        // Every other round the signal reaches the embedded PostgreSQL too, as a terminal's
        // Ctrl-C or a service manager stopping the whole process group delivers it.
        if (round % 2 === 1 && existsSync(pidFile)) {
          const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
          if (pid > 0) process.kill(pid, 'SIGINT');
        }
        return current.stop('SIGTERM');
      };
      const worker = async () => {
        while (sent < EVENTS_PER_ROUND) {
          const pathname = `/r${round}/${sent++}`;
          if ((await track(current.url, site.siteId, pathname)) === 200) acknowledged.push(pathname);
          if (sent >= EVENTS_PER_ROUND / 2) stopping ??= stop();
        }
      };
      await Promise.all([worker(), worker(), worker(), worker()]);
      // The next start begins at once, while the stopped process may still be shutting down
      // (a launcher such as pnpm returns as soon as it is signalled). startEntry rejects with
      // the child's whole output when it exits before listening.
      const next = startEntry(SERVER, env);
      next.then((s) => started.push(s)).catch(() => {});
      expect(await (stopping ?? stop()), current.output()).toBe(0);
      server = await next;
    }
    expect(acknowledged.length).toBeGreaterThanOrEqual(ROUNDS * (EVENTS_PER_ROUND / 2));

    const last = server;
    const stored = new Set<string>();
    // Replayed buffer segments reach ClickHouse within a flush interval or two (bounded wait).
    const deadline = Date.now() + 20_000;
    while (acknowledged.some((p) => !stored.has(p)) && Date.now() < deadline) {
      const res = await fetch(`${last.url}/api/sites/${site.siteId}/events?page_size=1000`, {
        headers: { authorization: `Bearer ${site.apiKey}` },
      });
      expect(res.status, last.output()).toBe(200);
      for (const e of ((await res.json()) as { data: { pathname: string }[] }).data) stored.add(e.pathname);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(acknowledged.filter((p) => !stored.has(p))).toEqual([]);
    expect(await last.stop('SIGTERM'), last.output()).toBe(0);
    // The embedded PostgreSQL stopped with the last process: nothing is left running.
    expect(existsSync(pidFile), last.output()).toBe(false);
  }, 300_000);

  it('stops cleanly on a SIGTERM during start-up, leaving no PostgreSQL behind', async () => {
    const dir = await tempDir('restart-early');
    cleanups.push(dir.remove);
    const env = { DATA_DIR: dir.path };
    const init = await runEntry(CLI, ['init', '--json'], env);
    expect(init.code, init.stderr).toBe(0);

    const spawned = spawnEntry(SERVER, env);
    started.push(spawned);
    // The embedded PostgreSQL is starting: the process is in the middle of its start-up.
    await appears(join(dir.path, 'postgres'), 'postmaster.pid');
    spawned.child.kill('SIGTERM');
    expect(await spawned.exited, spawned.output()).toBe(0);
    expect(existsSync(join(dir.path, 'postgres', 'postmaster.pid')), spawned.output()).toBe(false);

    const again = await startEntry(SERVER, env);
    started.push(again);
    expect((await fetch(`${again.url}/api/ready`)).status, again.output()).toBe(200);
    expect(await again.stop('SIGTERM'), again.output()).toBe(0);
  }, 120_000);

  it('waits for a previous process still holding DATA_DIR/clickhouse, says so, and comes up once it lets go', async () => {
    const dir = await tempDir('restart-held');
    cleanups.push(dir.remove);
    const env = { DATA_DIR: dir.path };
    const holder = spawnEntry('packages/runtime/test/fixtures/hold-clickhouse.ts', env);
    started.push(holder);
    await holder.waitFor(/holding \d+/);
    const path = join(dir.path, 'clickhouse').replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const waiting = new RegExp(
      `waiting for the previous trackhouse process \\(pid ${holder.child.pid}\\) to release ${path}`,
    );

    // A stop during the wait ends it cleanly.
    const stopped = spawnEntry(SERVER, env);
    started.push(stopped);
    await stopped.waitFor(waiting);
    stopped.child.kill('SIGTERM');
    expect(await stopped.exited, stopped.output()).toBe(0);

    const server = spawnEntry(SERVER, env);
    started.push(server);
    await server.waitFor(waiting);
    holder.child.kill('SIGTERM');
    expect(await holder.exited, holder.output()).toBe(0);
    const [, url] = await server.waitFor(/listening on (http:\/\/\S+)/);
    expect((await fetch(`${url}/api/ready`)).status, server.output()).toBe(200);
    server.child.kill('SIGTERM');
    expect(await server.exited, server.output()).toBe(0);
    expect(existsSync(join(dir.path, 'postgres', 'postmaster.pid')), server.output()).toBe(false);
  }, 120_000);

  it('says why a start failed, on stderr and in the log, and leaves no PostgreSQL behind', async () => {
    const dir = await tempDir('restart-fail');
    cleanups.push(dir.remove);
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise<void>((r) => taken.close(() => r())));
    const port = (taken.address() as { port: number }).port;

    const failed = spawnEntry(SERVER, { DATA_DIR: dir.path, PORT: String(port) });
    started.push(failed);
    expect(await failed.exited, failed.output()).toBe(1);
    const reason = `start failed: listen EADDRINUSE: address already in use 127.0.0.1:${port}`;
    expect(failed.output()).toContain(`trackhouse standalone: ${reason}`);
    const logged = failed
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string });
    expect(logged).toContainEqual(expect.objectContaining({ level: 50, msg: reason }));
    // The embedded PostgreSQL it had started is stopped before it exits.
    expect(existsSync(join(dir.path, 'postgres', 'postmaster.pid')), failed.output()).toBe(false);
  }, 120_000);
});
