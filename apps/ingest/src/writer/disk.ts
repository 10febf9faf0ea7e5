import { mkdir, open, unlink } from 'node:fs/promises';
import type { Logger } from '@trackhouse/core';
import type { Gauge } from 'prom-client';
import { DIR_MODE, FILE_MODE } from './segments';

/** How often a buffer whose last write failed is tried again. */
const PROBE_INTERVAL_MS = 1_000;
const PROBE_BYTES = Buffer.alloc(4096, 0x0a);

export interface BufferDiskOptions {
  dir: string;
  /** A file of the buffer directory the probe may write (removed at start if left over). */
  probePath: string;
  log: Logger;
  unwritableGauge: Gauge;
  /** Runs the probe in line with the writer's other file operations. */
  serial: (what: string, op: () => Promise<void>) => void;
}

/**
 * Whether the buffer's disk takes writes. After a failed write (full, failing, read-only, its
 * directory gone) it answers "no" until a later commit succeeds or a probe, every second,
 * creates the directory if needed and writes and syncs a small file there.
 */
export class BufferDisk {
  /** The last write error while the disk refuses writes, else undefined. */
  private error: unknown;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly opts: BufferDiskOptions) {}

  get failure(): unknown {
    return this.error;
  }

  get writable(): boolean {
    return this.error === undefined;
  }

  failed(err: unknown): void {
    if (this.error === undefined) {
      this.opts.log.error({ err }, 'write-ahead buffer cannot be written; tracking answers 503 until it can');
    }
    this.error = err;
    this.opts.unwritableGauge.set(1);
    this.schedule();
  }

  written(): void {
    if (this.error === undefined) return;
    this.error = undefined;
    this.opts.unwritableGauge.set(0);
    this.opts.log.info('write-ahead buffer writable again');
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.timer || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.opts.serial('probe', () => this.probe());
    }, PROBE_INTERVAL_MS);
    this.timer.unref();
  }

  private async probe(): Promise<void> {
    if (this.error === undefined || this.stopped) return;
    try {
      await mkdir(this.opts.dir, { recursive: true, mode: DIR_MODE });
      const handle = await open(this.opts.probePath, 'w', FILE_MODE);
      try {
        await handle.writeFile(PROBE_BYTES);
        await handle.datasync();
      } finally {
        await handle.close();
      }
      await unlink(this.opts.probePath);
    } catch (err) {
      this.error = err;
      this.schedule();
      return;
    }
    this.written();
  }
}
