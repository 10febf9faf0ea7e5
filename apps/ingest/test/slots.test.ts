import { utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../../../test/helpers';
import { claimBufferSlot } from '../src/writer/slots';

describe('ingest buffer slots', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups) await c();
  });

  it('gives concurrent processes different slots and frees a slot on release', async () => {
    const base = await tempDir('slots');
    cleanups.push(base.remove);
    const [a, b] = await Promise.all([claimBufferSlot(base.path), claimBufferSlot(base.path)]);
    expect(new Set([a.dir, b.dir]).size).toBe(2);
    await a.release();
    const c = await claimBufferSlot(base.path);
    expect(c.dir).toBe(a.dir);
    await Promise.all([b.release(), c.release()]);
  });

  it('takes over at once the slot of a dead process on this host', async () => {
    const base = await tempDir('slots-dead');
    cleanups.push(base.remove);
    const held = await claimBufferSlot(base.path);
    // A pid that cannot be running: the kernel's limit is far below it.
    await writeFile(join(held.dir, 'LOCK'), `${hostname()}:2147483646:abcd`);
    expect((await claimBufferSlot(base.path)).dir).toBe(held.dir);
  });

  it('takes over the slot of a process that stopped touching its lock 30 s ago', async () => {
    const base = await tempDir('slots-stale');
    cleanups.push(base.remove);
    const held = await claimBufferSlot(base.path);
    const other = await claimBufferSlot(base.path);
    expect(other.dir).not.toBe(held.dir);
    await other.release();
    // Simulate a dead holder of slot-0: an old lock that nobody refreshes.
    const lock = join(held.dir, 'LOCK');
    await writeFile(lock, 'gone-host:1:dead');
    const old = new Date(Date.now() - 60_000);
    await utimes(lock, old, old);
    const next = await claimBufferSlot(base.path);
    expect(next.dir).toBe(held.dir);
    await next.release();
  });
});
