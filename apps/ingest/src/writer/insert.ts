import { createReadStream } from 'node:fs';
import { unlink, writeFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { ClickHouse } from '@trackhouse/clickhouse';
import { describeInsertError, type InsertError, isContentError, refusedRow } from './classify';
import { FILE_MODE } from './segments';

/** Where rows go, and where the embedded engine reads a part of a file from. */
export interface InsertTarget {
  ch: ClickHouse;
  table: string;
  /** A scratch file for byte ranges: the embedded engine is only ever given files to read. */
  scratchPath: string;
}

// One parsing thread: on a small machine the tracking event loop needs the cores more than an
// insert needs to finish fast.
const SETTINGS = { input_format_parallel_parsing: 0, max_insert_threads: '1' } as const;

/**
 * Inserts a JSONEachRow file. The embedded engine reads it itself (`FROM INFILE`): megabytes of
 * rows never pass through the event loop, and the engine's connection never sees them as text
 * (it would splice inline data into the query, where a blank line ends the data and what
 * follows runs as SQL). A server gets the file as the request body.
 */
export async function insertFile(target: InsertTarget, path: string, token: string): Promise<void> {
  const { ch, table } = target;
  const clickhouse_settings = { ...SETTINGS, insert_deduplication_token: token };
  const result =
    ch.kind === 'embedded'
      ? await ch.writer.exec({
          query: `INSERT INTO ${table} FROM INFILE ${sqlString(path)} FORMAT JSONEachRow`,
          clickhouse_settings,
        })
      : await ch.writer.exec({
          query: `INSERT INTO ${table} FORMAT JSONEachRow`,
          values: createReadStream(path),
          clickhouse_settings,
        });
  result.stream.resume();
}

/** Inserts rows given as bytes (JSONEachRow) under `token`. */
export async function insertBytes(target: InsertTarget, bytes: Buffer, token: string): Promise<void> {
  if (target.ch.kind !== 'embedded') {
    const result = await target.ch.writer.exec({
      query: `INSERT INTO ${target.table} FORMAT JSONEachRow`,
      values: Readable.from([bytes]),
      clickhouse_settings: { ...SETTINGS, insert_deduplication_token: token },
    });
    result.stream.resume();
    return;
  }
  await writeFile(target.scratchPath, bytes, { mode: FILE_MODE });
  await insertFile(target, target.scratchPath, token);
}

function sqlString(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/** A batch as lines: line i is `data[starts[i], starts[i + 1])`. */
export interface Lines {
  data: Buffer;
  starts: number[];
}

export function splitLines(data: Buffer): Lines {
  const starts = [0];
  for (let i = data.indexOf(0x0a); i !== -1; i = data.indexOf(0x0a, i + 1)) starts.push(i + 1);
  if (starts.at(-1) !== data.length) starts.push(data.length);
  return { data, starts };
}

export function lineCount(lines: Lines): number {
  return lines.starts.length - 1;
}

export function lineAt(lines: Lines, index: number): Buffer {
  return lines.data.subarray(lines.starts[index], lines.starts[index + 1]);
}

export interface RefusedLine {
  index: number;
  error: InsertError;
}

/**
 * Inserts what ClickHouse takes of a batch it may refuse for its content. A refused range is
 * split until each part is taken or is a single line, which is refused: around the row the
 * error names (`at row N`: the rows before it, that row alone, the rows after it), else in
 * halves. Each part carries the deduplication token `tokenOf` gives its range, and the split
 * depends only on the lines and ClickHouse's answers, so a crash or a transient failure half-way
 * (which propagates: the caller redoes it later) stores no part twice. `refusal` is the error
 * the whole batch already got, if it was tried.
 */
export async function insertAround(
  target: InsertTarget,
  lines: Lines,
  tokenOf: (from: number, to: number, bytes: Buffer) => string,
  refusal?: unknown,
): Promise<{ stored: number; refused: RefusedLine[] }> {
  let stored = 0;
  const refused: RefusedLine[] = [];
  // A stack of ranges still to settle, in line order from its top.
  const work: { from: number; to: number; error?: unknown }[] = [
    { from: 0, to: lineCount(lines), error: refusal },
  ];
  try {
    for (let range = work.pop(); range; range = work.pop()) {
      const { from, to } = range;
      const bytes = lines.data.subarray(lines.starts[from], lines.starts[to]);
      if (from >= to || isBlank(bytes)) continue;
      let error = range.error;
      if (error === undefined) {
        try {
          await insertBytes(target, bytes, tokenOf(from, to, bytes));
          stored += to - from;
          continue;
        } catch (err) {
          if (!isContentError(err)) throw err;
          error = err;
        }
      }
      if (to - from === 1) {
        refused.push({ index: from, error: describeInsertError(error) });
        continue;
      }
      const row = refusedRow(error, to - from);
      const mid = (from + to) >>> 1;
      const parts: [number, number][] =
        row === undefined
          ? [
              [from, mid],
              [mid, to],
            ]
          : [
              [from, from + row - 1],
              [from + row - 1, from + row],
              [from + row, to],
            ];
      for (const [a, b] of parts.reverse()) work.push({ from: a, to: b });
    }
  } finally {
    await unlink(target.scratchPath).catch(() => {});
  }
  return { stored, refused };
}

function isBlank(bytes: Buffer): boolean {
  for (const b of bytes) if (b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09) return false;
  return true;
}
