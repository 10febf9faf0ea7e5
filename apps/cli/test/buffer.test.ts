import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createClickHouse, embeddedClickHousePath } from '@trackhouse/clickhouse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runEntry, tempDir } from '../../../test/helpers';
import { writeDeadLetter } from '../../ingest/src/writer/dead-letter';

let dataDir: Awaited<ReturnType<typeof tempDir>>;
const cli = (...args: string[]) => runEntry('apps/cli/src/main.ts', args, { DATA_DIR: dataDir.path });
const json = async (...args: string[]) => {
  const r = await cli(...args, '--json');
  const lines = r.stdout.trim().split('\n');
  expect(lines).toHaveLength(1); // exactly one JSON object on stdout
  return { code: r.code, body: JSON.parse(lines[0]!) as Record<string, unknown> };
};

const site = 4242;
const line = (id: string, title: string) =>
  `${JSON.stringify({ site_id: site, timestamp: '2026-03-01 12:00:00.000', event_id: id, page_title: title })}\n`;

beforeAll(async () => {
  dataDir = await tempDir('cli-buffer');
});
afterAll(async () => {
  await dataDir.remove();
});

describe('trackhouse buffer', () => {
  it('lists, shows, retries (storing each row once, however often) and drops dead letters', async () => {
    const dir = join(dataDir.path, 'ingest-buffer', 'dead-letter');
    const file = '000000000007-abcd1234.ndjson';
    const [fixedId, laterId] = [randomUUID(), randomUUID()];
    await writeDeadLetter(
      dir,
      file,
      [
        Buffer.from(line(fixedId, '\ud800')),
        Buffer.from(line(laterId, 'taken now')),
        Buffer.from('garbage\n'),
      ],
      {
        version: 1,
        segment: file,
        createdAt: '2026-03-01T12:00:01.000Z',
        rows: 3,
        errors: [1, 2, 3].map((n) => ({
          line: n,
          segmentLine: n + 10,
          code: 25,
          type: 'CANNOT_PARSE_ESCAPE_SEQUENCE',
          message: 'Cannot parse escape sequence: missing second part of surrogate pair',
        })),
      },
    );

    const list = await json('buffer', 'list');
    expect(list).toEqual({
      code: 0,
      body: {
        data: [
          {
            file,
            rows: 3,
            error:
              'CANNOT_PARSE_ESCAPE_SEQUENCE: Cannot parse escape sequence: missing second part of surrogate pair',
            createdAt: '2026-03-01T12:00:01.000Z',
          },
        ],
      },
    });
    const shown = await json('buffer', 'show', file);
    expect(shown.code).toBe(0);
    expect(shown.body).toMatchObject({ file, rows: 3, createdAt: '2026-03-01T12:00:01.000Z' });
    expect((shown.body.lines as { line: number; text: string }[]).map((l) => [l.line, l.text])).toEqual([
      [1, line(fixedId, '\ud800').trim()],
      [2, line(laterId, 'taken now').trim()],
      [3, 'garbage'],
    ]);

    // The operator fixes the first line by hand; the second went in after an upgrade, say.
    const path = join(dir, file);
    await writeFile(path, `${line(fixedId, 'fixed')}${line(laterId, 'taken now')}garbage\n`);
    const fixed = await readFile(path);
    expect(await json('buffer', 'retry', file)).toEqual({ code: 0, body: { file, stored: 2, remaining: 1 } });
    expect(await readFile(path, 'utf8')).toBe('garbage\n');
    // A crash before the dead letter was rewritten: the same lines are retried again.
    await writeFile(path, fixed);
    expect(await json('buffer', 'retry', file)).toEqual({ code: 0, body: { file, stored: 2, remaining: 1 } });
    const again = await json('buffer', 'list');
    expect(again.body.data).toEqual([
      expect.objectContaining({
        file,
        rows: 1,
        error: expect.stringMatching(/^CANNOT_PARSE_INPUT_ASSERTION_FAILED/),
      }),
    ]);

    // Held by a running server (here: this process) the engine cannot be opened: said clearly.
    const ch = createClickHouse({
      kind: 'embedded',
      dataDir: embeddedClickHousePath(dataDir.path),
      queryPoolSize: 1,
    });
    try {
      const stored = await ch.query<{ id: string; title: string; n: number }>(
        'SELECT toString(event_id) AS id, any(page_title) AS title, count() AS n FROM events WHERE site_id = {s:UInt32} GROUP BY id ORDER BY title',
        { s: site },
      );
      expect(stored).toEqual([
        { id: fixedId, title: 'fixed', n: 1 },
        { id: laterId, title: 'taken now', n: 1 },
      ]);
      const locked = await json('buffer', 'retry', file);
      expect(locked.code).toBe(2);
      expect(locked.body.error).toMatch(/running server holds the embedded ClickHouse data: stop it/);
      // Dead letters are files: dropping one works while the server runs.
      expect(await json('buffer', 'drop', file)).toEqual({ code: 0, body: { file, dropped: true } });
      expect((await json('buffer', 'list')).body).toEqual({ data: [] });
    } finally {
      await ch.close();
    }
  }, 120_000);

  it('refuses names that are not dead letters, and unknown actions', async () => {
    const outside = await json('buffer', 'show', '../../secret');
    expect(outside).toEqual({
      code: 2,
      body: { success: false, error: 'not a dead-letter file name: ../../secret' },
    });
    const missing = await json('buffer', 'drop', '000000000001-none');
    expect(missing).toEqual({
      code: 2,
      body: { success: false, error: 'no dead letter 000000000001-none.ndjson' },
    });
    const human = await cli('buffer', 'frobnicate');
    expect(human.code).toBe(2);
    expect(human.stderr).toContain('usage: buffer list');
  }, 60_000);
});
