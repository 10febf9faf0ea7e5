import type { ClickHouse } from '../../client';

/**
 * Reads of data that never changes under its key (what settled parts and stored builds hold,
 * keyed by the parts' names), kept in memory per engine: its writer, the same under every
 * wrapper of a client (the query service's bounded reads). Kept as the promise, so that reads at
 * once share one; a read is kept only when `keep` says so of its result (a failed one never).
 * Past `limit` keys, the least recently read is dropped first.
 */
export interface Memo<T> {
  read(ch: ClickHouse, key: string, read: () => Promise<T>, keep?: (result: T) => boolean): Promise<T>;
  /** Forgets what is kept for `ch`'s engine. */
  forget(ch: ClickHouse): void;
}

const memos: Memo<unknown>[] = [];

export function memo<T>(limit: number): Memo<T> {
  const byEngine = new WeakMap<ClickHouse['writer'], Map<string, Promise<T>>>();
  const m: Memo<T> = {
    read(ch, key, read, keep = () => true) {
      let kept = byEngine.get(ch.writer);
      if (!kept) {
        kept = new Map();
        byEngine.set(ch.writer, kept);
      }
      let result = kept.get(key);
      if (result) {
        // Most recently read last: the first key is the one to drop.
        kept.delete(key);
      } else {
        const held = kept;
        const reading = read();
        const drop = () => {
          if (held.get(key) === reading) held.delete(key);
        };
        reading.then((r) => keep(r) || drop(), drop);
        result = reading;
      }
      kept.set(key, result);
      for (const oldest of kept.keys()) {
        if (kept.size <= limit) break;
        kept.delete(oldest);
      }
      return result;
    },
    forget(ch) {
      byEngine.delete(ch.writer);
    },
  };
  memos.push(m as Memo<unknown>);
  return m;
}

/**
 * Values kept in `m` one per name (a settled part's, which never changes while the part lasts),
 * under `keyOf(name)`: those kept are taken as they are, the others read together in one
 * statement, sent once the names missing are known. `values` resolves in the order of `names`;
 * `missing` lists the names to read (known at once), and `supply` gives their read, from which
 * `pick` takes each name's value (call it only when some are missing). A value `keep` refuses is
 * not kept.
 */
export function keptEach<T, R>(
  m: Memo<T>,
  ch: ClickHouse,
  names: readonly string[],
  keyOf: (name: string) => string,
  pick: (read: R, name: string) => T,
  keep?: (value: T) => boolean,
): { values: Promise<T[]>; missing: string[]; supply: (read: Promise<R>) => void } {
  const missing: string[] = [];
  let supply!: (read: Promise<R>) => void;
  const read = new Promise<R>((resolve) => {
    supply = resolve;
  });
  const values = Promise.all(
    names.map((name) =>
      m.read(
        ch,
        keyOf(name),
        () => {
          missing.push(name);
          return read.then((r) => pick(r, name));
        },
        keep,
      ),
    ),
  );
  return { values, missing, supply };
}

/**
 * Forgets every read kept for `ch`'s engine: for a process that changed what they were read
 * from other than through the service (tests that tamper with stored summaries or builds to
 * show they are read).
 */
export function forgetKeptReads(ch: ClickHouse): void {
  for (const m of memos) m.forget(ch);
}
