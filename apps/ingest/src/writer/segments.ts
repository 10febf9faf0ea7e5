import { createReadStream } from 'node:fs';
import { type FileHandle, open, readdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';

/** A write-ahead buffer file. Its name is the deduplication token of its ClickHouse insert. */
export interface Segment {
  name: string;
  path: string;
  /** Lines (one row each; a corrupt file may hold lines ClickHouse refuses). */
  rows: number;
  bytes: number;
  /**
   * An earlier attempt may have sent it (left by an earlier process, or retried after a
   * failure): after its insert, its rows are looked up and what is missing is stored again
   * (restore.ts).
   */
  resent?: boolean;
}

export interface ActiveSegment extends Segment {
  handle: FileHandle;
}

const SEGMENT_FILE = /^(\d{12})-([0-9a-z]+)\.ndjson$/;
/** Files of the buffer directory that are not segments: scratch copies and write probes. */
const LEFTOVER_FILE = /\.(part|probe)$/;
export const FILE_MODE = 0o600;
export const DIR_MODE = 0o700;

export function segmentName(seq: number, instance: string): string {
  return `${String(seq).padStart(12, '0')}-${instance}.ndjson`;
}

/**
 * Creates a new segment (owner-only) and syncs its directory entry: a row acknowledged from
 * this file must not vanish with the file's name after a power loss.
 */
export async function openSegment(dir: string, name: string): Promise<ActiveSegment> {
  const path = join(dir, name);
  const handle = await open(path, 'ax', FILE_MODE);
  try {
    await syncDirectory(dir);
  } catch (err) {
    await handle.close().catch(() => {});
    await unlink(path).catch(() => {});
    throw err;
  }
  return { name, path, rows: 0, bytes: 0, handle };
}

/** Makes the creations, renames and removals of a directory's entries durable. */
export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Writes all of `data`, then forces it to disk: only after this may events be acknowledged. */
export async function appendDurably(segment: ActiveSegment, data: Buffer): Promise<void> {
  let offset = 0;
  while (offset < data.length) {
    const { bytesWritten } = await segment.handle.write(data, offset, data.length - offset);
    offset += bytesWritten;
  }
  await segment.handle.datasync();
}

/**
 * Segments left by an earlier process (crash, outage, shutdown), oldest first, and the next seq.
 * Each is made whole first: a torn last line (a write cut by a crash or a power loss) was never
 * fsync'ed as a whole, so never acknowledged, and is cut off; empty files are removed.
 */
export async function findSegments(dir: string): Promise<{ segments: Segment[]; nextSeq: number }> {
  const entries = await readdir(dir);
  for (const name of entries.filter((n) => LEFTOVER_FILE.test(n))) await unlink(join(dir, name));
  const names = entries.filter((n) => SEGMENT_FILE.test(n)).sort();
  const segments: Segment[] = [];
  for (const name of names) {
    const path = join(dir, name);
    const scan = await scanSegment(path);
    if (!scan.content) {
      await unlink(path);
      continue;
    }
    if (scan.wholeBytes < scan.size) await truncateDurably(path, scan.wholeBytes);
    segments.push({ name, path, rows: scan.lines, bytes: scan.wholeBytes, resent: true });
  }
  const last = names.at(-1);
  const nextSeq = last ? Number(SEGMENT_FILE.exec(last)![1]) + 1 : 1;
  return { segments, nextSeq };
}

interface SegmentScan {
  size: number;
  /** Complete lines, and the bytes they take (up to and including the last newline). */
  lines: number;
  wholeBytes: number;
  /** Whether a complete line holds anything but whitespace. */
  content: boolean;
}

async function scanSegment(path: string): Promise<SegmentScan> {
  const { size } = await stat(path);
  let lines = 0;
  let offset = 0;
  let wholeBytes = 0;
  let firstContent = -1;
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
    for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, i + 1)) {
      lines++;
      wholeBytes = offset + i + 1;
    }
    if (firstContent === -1) {
      const at = chunk.findIndex((b) => b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09);
      if (at !== -1) firstContent = offset + at;
    }
    offset += chunk.length;
  }
  return { size, lines, wholeBytes, content: firstContent !== -1 && firstContent < wholeBytes };
}

export async function truncateDurably(path: string, length: number): Promise<void> {
  const handle = await open(path, 'r+');
  try {
    await handle.truncate(length);
    await handle.datasync();
  } finally {
    await handle.close();
  }
}
