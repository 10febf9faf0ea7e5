import { readdir } from 'node:fs/promises';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { tempDir } from '../../../test/helpers';

// A file created in place (`wx`) is written 300 ms after it appears, as on a busy thread pool
// (creating and writing are separate tasks there): meanwhile it is empty, as a released lock
// was. And a lock found taken can be released by its holder right then (`onTaken`). The file
// system is the real one; only that delay and that moment are added.
const moments = vi.hoisted(() => ({ onTaken: undefined as (() => Promise<void>) | undefined }));
vi.mock('node:fs/promises', async (original) => {
  const fs = await original<typeof import('node:fs/promises')>();
  const writeFile = async (path: string, data: string, options?: { flag?: string }) => {
    if (options?.flag !== 'wx') return fs.writeFile(path, data, options);
    const handle = await fs.open(path, 'wx');
    try {
      await new Promise((r) => setTimeout(r, 300));
      await handle.writeFile(data);
    } finally {
      await handle.close();
    }
  };
  const link = async (from: string, to: string) => {
    try {
      await fs.link(from, to);
    } catch (err) {
      const release = moments.onTaken;
      moments.onTaken = undefined;
      await release?.();
      throw err;
    }
  };
  return { ...fs, writeFile, link, default: { ...fs, writeFile, link } };
});

const { claimBufferSlot } = await import('../src/writer/slots');

describe('ingest buffer slots, a lock file written late', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups) await c();
  });

  it('never gives one slot to two claims made at the same moment', async () => {
    const base = await tempDir('slots-race');
    cleanups.push(base.remove);
    for (let round = 0; round < 3; round++) {
      const claims = await Promise.all(Array.from({ length: 4 }, () => claimBufferSlot(base.path)));
      expect(new Set(claims.map((c) => c.dir)).size).toBe(4);
      await Promise.all(claims.map((c) => c.release()));
      // No lock written aside is left in a slot.
      for (const c of claims) expect((await readdir(c.dir)).filter((n) => n.startsWith('LOCK'))).toEqual([]);
    }
  });

  it('takes a slot whose holder releases it while the claim looks at its lock', async () => {
    const base = await tempDir('slots-release');
    cleanups.push(base.remove);
    const held = await claimBufferSlot(base.path);
    moments.onTaken = () => held.release();
    const next = await claimBufferSlot(base.path);
    expect(moments.onTaken).toBeUndefined();
    expect(next.dir).toBe(held.dir);
    await next.release();
  });
});
