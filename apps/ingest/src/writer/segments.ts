import { type FileHandle, open, readdir, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';

/** A write-ahead buffer file. Its name is the deduplication token of its ClickHouse insert. */
export interface Segment {
  name: string;
  path: string;
  rows: number;
  bytes: number;
}

export interface ActiveSegment extends Segment {
  handle: FileHandle;
}

const SEGMENT_FILE = /^(\d{12})-([0-9a-z]+)\.ndjson$/;

export function segmentName(seq: number, instance: string): string {
  return `${String(seq).padStart(12, '0')}-${instance}.ndjson`;
}

export async function openSegment(dir: string, name: string): Promise<ActiveSegment> {
  const path = join(dir, name);
  const handle = await open(path, 'a');
  return { name, path, rows: 0, bytes: 0, handle };
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

/** Segments left by an earlier process (crash, outage, shutdown), oldest first, and the next seq. */
export async function findSegments(dir: string): Promise<{ segments: Segment[]; nextSeq: number }> {
  const names = (await readdir(dir)).filter((n) => SEGMENT_FILE.test(n)).sort();
  const segments: Segment[] = [];
  for (const name of names) {
    const path = join(dir, name);
    const { size } = await stat(path);
    if (size === 0) {
      await unlink(path);
      continue;
    }
    segments.push({ name, path, rows: -1, bytes: size });
  }
  const last = names.at(-1);
  const nextSeq = last ? Number(SEGMENT_FILE.exec(last)![1]) + 1 : 1;
  return { segments, nextSeq };
}

/**
 * A segment's complete lines. A crash can leave a torn last line; it was never fsync'ed as a
 * whole and so never acknowledged, and is dropped here.
 */
export async function readCompleteLines(
  path: string,
): Promise<{ data: Buffer; rows: number; torn: boolean }> {
  const raw = await readFile(path);
  const end = raw.lastIndexOf(0x0a) + 1;
  const data = raw.subarray(0, end);
  let rows = 0;
  for (let i = data.indexOf(0x0a); i !== -1; i = data.indexOf(0x0a, i + 1)) rows++;
  return { data, rows, torn: end !== raw.length };
}
