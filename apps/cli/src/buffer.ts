import { ClickHouseLockedError } from '@trackhouse/clickhouse';
import type { Config } from '@trackhouse/core';
import {
  bufferDirectory,
  DeadLetterNotFoundError,
  deadLetterDirectory,
  deadLetterFile,
  dropDeadLetter,
  listDeadLetters,
  readDeadLetter,
  retryDeadLetter,
} from '@trackhouse/ingest/buffer';
import { openClickHouse } from '@trackhouse/runtime';
import { type Output, UsageError } from './commands';

/**
 * `trackhouse buffer list|show|retry|drop`: the ingest buffer's dead letters. They are plain
 * files, so listing, reading and dropping work while the server runs; retrying needs
 * ClickHouse, which a running standalone server holds.
 */
export async function buffer(config: Config, args: string[]): Promise<Output> {
  const [action, name, ...rest] = args;
  const dir = deadLetterDirectory(bufferDirectory(config));
  if (action === 'list' && name === undefined) {
    const data = await listDeadLetters(dir);
    return { json: { data }, table: data };
  }
  if (!['show', 'retry', 'drop'].includes(action ?? '') || rest.length > 0)
    throw new UsageError('usage: buffer list | buffer show|retry|drop <file>');
  if (name === undefined) throw new UsageError(`missing <file>: buffer ${action} <file>`);
  try {
    const file = deadLetterFile(name);
    if (action === 'show') return await show(dir, file);
    if (action === 'drop') {
      await dropDeadLetter(dir, file);
      return { json: { file, dropped: true } };
    }
    return await retry(config, dir, file);
  } catch (err) {
    if (err instanceof DeadLetterNotFoundError) throw new UsageError(err.message);
    throw err;
  }
}

async function show(dir: string, file: string): Promise<Output> {
  const { info, lines } = await readDeadLetter(dir, file);
  const errors = new Map(info.errors.map((e) => [e.line, e]));
  const rows = lines.map((bytes, i) => {
    const e = errors.get(i + 1);
    return {
      line: i + 1,
      text: bytes.toString('utf8').replace(/\n$/, ''),
      error: e ? `${e.type}: ${e.message}` : null,
    };
  });
  return {
    json: {
      file,
      segment: info.segment,
      rows: lines.length,
      createdAt: info.createdAt,
      retriedAt: info.retriedAt ?? null,
      lines: rows,
    },
    // Escaped, so control characters and NUL bytes of a corrupt line do not reach the terminal.
    table: rows.map((r) => ({ line: r.line, error: r.error?.split('\n')[0], text: JSON.stringify(r.text) })),
  };
}

async function retry(config: Config, dir: string, file: string): Promise<Output> {
  let ch: Awaited<ReturnType<typeof openClickHouse>>;
  try {
    ch = await openClickHouse(config);
  } catch (err) {
    if (err instanceof ClickHouseLockedError)
      throw new UsageError(
        'the running server holds the embedded ClickHouse data: stop it, then retry (list, show and drop work while it runs)',
      );
    throw err;
  }
  try {
    const result = await retryDeadLetter({ ch }, dir, file);
    return { json: { file, ...result } };
  } finally {
    await ch.close();
  }
}
