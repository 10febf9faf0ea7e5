import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClickHouseLockedError, embeddedClickHousePath } from '@trackhouse/clickhouse';
import { loadConfig } from '@trackhouse/core';
import { afterAll, describe, expect, it } from 'vitest';
import { type SpawnedEntry, spawnEntry, tempDir } from '../../../test/helpers';
import { describeError, openClickHouse } from '../src';

const HOLDER = 'packages/runtime/test/fixtures/hold-clickhouse.ts';

describe('start-up waits for what a previous process still holds', () => {
  const children: SpawnedEntry[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null) c.child.kill('SIGKILL');
    for (const c of cleanups.reverse()) await c();
  });

  it('names the process holding the embedded ClickHouse, waits for it, and opens once it lets go', async () => {
    const dir = await tempDir('ch-held');
    cleanups.push(dir.remove);
    const holder = spawnEntry(HOLDER, { DATA_DIR: dir.path });
    children.push(holder);
    await holder.waitFor(/holding \d+/);
    const pid = holder.child.pid;
    const path = embeddedClickHousePath(dir.path);
    const config = loadConfig({ DATA_DIR: dir.path });

    // Without a wait (the CLI): at once, naming the holder.
    const locked = await openClickHouse(config).catch((err: unknown) => err);
    expect(locked).toBeInstanceOf(ClickHouseLockedError);
    expect((locked as ClickHouseLockedError).holder).toBe(pid);
    expect((locked as Error).message).toContain(`(pid ${pid})`);

    // A bounded wait that runs out says who held it.
    const told: string[] = [];
    const gaveUp = await openClickHouse(config, { waitMs: 300, onWait: (m) => told.push(m) }).catch(
      (err: unknown) => err,
    );
    expect((gaveUp as Error).message).toBe(
      `gave up after 0.3 s: ${path} is still held by process ${pid} (only one process may open it); stop that process, then start again`,
    );
    expect(told).toEqual([`waiting for the previous trackhouse process (pid ${pid}) to release ${path}…`]);

    // The holder lets go while we wait: the engine opens, migrated.
    const ch = await openClickHouse(config, {
      waitMs: 30_000,
      onWait: () => holder.child.kill('SIGTERM'),
    });
    try {
      expect(await holder.exited).toBe(0);
      const tables = await ch.query<{ name: string }>(
        `SELECT name FROM system.tables WHERE database = currentDatabase() AND name = 'events'`,
      );
      expect(tables).toEqual([{ name: 'events' }]);
    } finally {
      await ch.close();
    }
  }, 60_000);

  it('retries a lock whose holder has just exited (its pid gone, its lock not yet freed)', async () => {
    const dir = await tempDir('ch-unseen');
    cleanups.push(dir.remove);
    const holder = spawnEntry(HOLDER, { DATA_DIR: dir.path });
    children.push(holder);
    await holder.waitFor(/holding \d+/);
    // The window the race opens: the engine finds the lock taken, but the pid in its status file
    // no longer runs. Rewriting the file in place keeps the holder's lock on it.
    const status = join(embeddedClickHousePath(dir.path), 'status');
    writeFileSync(status, readFileSync(status, 'utf8').replace(/^PID: \d+/m, 'PID: 999999999'));
    const config = loadConfig({ DATA_DIR: dir.path });

    const unseen = await openClickHouse(config).catch((err: unknown) => err);
    expect(unseen).toBeInstanceOf(ClickHouseLockedError);
    expect((unseen as ClickHouseLockedError).holder).toBeUndefined();

    const opening = openClickHouse(config, { waitMs: 30_000 });
    await new Promise((r) => setTimeout(r, 300));
    holder.child.kill('SIGTERM');
    const ch = await opening;
    try {
      expect(await holder.exited).toBe(0);
      expect(await ch.query<{ one: number }>('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    } finally {
      await ch.close();
    }
  }, 60_000);

  it('ends a wait at once when a stop is asked for', async () => {
    const dir = await tempDir('ch-abort');
    cleanups.push(dir.remove);
    const holder = spawnEntry(HOLDER, { DATA_DIR: dir.path });
    children.push(holder);
    await holder.waitFor(/holding \d+/);
    const stop = new AbortController();
    const opening = openClickHouse(loadConfig({ DATA_DIR: dir.path }), {
      waitMs: 30_000,
      signal: stop.signal,
      onWait: () => stop.abort(),
    });
    await expect(opening).rejects.toMatchObject({ name: 'AbortError' });
    holder.child.kill('SIGTERM');
    expect(await holder.exited).toBe(0);
  }, 60_000);
});

describe('describeError', () => {
  it('never gives an empty reason', () => {
    expect(describeError(undefined)).toBe('no reason given (an empty error)');
    expect(describeError(new Error(''))).toBe('Error');
    expect(describeError(new Error('outer', { cause: new Error('inner') }))).toBe('outer: inner');
    expect(
      describeError(
        new AggregateError([new Error('connect ECONNREFUSED ::1:5432'), new Error('timeout')], ''),
      ),
    ).toBe('connect ECONNREFUSED ::1:5432; timeout');
    expect(describeError('plain text')).toBe('plain text');
  });
});
