import { randomBytes } from 'node:crypto';
import { mkdir, readFile, unlink } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ClickHouse } from '@trackhouse/clickhouse';
import type { Logger } from '@trackhouse/core';
import type { Registry } from 'prom-client';
import { writerMetrics } from './metrics';
import {
  type ActiveSegment,
  appendDurably,
  findSegments,
  openSegment,
  readCompleteLines,
  type Segment,
  segmentName,
} from './segments';

export interface WriterOptions {
  dir: string;
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

export class OverloadedError extends Error {
  constructor() {
    super('write-ahead buffer full');
    this.name = 'OverloadedError';
  }
}

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

const MAX_BACKOFF_MS = 5_000;

/**
 * The durable writer. `append` resolves once its rows are fsync'ed to the write-ahead buffer
 * (group commit: every append waiting while a sync runs shares the next one). A flusher sends
 * sealed segments to ClickHouse, one insert per segment with the segment's name as the
 * deduplication token, and deletes a segment only after ClickHouse took it; so a replay after a
 * crash or an outage stores every acknowledged row exactly once.
 */
export class DurableWriter {
  private readonly instance = randomBytes(4).toString('hex');
  private readonly metrics;
  private readonly table: string;
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
  private io: Promise<void> = Promise.resolve();

  private closing = false;
  private stopping = false;
  private wake: (() => void) | undefined;
  private readonly timer: NodeJS.Timeout;
  private readonly flusher: Promise<void>;

  private constructor(
    private readonly opts: WriterOptions,
    replay: { segments: Segment[]; nextSeq: number },
  ) {
    this.metrics = writerMetrics(opts.registry);
    this.table = opts.table ?? 'events';
    this.seq = replay.nextSeq;
    this.sealed = replay.segments;
    this.bufferedBytes = replay.segments.reduce((sum, s) => sum + s.bytes, 0);
    this.updateGauges();
    this.timer = setInterval(() => this.requestSeal(), opts.flushIntervalMs);
    this.flusher = this.flushLoop();
  }

  /** Opens the buffer directory and queues what an earlier process left there. */
  static async open(opts: WriterOptions): Promise<DurableWriter> {
    await mkdir(opts.dir, { recursive: true });
    const replay = await findSegments(opts.dir);
    if (replay.segments.length > 0) {
      opts.log.info({ segments: replay.segments.length }, 'replaying write-ahead buffer');
    }
    return new DurableWriter(opts, replay);
  }

  /** True when the buffer cannot take more: callers answer 503 before doing other work. */
  isFull(extraBytes = 0): boolean {
    return this.bufferedBytes + this.pendingBytes + extraBytes > this.opts.maxBytes;
  }

  /**
   * Takes `rows` rows as JSONEachRow text (one JSON object per line, each ending in a newline).
   * Resolves when they are durable on disk; rejects with OverloadedError when the buffer is full.
   */
  append(lines: string, rows: number): Promise<void> {
    if (this.closing) return Promise.reject(new Error('writer is closed'));
    const data = Buffer.from(lines);
    if (this.isFull(data.length)) {
      this.metrics.overloaded.inc(rows);
      return Promise.reject(new OverloadedError());
    }
    this.pending.push(data);
    this.pendingRows += rows;
    this.pendingBytes += data.length;
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
    if (!this.commitScheduled) {
      this.commitScheduled = true;
      this.serial(() => this.commit());
    }
    return done;
  }

  /** Runs file operations one at a time, in order. */
  private serial(op: () => Promise<void>): void {
    this.io = this.io.then(op, op);
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
    try {
      this.active ??= await openSegment(this.opts.dir, segmentName(this.seq++, this.instance));
      const segment = this.active;
      const sizeBefore = segment.bytes;
      try {
        await appendDurably(segment, data);
      } catch (err) {
        // Keep the file whole: cut what this failed commit may have written, then start anew.
        await segment.handle.truncate(sizeBefore).catch(() => {});
        await this.seal();
        throw err;
      }
      segment.rows += rows;
      segment.bytes += data.length;
      this.bufferedBytes += data.length;
      this.bufferedRows += rows;
      this.metrics.fsyncSeconds.observe((performance.now() - started) / 1000);
      this.updateGauges();
      for (const w of waiters) w.resolve();
      if (segment.rows >= this.opts.maxBatchRows) await this.seal();
    } catch (err) {
      this.opts.log.error({ err }, 'write-ahead buffer commit failed');
      for (const w of waiters) w.reject(err);
    }
  }

