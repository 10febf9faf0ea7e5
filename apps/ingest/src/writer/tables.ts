import { join } from 'node:path';
import { type BufferBacklog, DurableWriter, type WriterOptions } from './writer';

/**
 * One durable writer per ClickHouse table. Each keeps its own segments in its own directory
 * (events at the top of the buffer slot, as before there were other tables; the others in a
 * subdirectory named after their table), so a segment is one insert into one table and its
 * name stays that insert's deduplication token. Replay after a crash or a slot takeover finds
 * every table's segments the same way.
 */
export interface TableWriters {
  events: DurableWriter;
  /** `identifies` (user profiles and aliases are filled from it by views). */
  identifies: DurableWriter;
  /** `session_replay`: rows are rrweb batches, up to megabytes each. */
  replays: DurableWriter;
  drain(timeoutMs?: number): Promise<void>;
  /** Closes every writer; what they could not send, summed. */
  close(drainTimeoutMs?: number): Promise<BufferBacklog>;
}

/** Rows of a replay segment: batches of up to 2 MiB each keep one insert to about 100 MiB. */
const MAX_REPLAY_BATCH_ROWS = 50;

export async function openTableWriters(opts: Omit<WriterOptions, 'table'>): Promise<TableWriters> {
  const opened: DurableWriter[] = [];
  const open = async (o: WriterOptions) => {
    const writer = await DurableWriter.open(o);
    opened.push(writer);
    return writer;
  };
  let events: DurableWriter;
  let identifies: DurableWriter;
  let replays: DurableWriter;
  try {
    events = await open({ ...opts, table: 'events' });
    identifies = await open({ ...opts, dir: join(opts.dir, 'identifies'), table: 'identifies' });
    replays = await open({
      ...opts,
      dir: join(opts.dir, 'session_replay'),
      table: 'session_replay',
      maxBatchRows: Math.min(opts.maxBatchRows, MAX_REPLAY_BATCH_ROWS),
    });
  } catch (err) {
    // A writer that opened keeps a timer and a flusher: stop them, or the process never exits.
    await Promise.all(opened.map((w) => w.close(0).catch(() => {})));
    throw err;
  }
  const all = [events, identifies, replays];
  return {
    events,
    identifies,
    replays,
    async drain(timeoutMs) {
      await Promise.all(all.map((w) => w.drain(timeoutMs)));
    },
    async close(drainTimeoutMs) {
      const left = await Promise.all(all.map((w) => w.close(drainTimeoutMs)));
      return left.reduce((sum, l) => ({
        segments: sum.segments + l.segments,
        rows: sum.rows + l.rows,
        bytes: sum.bytes + l.bytes,
      }));
    },
  };
}
