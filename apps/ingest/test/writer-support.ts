import { randomUUID } from 'node:crypto';
import type { ClickHouse } from '@trackhouse/clickhouse';
import pino, { type Logger } from 'pino';
import { Registry } from 'prom-client';
import { DurableWriter, type WriterOptions } from '../src/writer/writer';

/** One events row as the buffer holds it (JSONEachRow, newline-terminated). */
export function eventLine(siteId: number, eventId: string, extra: Record<string, unknown> = {}): string {
  return `${JSON.stringify({
    site_id: siteId,
    timestamp: '2026-03-01 12:00:00.000',
    event_id: eventId,
    type: 'pageview',
    session_id: eventId,
    ...extra,
  })}\n`;
}

/** `n` good rows with fresh ids; every third one a custom event (the view-filled table gets rows too). */
export function goodLines(siteId: number, n: number): { ids: string[]; text: string } {
  const ids = Array.from({ length: n }, () => randomUUID());
  const text = ids
    .map((id, i) => eventLine(siteId, id, i % 3 === 0 ? { type: 'custom_event', event_name: 'tick' } : {}))
    .join('');
  return { ids, text };
}

export function randomSiteId(): number {
  return 1_000_000 + Math.floor(Math.random() * 1_000_000_000);
}

/** A logger that keeps its lines for assertions, with a way to await a given message. */
export function capturingLogger(): {
  log: Logger;
  lines: Record<string, unknown>[];
  waitFor(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
} {
  const lines: Record<string, unknown>[] = [];
  const waiters: {
    match: (l: Record<string, unknown>) => boolean;
    resolve: (l: Record<string, unknown>) => void;
  }[] = [];
  const log = pino(
    { level: 'debug' },
    {
      write(text: string) {
        const line = JSON.parse(text) as Record<string, unknown>;
        lines.push(line);
        for (const w of [...waiters]) {
          if (w.match(line)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(line);
          }
        }
      },
    },
  );
  return {
    log,
    lines,
    waitFor(match) {
      const found = lines.find(match);
      if (found) return Promise.resolve(found);
      return new Promise((resolve) => waiters.push({ match, resolve }));
    },
  };
}

export function openWriter(
  ch: ClickHouse,
  opts: Partial<WriterOptions> & Pick<WriterOptions, 'dir' | 'deadLetterDir'>,
): Promise<DurableWriter> {
  return DurableWriter.open({
    ch,
    log: pino({ level: 'silent' }),
    registry: new Registry(),
    maxBytes: 64 * 1024 * 1024,
    flushIntervalMs: 50,
    maxBatchRows: 1000,
    ...opts,
  });
}

/** How many times each event id of a site is stored in `table`. */
export async function storedIds(
  ch: ClickHouse,
  siteId: number,
  table = 'events',
): Promise<Map<string, number>> {
  const rows = await ch.query<{ id: string; n: number }>(
    `SELECT toString(event_id) AS id, count() AS n FROM ${table} WHERE site_id = {s:UInt32} GROUP BY id`,
    { s: siteId },
  );
  return new Map(rows.map((r) => [r.id, r.n]));
}

/** Every id once and nothing else. */
export function exactlyOnce(ids: string[]): Map<string, number> {
  return new Map(ids.map((id) => [id, 1]));
}
