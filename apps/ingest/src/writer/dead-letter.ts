import { createHash } from 'node:crypto';
import { chmod, mkdir, open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { ClickHouse } from '@trackhouse/clickhouse';
import type { InsertError } from './classify';
import { insertAround, lineAt, lineCount, splitLines } from './insert';
import { DIR_MODE, FILE_MODE, syncDirectory } from './segments';

/**
 * Rows ClickHouse refused for their content, one record per buffer segment (docs/decisions.md,
 * "Dead letters"): `<segment>.ndjson` holds the refused lines exactly as they were buffered,
 * `<segment>.error.json` what ClickHouse answered for each. Both owner-only, written through a
 * synced temporary file and a rename, the sidecar first: a data file always has its errors.
 */
export interface DeadLetterInfo {
  version: 1;
  /** The buffer segment the lines came from. */
  segment: string;
  /** The table they were refused by, and go to on retry (absent in early files: `events`). */
  table?: string;
  createdAt: string;
  retriedAt?: string;
  rows: number;
  errors: DeadLetterError[];
}

export interface DeadLetterError extends InsertError {
  /** 1-based line of the dead-letter file, and of the segment it came from (null if unknown). */
  line: number;
  segmentLine: number | null;
}

export type DeadLetterSummary = {
  file: string;
  rows: number;
  /** The first refused line's error. */
  error: string;
  createdAt: string;
};

const DATA_FILE = /^\d{12}-[0-9a-z]+\.ndjson$/;

export class DeadLetterNotFoundError extends Error {}

/** The dead-letter folder beside the buffer slots. */
export function deadLetterDirectory(bufferBase: string): string {
  return join(bufferBase, 'dead-letter');
}

function sidecarOf(file: string): string {
  return file.replace(/\.ndjson$/, '.error.json');
}

/** A file name as given on the command line (with or without `.ndjson`), never a path. */
export function deadLetterFile(name: string): string {
  const file = name.endsWith('.ndjson') ? name : `${name}.ndjson`;
  if (!DATA_FILE.test(file)) throw new DeadLetterNotFoundError(`not a dead-letter file name: ${name}`);
  return file;
}

export async function writeDeadLetter(
  dir: string,
  file: string,
  lines: Buffer[],
  info: DeadLetterInfo,
): Promise<void> {
  await mkdir(dir, { recursive: true, mode: DIR_MODE });
  await chmod(dir, DIR_MODE);
  await writeDurably(dir, sidecarOf(file), Buffer.from(`${JSON.stringify(info, null, 2)}\n`));
  await writeDurably(dir, file, Buffer.concat(lines));
  await syncDirectory(dir);
}

async function writeDurably(dir: string, name: string, data: Buffer): Promise<void> {
  const temp = join(dir, `.${name}.tmp`);
  const handle = await open(temp, 'w', FILE_MODE);
  try {
    await handle.writeFile(data);
    await handle.datasync();
  } finally {
    await handle.close();
  }
  await rename(temp, join(dir, name));
}

export async function listDeadLetters(dir: string): Promise<DeadLetterSummary[]> {
  const names = await readdir(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [] as string[];
    throw err;
  });
  const out: DeadLetterSummary[] = [];
  for (const file of names.filter((n) => DATA_FILE.test(n)).sort()) {
    const { info, lines } = await readDeadLetter(dir, file);
    const first = info.errors[0];
    out.push({
      file,
      rows: lines.length,
      error: first ? `${first.type}: ${first.message.split('\n')[0]}` : 'unknown',
      createdAt: info.createdAt,
    });
  }
  return out;
}

export async function readDeadLetter(
  dir: string,
  file: string,
): Promise<{ info: DeadLetterInfo; lines: Buffer[] }> {
  const data = await readFile(join(dir, file)).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') throw new DeadLetterNotFoundError(`no dead letter ${file}`);
    throw err;
  });
  const split = splitLines(data);
  const lines = Array.from({ length: lineCount(split) }, (_, i) => lineAt(split, i));
  const sidecar = await readFile(join(dir, sidecarOf(file)), 'utf8').catch(() => undefined);
  const info: DeadLetterInfo = sidecar
    ? (JSON.parse(sidecar) as DeadLetterInfo)
    : { version: 1, segment: file, createdAt: new Date(0).toISOString(), rows: lines.length, errors: [] };
  return { info, lines };
}

export async function dropDeadLetter(dir: string, file: string): Promise<void> {
  await unlink(join(dir, file)).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') throw new DeadLetterNotFoundError(`no dead letter ${file}`);
    throw err;
  });
  await unlink(join(dir, sidecarOf(file))).catch(() => {});
  await syncDirectory(dir);
}

/**
 * Inserts a dead letter's lines again (after an upgrade, or after they were fixed by hand).
 * Lines still refused stay, with their new errors; the record is removed once none is left.
 * Parts carry a token derived from their content, so retrying twice stores nothing twice and
 * a line changed by hand is a new row.
 */
export async function retryDeadLetter(
  target: { ch: ClickHouse; table?: string },
  dir: string,
  file: string,
): Promise<{ stored: number; remaining: number }> {
  const { info, lines } = await readDeadLetter(dir, file);
  const withNewlines = lines.map((l) => (l.at(-1) === 0x0a ? l : Buffer.concat([l, Buffer.from('\n')])));
  const batch = splitLines(Buffer.concat(withNewlines));
  const { stored, refused } = await insertAround(
    { ch: target.ch, table: target.table ?? info.table ?? 'events', scratchPath: join(dir, `.${file}.part`) },
    batch,
    (_from, _to, bytes) =>
      `dead-letter:${file}:${createHash('sha256').update(bytes).digest('hex').slice(0, 32)}`,
  );
  if (refused.length === 0) {
    await dropDeadLetter(dir, file);
    return { stored, remaining: 0 };
  }
  const segmentLines = new Map(info.errors.map((e) => [e.line, e.segmentLine]));
  await writeDeadLetter(
    dir,
    file,
    refused.map((r) => lineAt(batch, r.index)),
    {
      ...info,
      retriedAt: new Date().toISOString(),
      rows: refused.length,
      errors: refused.map((r, i) => ({
        line: i + 1,
        segmentLine: segmentLines.get(r.index + 1) ?? null,
        ...r.error,
      })),
    },
  );
  return { stored, remaining: refused.length };
}
