import { readFile, stat, unlink } from 'node:fs/promises';
import type { ClickHouse } from '@trackhouse/clickhouse';
import type { Logger } from '@trackhouse/core';
import { isContentError, redactedReason } from './classify';
import { writeDeadLetter } from './dead-letter';
import { type InsertTarget, insertAround, insertFile, lineAt, lineCount, splitLines } from './insert';
import type { writerMetrics } from './metrics';
import { restoreMissing } from './restore';
import { type Segment, truncateDurably } from './segments';

export interface FlushContext {
  ch: ClickHouse;
  table: string;
  log: Logger;
  metrics: ReturnType<typeof writerMetrics>;
  deadLetterDir: string;
}

/**
 * Sends one sealed segment to ClickHouse, then deletes it. A segment refused for its content
 * is split: what ClickHouse takes is stored, the refused lines go to the dead letter. Transient
 * failures throw, and the caller retries the same segment later; every insert carries a token
 * derived from the segment's name (and line range), so whatever a failed attempt stored is not
 * stored again.
 */
export async function sendSegment(ctx: FlushContext, segment: Segment): Promise<void> {
  const size = await sizeOf(segment.path);
  if (size === undefined) {
    ctx.log.error(
      { segment: segment.name, rows: segment.rows },
      'buffer segment vanished before it was sent',
    );
    return;
  }
  // A failed commit whose cut failed too left unacknowledged bytes at the end.
  if (size > segment.bytes) await truncateDurably(segment.path, segment.bytes);
  const started = performance.now();
  if (segment.rows > 0) {
    const target = { ch: ctx.ch, table: ctx.table, scratchPath: `${segment.path}.part` };
    let whole = true;
    try {
      // A segment is one insert block (at most ~1M rows): ClickHouse parses all of it before
      // it writes any, so a refused segment stored nothing under its own token.
      await insertFile(target, segment.path, segment.name);
    } catch (err) {
      if (!isContentError(err)) throw err;
      await salvage(ctx, segment, target, err);
      whole = false;
    }
    // Outside the try: a failing lookup is retried with the segment, never taken for refused rows.
    if (whole) {
      if (segment.resent) await restore(ctx, segment, target);
      ctx.metrics.rowsStored.inc(segment.rows);
    }
    ctx.metrics.flushSeconds.observe((performance.now() - started) / 1000);
    ctx.metrics.batchRows.observe(segment.rows);
  }
  await unlink(segment.path).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
}

/** Stores again what an insert under the segment's token dropped as already stored (restore.ts). */
async function restore(ctx: FlushContext, segment: Segment, target: InsertTarget): Promise<void> {
  const restored = await restoreMissing(target, splitLines(await readFile(segment.path)), segment.name);
  if (restored === 0) return;
  ctx.metrics.rowsRestored.inc(restored);
  ctx.log.warn(
    { segment: segment.name, rows: restored, lines: segment.rows },
    'rows of a resent segment were missing from ClickHouse under its token; stored them again',
  );
}

async function salvage(
  ctx: FlushContext,
  segment: Segment,
  target: InsertTarget,
  refusal: unknown,
): Promise<void> {
  const lines = splitLines(await readFile(segment.path));
  const { stored, refused } = await insertAround(
    target,
    lines,
    (from, to) => `${segment.name}:${from}-${to}`,
    refusal,
  );
  ctx.metrics.rowsStored.inc(stored);
  if (refused.length === 0) return;
  await writeDeadLetter(
    ctx.deadLetterDir,
    segment.name,
    refused.map((r) => lineAt(lines, r.index)),
    {
      version: 1,
      segment: segment.name,
      table: ctx.table,
      createdAt: new Date().toISOString(),
      rows: refused.length,
      errors: refused.map((r, i) => ({ line: i + 1, segmentLine: r.index + 1, ...r.error })),
    },
  );
  ctx.metrics.deadLetterRows.inc(refused.length);
  const first = refused[0]!.error;
  ctx.log.warn(
    {
      segment: segment.name,
      rows: refused.length,
      stored,
      lines: lineCount(lines),
      error: { code: first.code, type: first.type, reason: redactedReason(first.message) },
      deadLetterDir: ctx.deadLetterDir,
    },
    'rows dead-lettered',
  );
}

async function sizeOf(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
