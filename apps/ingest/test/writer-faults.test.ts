import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ClickHouse } from '@trackhouse/clickhouse';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestClickHouse, TEST_CLICKHOUSE, tempDir } from '../../../test/helpers';
import { CONTENT_ERROR_CODES, isContentError } from '../src/writer/classify';
import { insertFile, splitLines } from '../src/writer/insert';
import { restoreMissing } from '../src/writer/restore';
import { OverloadedError } from '../src/writer/writer';
import {
  capturingLogger,
  eventLine,
  exactlyOnce,
  goodLines,
  openWriter,
  randomSiteId,
  storedIds,
} from './writer-support';

/** The write-ahead buffer against the real embedded engine, one engine for the whole file. */
describe('write-ahead buffer under faults', () => {
  let ch: ClickHouse;
  const cleanups: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    const engine = await createTestClickHouse();
    ch = engine.ch;
    cleanups.push(engine.close);
  });
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  async function buffer(): Promise<{ dir: string; deadLetterDir: string }> {
    const base = await tempDir('wal');
    cleanups.push(base.remove);
    const dir = join(base.path, 'slot-0');
    await mkdir(dir);
    return { dir, deadLetterDir: join(base.path, 'dead-letter') };
  }

  it('stores the good lines of a segment ClickHouse rejects once, dead-letters the bad ones, lets later segments through, and a restart mid-way stores nothing twice', async () => {
    const { dir, deadLetterDir } = await buffer();
    const site = randomSiteId();
    const before = goodLines(site, 7);
    const after = goodLines(site, 9);
    const bad = [
      // ClickHouse refuses the whole insert: "missing second part of surrogate pair".
      eventLine(site, randomUUID(), { page_title: '\ud800 secret-title' }),
      'garbage secret-garbage\n',
      '\0\0\0\0\0\0\n',
    ];
    // Lines 1-7 good, 8 bad, 9-17 good, 18 and 19 bad.
    const segmentA = `${before.text}${bad[0]}${after.text}${bad[1]}${bad[2]}`;
    const later = goodLines(site, 5);
    const nameA = '000000000001-test0001.ndjson';
    await writeFile(join(dir, nameA), segmentA);
    await writeFile(join(dir, '000000000002-test0001.ndjson'), later.text);

    const registry = new Registry();
    const logs = capturingLogger();
    const writer = await openWriter(ch, { dir, deadLetterDir, registry, log: logs.log });
    await writer.drain(20_000);

    const good = [...before.ids, ...after.ids, ...later.ids];
    expect(await storedIds(ch, site)).toEqual(exactlyOnce(good));
    const custom = [before, after, later].flatMap((g) => g.ids.filter((_, i) => i % 3 === 0));
    expect(await storedIds(ch, site, 'events_by_name')).toEqual(exactlyOnce(custom));

    // The dead letter: the bad lines as they were, and their errors beside them.
    expect((await readdir(deadLetterDir)).sort()).toEqual(['000000000001-test0001.error.json', nameA]);
    expect(await readFile(join(deadLetterDir, nameA), 'utf8')).toBe(bad.join(''));
    const sidecar = JSON.parse(
      await readFile(join(deadLetterDir, '000000000001-test0001.error.json'), 'utf8'),
    );
    expect(sidecar).toMatchObject({ segment: nameA, rows: 3 });
    expect(sidecar.errors.map((e: { line: number; segmentLine: number }) => [e.line, e.segmentLine])).toEqual(
      [
        [1, 8],
        [2, 18],
        [3, 19],
      ],
    );
    expect(sidecar.errors[0].type).toBe('CANNOT_PARSE_ESCAPE_SEQUENCE');
    expect((await stat(deadLetterDir)).mode & 0o777).toBe(0o700);
    expect((await stat(join(deadLetterDir, nameA))).mode & 0o777).toBe(0o600);
    expect(await readdir(dir)).not.toContain(nameA);

    const metrics = await registry.metrics();
    expect(metrics).toMatch(/trackhouse_ingest_dead_letter_rows_total 3\b/);
    const warned = logs.lines.filter((l) => l.msg === 'rows dead-lettered');
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({
      level: 40,
      segment: nameA,
      rows: 3,
      stored: good.length - later.ids.length,
    });
    expect(JSON.stringify(logs.lines)).not.toMatch(/secret-/);
    await writer.close();

    // A crash after the good lines were stored but before the segment was removed: the same
    // file comes back at the next start. Same line ranges, same tokens: nothing is stored twice.
    await writeFile(join(dir, nameA), segmentA);
    const more = goodLines(site, 4);
    await writeFile(join(dir, '000000000003-test0001.ndjson'), more.text);
    const again = await openWriter(ch, { dir, deadLetterDir });
    await again.drain(20_000);
    expect(await storedIds(ch, site)).toEqual(exactlyOnce([...good, ...more.ids]));
    expect(await storedIds(ch, site, 'events_by_name')).toEqual(
      exactlyOnce([...custom, ...more.ids.filter((_, i) => i % 3 === 0)]),
    );
    expect(await readFile(join(deadLetterDir, nameA), 'utf8')).toBe(bad.join(''));
    await again.close();
  }, 60_000);

  it('replays segments left by a power loss (torn last line, garbage and NUL lines, empty file, cut UTF-8) without blocking the queue', async () => {
    const { dir, deadLetterDir } = await buffer();
    const site = randomSiteId();
    const a = goodLines(site, 4);
    const b1 = goodLines(site, 3);
    const b2 = goodLines(site, 2);
    const c = goodLines(site, 3);
    const d = goodLines(site, 2);
    const torn = eventLine(site, randomUUID());
    const cutUtf8 = Buffer.from(eventLine(site, randomUUID(), { page_title: 'café' }));
    await writeFile(join(dir, '000000000001-power.ndjson'), a.text + torn.slice(0, 30));
    await writeFile(join(dir, '000000000002-power.ndjson'), '');
    await writeFile(join(dir, '000000000003-power.ndjson'), `${b1.text}\0\0\0\0\0\0\0\0\n${b2.text}\0\0\0\0`);
    await writeFile(
      join(dir, '000000000004-power.ndjson'),
      Buffer.concat([Buffer.from(c.text), cutUtf8.subarray(0, cutUtf8.indexOf('é') + 1)]),
    );
    await writeFile(join(dir, '000000000005-power.ndjson'), d.text);

    const writer = await openWriter(ch, { dir, deadLetterDir });
    await writer.drain(20_000);
    expect(await storedIds(ch, site)).toEqual(
      exactlyOnce([...a.ids, ...b1.ids, ...b2.ids, ...c.ids, ...d.ids]),
    );
    // Only the NUL line was data ClickHouse refused; torn tails were never acknowledged.
    expect(await readdir(deadLetterDir)).toEqual(
      expect.arrayContaining(['000000000003-power.ndjson', '000000000003-power.error.json']),
    );
    expect(await readdir(deadLetterDir)).toHaveLength(2);
    expect(await readFile(join(deadLetterDir, '000000000003-power.ndjson'), 'utf8')).toBe(
      '\0\0\0\0\0\0\0\0\n',
    );
    expect((await readdir(dir)).filter((n) => n.endsWith('.ndjson'))).toEqual([]);
    await writer.close();
  }, 60_000);

  // ClickHouse (non-replicated) logs an insert's token before it makes the part visible: a
  // process killed between the two leaves the token without the rows. Here the rows are
  // deleted after a whole insert, which leaves the same state: the token logged, the rows gone.
  it.skipIf(TEST_CLICKHOUSE === 'cluster')(
    'stores again, once, the rows of a segment left by an earlier process whose token ClickHouse logged without keeping its rows',
    async () => {
      const { dir, deadLetterDir } = await buffer();
      const site = randomSiteId();
      // A: the view-filled table kept its rows (the replay under the old token reaches it
      // too); B: it lost them as well.
      const a = goodLines(site, 12);
      const b = goodLines(site, 9);
      const nameA = '000000000001-lost0001.ndjson';
      const nameB = '000000000002-lost0001.ndjson';
      for (const [name, lines] of [
        [nameA, a],
        [nameB, b],
      ] as const) {
        await writeFile(join(dir, name), lines.text);
        await insertFile({ ch, table: 'events', scratchPath: join(dir, 'x.part') }, join(dir, name), name);
      }
      const custom = (g: { ids: string[] }) => g.ids.filter((_, i) => i % 3 === 0);
      expect(await storedIds(ch, site, 'events_by_name')).toEqual(exactlyOnce([...custom(a), ...custom(b)]));
      await ch.command('DELETE FROM events WHERE site_id = {s:UInt32}', { s: site });
      await ch.command(
        'DELETE FROM events_by_name WHERE site_id = {s:UInt32} AND event_id IN {ids:Array(UUID)}',
        {
          s: site,
          ids: b.ids,
        },
      );
      // The old token alone stores nothing: the engine takes the insert for a replay.
      await insertFile({ ch, table: 'events', scratchPath: join(dir, 'x.part') }, join(dir, nameA), nameA);
      expect(await storedIds(ch, site)).toEqual(new Map());

      const registry = new Registry();
      const logs = capturingLogger();
      const writer = await openWriter(ch, { dir, deadLetterDir, registry, log: logs.log });
      await writer.drain(20_000);
      expect(await storedIds(ch, site)).toEqual(exactlyOnce([...a.ids, ...b.ids]));
      expect(await storedIds(ch, site, 'events_by_name')).toEqual(exactlyOnce([...custom(a), ...custom(b)]));
      const sessions = await ch.query<{ n: number }>(
        'SELECT count() AS n FROM sessions FINAL WHERE site_id = {s:UInt32}',
        { s: site },
      );
      expect(sessions[0]?.n).toBe(a.ids.length + b.ids.length);
      expect(await registry.metrics()).toMatch(/trackhouse_ingest_rows_restored_total 21\b/);
      const warned = logs.lines.filter((l) => String(l.msg).startsWith('rows of a resent segment'));
      expect(warned.map((l) => [l.segment, l.rows])).toEqual([
        [nameA, 12],
        [nameB, 9],
      ]);
      expect(await readdir(dir)).toEqual([]);

      // Once stored, a copy of the segment coming back (a crash before its file was removed)
      // restores nothing and stores nothing twice.
      await writeFile(join(dir, nameA), a.text);
      const again = await openWriter(ch, { dir, deadLetterDir, registry: new Registry() });
      await again.drain(20_000);
      expect(await storedIds(ch, site)).toEqual(exactlyOnce([...a.ids, ...b.ids]));
      expect(await storedIds(ch, site, 'events_by_name')).toEqual(exactlyOnce([...custom(a), ...custom(b)]));
      await Promise.all([writer.close(), again.close()]);
    },
    60_000,
  );

  it.skipIf(TEST_CLICKHOUSE === 'cluster')(
    'looks the rows of identifies and session_replay up by their own ids, and stores again only the missing',
    async () => {
      const base = await buffer();
      const site = randomSiteId();
      // Replays expire by their retention: one of today's lives 30 days.
      const at = new Date().toISOString().replace('T', ' ').replace('Z', '');
      const tables = {
        identifies: (id: string) => ({
          site_id: site,
          timestamp: at,
          event_id: id,
          identified_user_id: 'u1',
        }),
        session_replay: (id: string) => ({
          site_id: site,
          timestamp: at,
          batch_id: id,
          session_id: id,
          retention_days: 30,
        }),
      };
      for (const [table, row] of Object.entries(tables)) {
        const idColumn = table === 'identifies' ? 'event_id' : 'batch_id';
        const kept = randomUUID();
        const lost = randomUUID();
        const text = [kept, lost].map((id) => `${JSON.stringify(row(id))}\n`).join('');
        const target = { ch, table, scratchPath: join(base.dir, 'x.part') };
        await writeFile(join(base.dir, 'segment'), text);
        await insertFile(target, join(base.dir, 'segment'), `restore-${table}-${site}`);
        await ch.command(`DELETE FROM ${table} WHERE site_id = {s:UInt32} AND ${idColumn} = {id:UUID}`, {
          s: site,
          id: lost,
        });
        expect(await restoreMissing(target, splitLines(Buffer.from(text)), 'segment')).toBe(1);
        const ids = await ch.query<{ id: string }>(
          `SELECT toString(${idColumn}) AS id FROM ${table} WHERE site_id = {s:UInt32} ORDER BY id`,
          { s: site },
        );
        expect(ids.map((r) => r.id)).toEqual([kept, lost].sort());
        expect(await restoreMissing(target, splitLines(Buffer.from(text)), 'segment')).toBe(0);
      }
    },
    30_000,
  );

  it('dead-letters a segment of mostly refused lines in order, storing the few good ones once', async () => {
    const { dir, deadLetterDir } = await buffer();
    const site = randomSiteId();
    const good = goodLines(site, 4);
    const goodAt = new Map([
      [0, 0],
      [97, 1],
      [150, 2],
      [299, 3],
    ]);
    const bad = Array.from({ length: 300 }, (_, i) =>
      i % 2 ? eventLine(site, randomUUID(), { page_title: '\ud800' }) : `not json ${i}\n`,
    );
    const lines = bad.map((line, i) => {
      const g = goodAt.get(i);
      return g === undefined ? line : `${good.text.split('\n')[g]}\n`;
    });
    await writeFile(join(dir, '000000000001-mostly.ndjson'), lines.join(''));
    const writer = await openWriter(ch, { dir, deadLetterDir });
    await writer.drain(60_000);
    await writer.close();
    expect(await storedIds(ch, site)).toEqual(exactlyOnce(good.ids));
    const refused = lines.filter((_, i) => !goodAt.has(i));
    expect(await readFile(join(deadLetterDir, '000000000001-mostly.ndjson'), 'utf8')).toBe(refused.join(''));
  }, 90_000);

  it('logs a failing background seal (a handle whose close fails) instead of crashing, and loses nothing', async () => {
    const { dir, deadLetterDir } = await buffer();
    const site = randomSiteId();
    const logs = capturingLogger();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const writer = await openWriter(ch, { dir, deadLetterDir, log: logs.log, flushIntervalMs: 20 });
      const first = goodLines(site, 3);
      await writer.append(first.text, 3);
      // The segment just written is sealed by the periodic timer; make its close fail (as an
      // NFS or a failing disk may report a delayed write error at close).
      const active = (writer as unknown as { active: { handle: { close(): Promise<void> } } }).active;
      const close = active.handle.close.bind(active.handle);
      active.handle.close = async () => {
        await close();
        throw Object.assign(new Error('EIO: i/o error, close'), { code: 'EIO' });
      };
      const logged = await logs.waitFor((l) => String(l.msg).includes('seal'));
      expect(logged.level).toBeGreaterThanOrEqual(40);
      const second = goodLines(site, 2);
      await writer.append(second.text, 2);
      await writer.drain(20_000);
      expect(await storedIds(ch, site)).toEqual(exactlyOnce([...first.ids, ...second.ids]));
      await writer.close();
      // Rejections surface on the next turns of the event loop.
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  }, 30_000);

  it('answers OverloadedError while its directory cannot be written (its path turned into a file), refuses at once, then recovers', async () => {
    const { dir, deadLetterDir } = await buffer();
    const site = randomSiteId();
    const writer = await openWriter(ch, { dir, deadLetterDir, flushIntervalMs: 20 });
    const first = goodLines(site, 3);
    await writer.append(first.text, 3);
    await writer.drain(20_000);
    expect((await stat(dir)).mode & 0o777).toBe(0o700);

    await rm(dir, { recursive: true });
    await writeFile(dir, 'not a directory');
    const refused = goodLines(site, 2);
    const err = await writer.append(refused.text, 2).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OverloadedError);
    expect(writer.isFull()).toBe(true);

    await rm(dir);
    await mkdir(dir);
    const deadline = Date.now() + 10_000;
    while (writer.isFull() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(writer.isFull()).toBe(false);
    const last = goodLines(site, 4);
    await writer.append(last.text, 4);
    const segment = (await readdir(dir)).find((n) => n.endsWith('.ndjson'));
    expect((await stat(join(dir, segment!))).mode & 0o777).toBe(0o600);
    await writer.drain(20_000);
    expect(await storedIds(ch, site)).toEqual(exactlyOnce([...first.ids, ...last.ids]));
    await writer.close();
  }, 30_000);

  it('classifies as content errors only ClickHouse codes that name a problem of the data', async () => {
    const codes = [...CONTENT_ERROR_CODES.keys()];
    const names = await ch.query<{ code: number; name: string }>(
      'SELECT arrayJoin({codes:Array(UInt32)}) AS code, errorCodeToName(code) AS name',
      { codes },
    );
    expect(new Map(names.map((n) => [n.code, n.name]))).toEqual(CONTENT_ERROR_CODES);
    // Unavailability, load and configuration are retried, never dead-lettered.
    for (const transient of [60, 159, 209, 210, 241, 243, 252]) {
      expect(isContentError(Object.assign(new Error('x'), { code: String(transient) }))).toBe(false);
    }
    expect(isContentError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe(
      false,
    );
    expect(isContentError(new Error('Code: 27. DB::Exception: Cannot parse input'))).toBe(true);
  });

  it('reports on close what it could not send, left on disk for the next start', async () => {
    const { dir, deadLetterDir } = await buffer();
    const site = randomSiteId();
    // A table that does not exist fails every insert as ClickHouse being unavailable would.
    const writer = await openWriter(ch, {
      dir,
      deadLetterDir,
      table: 'events_unavailable',
      flushIntervalMs: 60_000,
    });
    await writer.append(goodLines(site, 3).text, 3);
    await writer.append(goodLines(site, 2).text, 2);
    const left = await writer.close(200);
    expect(left).toMatchObject({ rows: 5, segments: 1 });
    expect(left.bytes).toBeGreaterThan(0);
    const again = await openWriter(ch, { dir, deadLetterDir, table: 'events_unavailable' });
    expect(await again.close(100)).toMatchObject({ rows: 5, segments: 1, bytes: left.bytes });
  }, 30_000);
});
