import { randomBytes } from 'node:crypto';
import { chmod, mkdir, unlink } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ClickHouse } from '@trackhouse/clickhouse';
import type { Logger } from '@trackhouse/core';
import type { Registry } from 'prom-client';
import { BufferDisk } from './disk';
import { type FlushContext, sendSegment } from './flush';
import { writerMetrics } from './metrics';
import {
  type ActiveSegment,
  appendDurably,
  DIR_MODE,
  findSegments,
  openSegment,
  type Segment,
  segmentName,
} from './segments';

export interface WriterOptions {
  dir: string;
  /** Where rows ClickHouse refuses for their content are moved (see dead-letter.ts). */
  deadLetterDir: string;
  ch: ClickHouse;
  log: Logger;
  registry: Registry;
  /** Bound of the buffer on disk; appends past it are refused (503). */
  maxBytes: number;
  /** A segment is sealed and sent at least this often while it has rows. */
  flushIntervalMs: number;
  /** A segment is sealed and sent once it holds this many rows. */
  maxBatchRows: number;
  table?: string;
}

/** The writer cannot take rows now (tracking answers 503 with Retry-After). */
export class OverloadedError extends Error {
  constructor(message = 'write-ahead buffer full', options?: ErrorOptions) {
    super(message, options);
    this.name = 'OverloadedError';
  }
}

/** The buffer's disk refused a write: full, failing, read-only or gone. */
export class BufferUnwritableError extends OverloadedError {
  constructor(cause: unknown) {
    super('write-ahead buffer cannot be written', { cause });
    this.name = 'BufferUnwritableError';
  }
}

/** Rows acknowledged but not in ClickHouse yet. */
export interface BufferBacklog {
  segments: number;
  rows: number;
  bytes: number;
}

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

const MIN_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 5_000;

/**
 * The durable writer. `append` resolves once its rows are fsync'ed to the write-ahead buffer
 * (group commit: every append waiting while a sync runs shares the next one). A flusher sends
 * sealed segments to ClickHouse in order (flush.ts) and deletes a segment only after ClickHouse
 * took it, so a replay after a crash or an outage stores every acknowledged row exactly once.
 * A failed write refuses appends (`isFull`) until the disk takes writes again (disk.ts).
 */
export class DurableWriter {
  private readonly instance = randomBytes(4).toString('hex');
  private readonly metrics;
  private readonly flushContext: FlushContext;
  private seq: number;
  private active: ActiveSegment | undefined;
  private readonly sealed: Segment[];
  private bufferedBytes = 0;
  private bufferedRows = 0;

  private pending: Buffer[] = [];
  private pendingRows = 0;
  private pendingBytes = 0;
  private waiters: Waiter[] = [];
  private commitScheduled = false;
  /** File operations, one at a time and in order; never rejects (failures are logged). */
  private io: Promise<void> = Promise.resolve();

  private readonly disk: BufferDisk;
  private closing = false;
  private stopping = false;
  private drainDeadline: number | undefined;
  private wake: (() => void) | undefined;
  private readonly timer: NodeJS.Timeout;
  private readonly flusher: Promise<void>;

  private constructor(
    private readonly opts: WriterOptions,
    replay: { segments: Segment[]; nextSeq: number },
  ) {
    this.metrics = writerMetrics(opts.registry);
    this.flushContext = {
      ch: opts.ch,
      table: opts.table ?? 'events',
      log: opts.log,
      metrics: this.metrics,
      deadLetterDir: opts.deadLetterDir,
    };
    this.disk = new BufferDisk({
      dir: opts.dir,
      probePath: join(opts.dir, `${this.instance}.probe`),
      log: opts.log,
      unwritableGauge: this.metrics.bufferUnwritable,
      serial: (what, op) => this.serial(what, op),
    });
    this.seq = replay.nextSeq;
    this.sealed = replay.segments;
    for (const s of replay.segments) {
      this.bufferedBytes += s.bytes;
      this.bufferedRows += s.rows;
    }
    this.updateGauges();
    this.timer = setInterval(() => this.requestSeal(), opts.flushIntervalMs);
    this.flusher = this.flushLoop().catch((err: unknown) => {
      opts.log.error({ err }, 'write-ahead buffer flusher stopped');
    });
  }

  /** Opens the buffer directory (owner-only) and queues what an earlier process left there. */
  static async open(opts: WriterOptions): Promise<DurableWriter> {
    const dir = resolve(opts.dir);
    await mkdir(dir, { recursive: true, mode: DIR_MODE });
    await chmod(dir, DIR_MODE);
    const replay = await findSegments(dir);
    if (replay.segments.length > 0) {
      const rows = replay.segments.reduce((sum, s) => sum + s.rows, 0);
      opts.log.info({ segments: replay.segments.length, rows }, 'replaying write-ahead buffer');
    }
    return new DurableWriter({ ...opts, dir, deadLetterDir: resolve(opts.deadLetterDir) }, replay);
  }

  /**
   * True when the buffer cannot take more (at its bound, or its last write failed): callers
   * answer 503 before doing other work.
   */
  isFull(extraBytes = 0): boolean {
    return !this.disk.writable || this.bufferedBytes + this.pendingBytes + extraBytes > this.opts.maxBytes;
  }

