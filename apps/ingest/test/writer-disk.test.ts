import { spawnSync } from 'node:child_process';
import { mkdir, open, readdir, statfs, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { ClickHouse } from '@trackhouse/clickhouse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestClickHouse, ROOT, runCommand, tempDir } from '../../../test/helpers';
import { OverloadedError } from '../src/writer/writer';
import { exactlyOnce, goodLines, openWriter, randomSiteId, storedIds } from './writer-support';

/** Whether this process may mount a tmpfs (root on Linux, as on CI). */
function canMountTmpfs(): boolean {
  const probe = spawnSync('sh', [
    '-c',
    'd=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d" && umount "$d"; r=$?; rmdir "$d"; exit $r',
  ]);
  return probe.status === 0;
}
const tmpfs = canMountTmpfs();

/** A full disk under the write-ahead buffer: refused with 503, never lost, never a crash. */
describe('write-ahead buffer on a full disk', () => {
  let ch: ClickHouse;
  const cleanups: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    const engine = await createTestClickHouse();
    ch = engine.ch;
    cleanups.push(engine.close);
  });
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  it('past a file size limit (RLIMIT_FSIZE) refuses with OverloadedError, recovers, and every acknowledged row reaches ClickHouse once', async () => {
    const base = await tempDir('fsize');
    cleanups.push(base.remove);
    const dir = join(base.path, 'slot-0');
    const deadLetterDir = join(base.path, 'dead-letter');
    const site = randomSiteId();
    // 256 KiB per file: a segment hits it after a few dozen batches.
    const child = await runCommand('bash', [
      '-c',
      'ulimit -f 256 && exec "$@"',
      'bash',
      process.execPath,
      '--import',
      'tsx',
      join(ROOT, 'apps/ingest/test/fixtures/fill-buffer.ts'),
      dir,
      deadLetterDir,
      String(site),
    ]);
    expect(child.code, child.stderr.slice(-2000)).toBe(0);
    const result = JSON.parse(child.stdout) as {
      acknowledged: string[];
      refusals: { name: string; overloaded: boolean; fullAfter: boolean }[];
      recovered: boolean;
      after: boolean;
      left: { rows: number };
    };
    expect(result.acknowledged.length).toBeGreaterThan(100);
    expect(result.refusals).toEqual([{ name: 'BufferUnwritableError', overloaded: true, fullAfter: true }]);
    expect(result).toMatchObject({
      recovered: true,
      after: true,
      left: { rows: result.acknowledged.length },
    });

    // The next start replays what the full disk left: whole segments, every row once.
    const writer = await openWriter(ch, { dir, deadLetterDir });
    await writer.drain(20_000);
    await writer.close();
    expect(await storedIds(ch, site)).toEqual(exactlyOnce(result.acknowledged));
    expect(await readdir(deadLetterDir).catch(() => [])).toEqual([]);
  }, 60_000);

  it.skipIf(!tmpfs)(
    'on a full tmpfs (ENOSPC; mounting needs root, as on CI) refuses with OverloadedError until space is freed, and stores every acknowledged row once',
    async () => {
      const base = await tempDir('enospc');
      cleanups.push(base.remove);
      const mount = join(base.path, 'volume');
      await mkdir(mount);
      expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=512k', 'tmpfs', mount]).status).toBe(0);
      try {
        const dir = join(mount, 'slot-0');
        const deadLetterDir = join(mount, 'dead-letter');
        const site = randomSiteId();
        // Leave about 64 KiB free.
        const { bavail, bsize } = await statfs(mount);
        const filler = join(mount, 'filler');
        const handle = await open(filler, 'w');
        await handle.write(Buffer.alloc(Math.max(0, bavail * bsize - 64 * 1024)));
        await handle.close();

        const writer = await openWriter(ch, {
          dir,
          deadLetterDir,
          flushIntervalMs: 60_000,
          maxBatchRows: 1_000_000,
        });
        const acknowledged: string[] = [];
        let refused: unknown;
        for (let i = 0; i < 1000 && refused === undefined; i++) {
          const batch = goodLines(site, 20);
          await writer.append(batch.text, 20).then(
            () => acknowledged.push(...batch.ids),
            (err: unknown) => {
              refused = err;
            },
          );
        }
        expect(refused).toBeInstanceOf(OverloadedError);
        expect((refused as Error & { cause: NodeJS.ErrnoException }).cause.code).toBe('ENOSPC');
        expect(writer.isFull()).toBe(true);
        await expect(writer.append(goodLines(site, 1).text, 1)).rejects.toBeInstanceOf(OverloadedError);

        await unlink(filler);
        const deadline = Date.now() + 10_000;
        while (writer.isFull() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        expect(writer.isFull()).toBe(false);
        const last = goodLines(site, 5);
        await writer.append(last.text, 5);
        await writer.drain(20_000);
        await writer.close();
        expect(acknowledged.length).toBeGreaterThan(100);
        expect(await storedIds(ch, site)).toEqual(exactlyOnce([...acknowledged, ...last.ids]));
        expect(await readdir(deadLetterDir).catch(() => [])).toEqual([]);
      } finally {
        spawnSync('umount', ['-l', mount]);
      }
    },
    60_000,
  );
});