  private requestSeal(): void {
    if (this.active && this.active.rows > 0) this.serial(() => this.seal());
  }

  /** Closes the active segment and hands it to the flusher. */
  private async seal(): Promise<void> {
    const segment = this.active;
    if (!segment) return;
    this.active = undefined;
    await segment.handle.close();
    if (segment.rows === 0) {
      await unlink(segment.path).catch(() => {});
      return;
    }
    this.sealed.push({ name: segment.name, path: segment.path, rows: segment.rows, bytes: segment.bytes });
    this.wake?.();
  }

  private async flushLoop(): Promise<void> {
    let backoff = 100;
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
        await this.insert(segment);
        this.sealed.shift();
        backoff = 100;
      } catch (err) {
        this.metrics.flushFailures.inc();
        this.opts.log.warn(
          { err, segment: segment.name, retryInMs: backoff },
          'ClickHouse insert failed; will retry',
        );
        if (this.stopping && this.drainDeadline !== undefined && Date.now() > this.drainDeadline) return;
        await sleep(backoff);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
      }
    }
  }

  private async insert(segment: Segment): Promise<void> {
    const started = performance.now();
    const settings = {
      insert_deduplication_token: segment.name,
      // One parsing thread: on a small machine the tracking event loop needs the cores more
      // than an insert needs to finish fast.
      input_format_parallel_parsing: 0,
      max_insert_threads: '1',
    } as const;
    // A segment sealed by this process is whole and its rows are counted; one left by an
    // earlier process is read first (count, and a possibly torn last line to leave out).
    const replayed = segment.rows < 0 ? await readCompleteLines(segment.path) : undefined;
    const rows = replayed ? replayed.rows : segment.rows;
    if (rows > 0) {
      let result: { stream: NodeJS.ReadableStream };
      if (this.opts.ch.kind === 'embedded' && !replayed?.torn && /^[^'\\]+$/.test(segment.path)) {
        // The embedded engine reads the file itself: megabytes of rows never pass through the
        // event loop.
        result = await this.opts.ch.writer.exec({
          query: `INSERT INTO ${this.table} FROM INFILE '${segment.path}' FORMAT JSONEachRow`,
          clickhouse_settings: settings,
        });
      } else {
        const data = replayed?.data ?? (await readFile(segment.path));
        result = await this.opts.ch.writer.exec({
          query: `INSERT INTO ${this.table} FORMAT JSONEachRow`,
          values: Readable.from([data]),
          clickhouse_settings: settings,
        });
      }
      result.stream.resume();
      this.metrics.flushSeconds.observe((performance.now() - started) / 1000);
      this.metrics.batchRows.observe(rows);
      this.metrics.rowsStored.inc(rows);
    }
    await unlink(segment.path);
    this.bufferedBytes -= segment.bytes;
    this.bufferedRows = Math.max(0, this.bufferedRows - (segment.rows >= 0 ? segment.rows : rows));
    this.updateGauges();
  }

  private updateGauges(): void {
    this.metrics.bufferedBytes.set(this.bufferedBytes);
    this.metrics.bufferedRows.set(this.bufferedRows);
  }

  private drainDeadline: number | undefined;

  /** Rows acknowledged but not yet in ClickHouse (replayed segments count once read). */
  get backlog(): { segments: number; bytes: number } {
    return { segments: this.sealed.length + (this.active?.rows ? 1 : 0), bytes: this.bufferedBytes };
  }

  /** Seals what is buffered and resolves once every segment is in ClickHouse (keeps running). */
  async drain(timeoutMs = 30_000): Promise<void> {
    this.serial(() => this.seal());
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
   */
  async close(drainTimeoutMs = 30_000): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    clearInterval(this.timer);
    // Appends already accepted are committed before the last seal.
    this.serial(() => this.seal());
    await this.io;
    this.stopping = true;
    this.drainDeadline = Date.now() + drainTimeoutMs;
    this.wake?.();
    await this.flusher;
  }
}
