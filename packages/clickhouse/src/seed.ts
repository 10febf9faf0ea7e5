import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { ClickHouse } from './client';
import { LOCAL_SUFFIX } from './cluster';
import type { StoredEvent } from './rows';
import { generateEvents, type SeedOptions } from './seed-generate';

export { generateEvents, rng, type SeedOptions } from './seed-generate';

/** Inserts rows given as JSONEachRow text: the embedded engine reads a temporary file. */
async function insertLines(ch: ClickHouse, text: string, dir: string, n: number): Promise<void> {
  if (ch.kind === 'embedded') {
    const file = join(dir, `batch-${n}.ndjson`);
    const out = createWriteStream(file);
    out.end(text);
    await finished(out);
    const r = await ch.writer.exec({ query: `INSERT INTO events FROM INFILE '${file}' FORMAT JSONEachRow` });
    r.stream.resume();
    await rm(file);
  } else {
    const r = await ch.writer.exec({
      query: 'INSERT INTO events FORMAT JSONEachRow',
      values: Readable.from([text]),
    });
    r.stream.resume();
  }
}

/**
 * Inserts events in batches of `batchRows`, reporting progress: a generator (the CLI's seed,
 * millions of rows) or an array (tests, which keep the rows to compute expected answers).
 */
export async function insertEvents(
  ch: ClickHouse,
  events: Iterable<StoredEvent>,
  opts: { batchRows?: number; onProgress?: (done: number) => void } = {},
): Promise<number> {
  const batchRows = opts.batchRows ?? 200_000;
  const dir = await mkdtemp(join(tmpdir(), 'trackhouse-seed-'));
  let done = 0;
  try {
    const iterator = events[Symbol.iterator]();
    for (let batch = 0; ; batch++) {
      let text = '';
      let rows = 0;
      // next() by hand: breaking out of for…of would close a generator.
      for (let item = iterator.next(); !item.done; item = iterator.next()) {
        text += `${JSON.stringify(item.value)}\n`;
        if (++rows >= batchRows) break;
      }
      if (rows === 0) return done;
      await insertLines(ch, text, dir, batch);
      done += rows;
      opts.onProgress?.(done);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Generates and inserts events (the CLI's seed; web vitals and autocapture included unless
 * `product: false`), then merges the session rollup's past days as
 * live traffic would have had them: weeks of history arrive here in minutes, while the table
 * merges a day's partition only an hour after its last insert.
 */
export async function seedEvents(
  ch: ClickHouse,
  opts: SeedOptions & { batchRows?: number; onProgress?: (done: number) => void },
): Promise<number> {
  const inserted = await insertEvents(ch, generateEvents({ product: true, ...opts }), opts);
  await compactSessionDays(ch, new Date());
  return inserted;
}

/** The per-session rollups, partitioned by the UTC day a session began. */
const SESSION_ROLLUPS = ['sessions', 'session_facts', 'session_paths'];

/**
 * Merges each partition of the session rollups (one per UTC day a session began) that holds
 * several parts, for the days before `today`. Returns the partitions merged, as `table:id`.
 */
export async function compactSessionDays(ch: ClickHouse, today: Date): Promise<string[]> {
  // On a cluster: the parts of every replica's local table, merged on each shard (ON CLUSTER).
  const parts = ch.cluster ? `clusterAllReplicas('${ch.cluster}', system.parts)` : 'system.parts';
  const onCluster = ch.cluster ? ` ON CLUSTER ${ch.cluster}` : '';
  const merged: string[] = [];
  for (const rollup of SESSION_ROLLUPS) {
    const table = ch.cluster ? `${rollup}${LOCAL_SUFFIX}` : rollup;
    const rows = await ch.query<{ id: string }>(
      `SELECT partition_id AS id FROM ${parts}
       WHERE database = currentDatabase() AND table = {table:String} AND active
       GROUP BY partition_id HAVING count() > 1 AND partition_id < {today:String}
       ORDER BY partition_id`,
      { table, today: today.toISOString().slice(0, 10).replaceAll('-', '') },
    );
    const ids = rows.map((r) => r.id).filter((id) => /^\d{8}$/.test(id));
    // A partition id is not a value OPTIMIZE can bind; these are eight digits from system.parts.
    for (const id of ids) {
      await ch.command(`OPTIMIZE TABLE ${table}${onCluster} PARTITION ID '${id}' FINAL`);
      merged.push(`${rollup}:${id}`);
    }
  }
  return merged;
}