  /**
   * Takes `rows` rows as JSONEachRow text (one JSON object per line, each ending in a newline).
   * Resolves when they are durable on disk; rejects with OverloadedError (or its subclass
   * BufferUnwritableError) and nothing else when they cannot be.
   */
  append(lines: string, rows: number): Promise<void> {
    if (this.closing) return Promise.reject(new OverloadedError('write-ahead buffer is closing'));
    const data = Buffer.from(lines);
    if (this.isFull(data.length)) {
      this.metrics.overloaded.inc(rows);
      return Promise.reject(
        this.disk.writable ? new OverloadedError() : new BufferUnwritableError(this.disk.failure),
      );
    }
    this.pending.push(data);
    this.pendingRows += rows;
    this.pendingBytes += data.length;
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
    if (!this.commitScheduled) {
      this.commitScheduled = true;
      this.serial('commit', () => this.commit());
    }
    return done;
  }

  /** Runs file operations one at a time, in order; a failure is logged, never left unhandled. */
  private serial(what: string, op: () => Promise<void>): void {
    this.io = this.io.then(op).catch((err: unknown) => {
      this.opts.log.error({ err }, `write-ahead buffer ${what} failed`);
    });
  }

  private async commit(): Promise<void> {
    this.commitScheduled = false;
    const data = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
    const rows = this.pendingRows;
    const waiters = this.waiters;
    this.pending = [];
    this.pendingRows = 0;
    this.pendingBytes = 0;
    this.waiters = [];
    const started = performance.now();
    let segment: ActiveSegment;
    try {
      segment = this.active ??= await openSegment(this.opts.dir, segmentName(this.seq++, this.instance));
      await this.write(segment, data);
    } catch (err) {
      this.disk.failed(err);
      this.metrics.overloaded.inc(rows);
      const refused = new BufferUnwritableError(err);
      for (const w of waiters) w.reject(refused);
      return;
    }
    segment.rows += rows;
    segment.bytes += data.length;
    this.bufferedBytes += data.length;
    this.bufferedRows += rows;
    this.metrics.fsyncSeconds.observe((performance.now() - started) / 1000);
    this.updateGauges();
    this.disk.written();
    for (const w of waiters) w.resolve();
    if (segment.rows >= this.opts.maxBatchRows) await this.seal();
  }

  private async write(segment: ActiveSegment, data: Buffer): Promise<void> {
    try {
      await appendDurably(segment, data);
    } catch (err) {
      // Keep the file whole: cut what this failed commit may have written, and write no more
      // to it (after a failed sync the page cache no longer tells what is on disk). Should the
      // cut fail too, the flusher cuts the file to its acknowledged length before sending it.
      await segment.handle.truncate(segment.bytes).catch(() => {});
      await this.seal();
      throw err;
    }
  }

  private requestSeal(): void {
    if (this.active && this.active.rows > 0) this.serial('seal', () => this.seal());
  }

  /** Closes the active segment and hands it to the flusher. Never throws. */
  private async seal(): Promise<void> {
    const segment = this.active;
    if (!segment) return;
    this.active = undefined;
    await segment.handle.close().catch((err: unknown) => {
      // Every row in it was synced before it was acknowledged: a failing close loses none.
      this.opts.log.warn({ err, segment: segment.name }, 'closing a sealed buffer segment failed');
    });
    if (segment.rows === 0) {
      await unlink(segment.path).catch(() => {});
      return;
    }
    this.sealed.push({ name: segment.name, path: segment.path, rows: segment.rows, bytes: segment.bytes });
    this.wake?.();
  }

  private async flushLoop(): Promise<void> {
    let backoff = MIN_BACKOFF_MS;
    for (;;) {
      const segment = this.sealed[0];
      if (!segment) {
        if (this.stopping) return;
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        this.wake = undefined;
        continue;
      }
      try {
        await sendSegment(this.flushContext, segment);
        this.sealed.shift();
        this.bufferedBytes -= segment.bytes;
        this.bufferedRows -= segment.rows;
        this.updateGauges();
        backoff = MIN_BACKOFF_MS;
      } catch (err) {
        segment.resent = true;
        this.metrics.flushFailures.inc();
        this.opts.log.warn(
          { err, segment: segment.name, retryInMs: backoff },
          'ClickHouse insert failed; will retry',
        );
        const wait =
          this.drainDeadline === undefined ? backoff : Math.min(backoff, this.drainDeadline - Date.now());
        if (this.stopping && wait <= 0) return;
        await sleep(wait);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
      }
    }
  }

  private updateGauges(): void {
    this.metrics.bufferedBytes.set(this.bufferedBytes);
    this.metrics.bufferedRows.set(this.bufferedRows);
  }

  /** Rows acknowledged but not yet in ClickHouse. */
  get backlog(): BufferBacklog {
    return {
      segments: this.sealed.length + (this.active?.rows ? 1 : 0),
      rows: this.bufferedRows,
      bytes: this.bufferedBytes,
    };
  }

  /** Seals what is buffered and resolves once every segment is in ClickHouse (keeps running). */
  async drain(timeoutMs = 30_000): Promise<void> {
    this.serial('seal', () => this.seal());
    await this.io;
    const deadline = Date.now() + timeoutMs;
    while (this.sealed.length > 0) {
      if (Date.now() > deadline) throw new Error('write-ahead buffer did not drain in time');
      await sleep(5);
    }
  }

  /**
   * Stops taking rows and sends everything buffered to ClickHouse. What cannot be sent before
   * the deadline stays on disk and is replayed at the next start: nothing acknowledged is lost.
   * Resolves with what is left.
   */
  async close(drainTimeoutMs = 30_000): Promise<BufferBacklog> {
    if (!this.closing) {
      this.closing = true;
      clearInterval(this.timer);
      this.disk.stop();
      // Appends already accepted are committed before the last seal.
      this.serial('seal', () => this.seal());
      await this.io;
      this.stopping = true;
      this.drainDeadline = Date.now() + drainTimeoutMs;
      this.wake?.();
    }
    await this.flusher;
    return this.backlog;
  }
}
