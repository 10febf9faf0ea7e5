import { randomBytes } from 'node:crypto';
import { link, mkdir, readFile, rename, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';

const HEARTBEAT_MS = 5_000;
const STALE_MS = 30_000;
const MAX_SLOTS = 256;
/** Owners of the slots this process holds (tests claim several in one process). */
const heldHere = new Set<string>();

export interface BufferSlot {
  dir: string;
  release(): Promise<void>;
}

/**
 * Claims a buffer directory `base/slot-N` for this process. Replicas may share one volume: each
 * holds a slot through a lock file it touches every 5 s; a slot whose lock is older than 30 s
 * belongs to a process that is gone (on the same host, a dead pid tells at once), and the next
 * process to start takes it over and replays what it left. So a crash, a restart, scaling down
 * or replacing a replica never strands acknowledged events.
 */
export async function claimBufferSlot(base: string): Promise<BufferSlot> {
  await mkdir(base, { recursive: true });
  const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  heldHere.add(owner);
  for (let n = 0; n < MAX_SLOTS; n++) {
    const dir = join(base, `slot-${n}`);
    const lock = join(dir, 'LOCK');
    await mkdir(dir, { recursive: true });
    if (!(await tryLock(lock, owner))) continue;
    const timer = setInterval(() => {
      const now = new Date();
      utimes(lock, now, now).catch(() => {});
    }, HEARTBEAT_MS);
    timer.unref();
    return {
      dir,
      async release() {
        clearInterval(timer);
        heldHere.delete(owner);
        // Frees the slot at once: the next process need not wait for it to go stale. (An empty
        // lock, as earlier versions left on release, is free too.)
        if ((await readFile(lock, 'utf8').catch(() => '')) === owner) await unlink(lock).catch(() => {});
      },
    };
  }
  heldHere.delete(owner);
  throw new Error(`no free ingest buffer slot under ${base} (${MAX_SLOTS} in use)`);
}

/**
 * A holder on this host whose process no longer runs (a kill -9, a crash) is known to be gone at
 * once; so is one with our own pid, a previous run of a restarted container.
 */
function holderIsGone(content: string): boolean {
  if (heldHere.has(content)) return false;
  const [host, pidText] = content.split(':');
  if (host !== hostname()) return false;
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

async function tryLock(lock: string, owner: string): Promise<boolean> {
  const temp = `${lock}.${randomBytes(4).toString('hex')}`;
  await writeFile(temp, owner);
  let renamed = false;
  try {
    if (await createLock(temp, lock, owner)) return true;
    // Gone meanwhile (its holder released it): free, taken over like an empty one.
    const held = await Promise.all([readFile(lock, 'utf8'), stat(lock)]).catch(
      (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return undefined;
        throw err;
      },
    );
    const free = !held || held[0] === '' || Date.now() - held[1].mtimeMs > STALE_MS || holderIsGone(held[0]);
    if (!free) return false;
    // Take over through a rename (atomic), then check nobody else took it in the same moment.
    await rename(temp, lock);
    renamed = true;
    await new Promise((r) => setTimeout(r, 200));
    return (await readFile(lock, 'utf8')) === owner;
  } finally {
    // The copy written aside is never left behind, whatever happened.
    if (!renamed) await unlink(temp).catch(() => {});
  }
}

/**
 * Creates the lock holding `owner` (written aside in `temp`), false where one exists. It appears
 * whole, linked to its name: created in place, it was empty for a moment, and an empty lock is a
 * released one, so another claim reading it then took the slot too.
 */
async function createLock(temp: string, lock: string, owner: string): Promise<boolean> {
  const exists = (err: unknown) => (err as NodeJS.ErrnoException).code === 'EEXIST';
  try {
    await link(temp, lock);
    return true;
  } catch (err) {
    if (exists(err)) return false;
  }
  // A file system without hard links: created in place, as before.
  try {
    await writeFile(lock, owner, { flag: 'wx' });
    return true;
  } catch (err) {
    if (exists(err)) return false;
    throw err;
  }
}
