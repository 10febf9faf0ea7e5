import { randomBytes } from 'node:crypto';
import { unlink } from 'node:fs/promises';
import type { ClickHouse } from '@trackhouse/clickhouse';
import { type InsertTarget, insertBytes, type Lines, lineAt, lineCount } from './insert';

/**
 * How the rows of a table are found again: the column that names a row, and the tables that
 * materialized views fill from it with plain (non-aggregating) rows, which must not get a row
 * twice. Every other view target of these tables aggregates with min, max or a set union, or
 * replaces by key, so a row stored again there changes nothing.
 */
interface TableIdentity {
  id: string;
  plainViewTargets: readonly string[];
}

const IDENTITIES: Readonly<Record<string, TableIdentity>> = {
  events: { id: 'event_id', plainViewTargets: ['events_by_name'] },
  identifies: { id: 'event_id', plainViewTargets: [] },
  session_replay: { id: 'batch_id', plainViewTargets: [] },
};

/** Lines of at most this many rows per lookup: bound parameters stay well under a megabyte. */
const LOOKUP_ROWS = 10_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const TIMESTAMP = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,9})?$/;

interface Row {
  index: number;
  site: number;
  id: string;
  timestamp: string;
}

/**
 * The lines of a segment whose rows are not in its table although an insert of the segment
 * under its token has just succeeded.
 *
 * ClickHouse's non-replicated MergeTree writes an insert's token to its deduplication log
 * before it makes the part visible. A process killed between the two leaves a token whose
 * rows are gone: the part was still temporary and is removed at the next start, and the next
 * insert under that token is dropped as a duplicate. Only a segment that an earlier attempt may
 * have sent (one left by an earlier process, or retried after a failure) can meet this.
 * Replicated tables record the token and the part in one Keeper transaction: a cluster has
 * no such window, and is not checked.
 */
async function missingRows(ch: ClickHouse, table: string, lines: Lines): Promise<Row[]> {
  const identity = IDENTITIES[table];
  if (!identity) return [];
  const rows: Row[] = [];
  for (let i = 0; i < lineCount(lines); i++) {
    const row = parseRow(lineAt(lines, i), i, identity.id);
    if (row) rows.push(row);
  }
  const missing: Row[] = [];
  for (let from = 0; from < rows.length; from += LOOKUP_ROWS) {
    const chunk = rows.slice(from, from + LOOKUP_ROWS);
    const present = new Set(await presentIds(ch, table, identity.id, chunk));
    for (const row of chunk) if (!present.has(row.id)) missing.push(row);
  }
  return missing;
}

/** A line's site, id and time; undefined for a line ClickHouse would refuse anyway. */
function parseRow(line: Buffer, index: number, idColumn: string): Row | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line.toString('utf8'));
  } catch {
    return undefined;
  }
  const row = value as Record<string, unknown> | null;
  const site = row?.site_id;
  const id = row?.[idColumn];
  const timestamp = row?.timestamp;
  if (typeof site !== 'number' || !Number.isInteger(site) || site < 0 || site > 0xffffffff) return undefined;
  if (typeof id !== 'string' || !UUID.test(id)) return undefined;
  if (typeof timestamp !== 'string' || !TIMESTAMP.test(timestamp)) return undefined;
  return { index, site, id: id.toLowerCase(), timestamp };
}

async function presentIds(ch: ClickHouse, table: string, idColumn: string, rows: Row[]): Promise<string[]> {
  const sites = [...new Set(rows.map((r) => r.site))];
  const times = rows.map((r) => r.timestamp).sort();
  const found = await ch.query<{ id: string }>(
    `SELECT DISTINCT toString(${idColumn}) AS id FROM ${table}
     WHERE site_id IN {sites:Array(UInt32)}
       AND timestamp BETWEEN {from:DateTime64(3, 'UTC')} AND {to:DateTime64(3, 'UTC')}
       AND ${idColumn} IN {ids:Array(UUID)}`,
    { sites, from: times[0], to: times.at(-1), ids: rows.map((r) => r.id) },
  );
  return found.map((r) => r.id.toLowerCase());
}

/**
 * Stores again the rows of a just-inserted segment that its table does not hold (see
 * `missingRows`), under a token of their own. The plain tables views fill from it lose those
 * rows first (the insert under the old token may have reached them), so each ends up with one
 * copy. Resolves with the number of rows stored again.
 */
export async function restoreMissing(
  target: InsertTarget,
  lines: Lines,
  segmentName: string,
): Promise<number> {
  const { ch, table } = target;
  if (ch.cluster) return 0;
  const missing = await missingRows(ch, table, lines);
  if (missing.length === 0) return 0;
  const identity = IDENTITIES[table]!;
  const sites = [...new Set(missing.map((r) => r.site))];
  for (let from = 0; from < missing.length; from += LOOKUP_ROWS) {
    const ids = missing.slice(from, from + LOOKUP_ROWS).map((r) => r.id);
    for (const view of identity.plainViewTargets) {
      await ch.command(
        `DELETE FROM ${view} WHERE site_id IN {sites:Array(UInt32)} AND ${identity.id} IN {ids:Array(UUID)}`,
        { sites, ids },
      );
    }
  }
  // A token never used before: the rows were checked to be missing just now, so this insert
  // cannot store one twice, and a failed attempt of it is checked the same way next time.
  const token = `${segmentName}:restore-${randomBytes(6).toString('hex')}`;
  try {
    await insertBytes(target, Buffer.concat(missing.map((r) => lineAt(lines, r.index))), token);
  } finally {
    await unlink(target.scratchPath).catch(() => {});
  }
  return missing.length;
}
