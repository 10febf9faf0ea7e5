import { afterAll, describe, expect, it, vi } from 'vitest';
import { tempDir } from '../../../test/helpers';

// A file created in place (`wx`) is written 300 ms after it appears, as on a busy thread pool
// (creating and writing are separate tasks there): meanwhile it is empty, as a released lock
// was. The file system is the real one; only that delay is added.
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
  return { ...fs, writeFile, default: { ...fs, writeFile } };
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
    }
  });
});
