import type { ClickHouse } from '../../client';
import { type CommonParams, Params, rangeCondition, whereClause } from '../builder';

export const EXPORT_FORMATS = ['ndjson', 'csv'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** The Event fields of SPEC 10, in order: text columns, or a formatted form of another type. */
const FIELDS: [name: string, text: boolean][] = [
  ['timestamp', false],
  ['type', true],
  ['event_name', true],
  ['properties', true],
  ['session_id', false],
  ['user_id', true],
  ['identified_user_id', true],
  ['pathname', true],
  ['querystring', true],
  ['hostname', true],
  ['page_title', true],
  ['referrer', true],
  ['browser', true],
  ['browser_version', true],
  ['operating_system', true],
  ['operating_system_version', true],
  ['language', true],
  ['country', true],
  ['region', true],
  ['city', true],
  ['lat', false],
  ['lon', false],
  ['screen_width', false],
  ['screen_height', false],
  ['device_type', true],
  ['channel', true],
  ['event_id', false],
];

/**
 * Text a spreadsheet would run as a formula (it begins with `=`, `+`, `-`, `@`, a tab or a
 * carriage return) gets a leading apostrophe in CSV, so opening an export never executes
 * visitor-controlled text. NDJSON keeps every value as stored.
 */
const FORMULA_START = '^[=+\\-@\\t\\r]';

/** CSV columns: text through the formula guard, the other fields in their text form. */
function csvColumns(p: Params): string {
  const formula = p.bind('String', FORMULA_START);
  return FIELDS.map(([name, text]) => {
    if (name === 'timestamp') return `concat(replaceOne(toString(timestamp), ' ', 'T'), 'Z') AS timestamp`;
    if (name === 'session_id' || name === 'event_id') return `toString(${name}) AS ${name}`;
    return text
      ? `if(match(${name}, ${formula}), concat('''', ${name}), toString(${name})) AS ${name}`
      : name;
  }).join(', ');
}

/**
 * One NDJSON line per event, assembled by column functions (each text escaped by toJSONString)
 * and written raw: about twice as fast as the engine's JSON row format, which writes every key
 * and value one row at a time.
 */
function ndjsonLine(): string {
  const parts = FIELDS.map(([name, text], i) => {
    const key = `${i === 0 ? '{' : ','}"${name}":`;
    const value =
      name === 'timestamp'
        ? `'"', replaceOne(toString(timestamp), ' ', 'T'), 'Z"'`
        : name === 'session_id' || name === 'event_id'
          ? `'"', toString(${name}), '"'`
          : text
            ? `toJSONString(${name})`
            : // Coordinates and screen sizes are finite numbers; a non-finite one would not be JSON.
              `if(isFinite(${name}), toString(${name}), '0')`;
    return `'${key}', ${value}`;
  });
  return `concat(${parts.join(', ')}, '}') AS line`;
}

/** A UTC day in milliseconds: what one statement of an export reads (exportEvents). */
const DAY_MS = 86_400_000;

/**
 * SPEC 13 `export`: every event in range that matches the filters (errors included), oldest
 * first (ties in the table's order of event ids), as the chunks the engine produces. The range
 * is read in sort-key order, so rows stream out without a sort, and a UTC day at a time, one
 * statement for each day with events, so memory stays flat: a read in order merges every part
 * it reads at once, holding blocks of each, and a day's events lie in a few parts where a
 * month's lie in every part of the month (at 10 M bench events over 11 parts, 80-120 MB of
 * growth read whole against 20-50 MB by day, docs/benchmarks.md). An event stored meanwhile is
 * exported when its day is read after it. A filter on the entry or exit page is a subquery over
 * the whole range, which every day would run again: such an export is one statement.
 */
export async function* exportEvents(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  format: ExportFormat,
): AsyncIterable<Uint8Array> {
  const whole = common.filters.some((f) => f.parameter === 'entry_page' || f.parameter === 'exit_page');
  const days = whole ? [undefined] : await eventDays(ch, siteId, common);
  // The engine's `CSVWithNames` would repeat its header in every chunk (each block is written as
  // a result of its own): the header is written here, once, after the first chunk (a statement
  // that fails at once still fails before any byte), or alone for an empty result.
  let header = format === 'csv';
  for (const day of days) {
    for await (const chunk of exportStatement(ch, siteId, common, format, day)) {
      if (header) yield CSV_HEADER;
      header = false;
      yield chunk;
    }
  }
  if (header) yield CSV_HEADER;
}

/**
 * The UTC days (days since 1970-01-01) the range's events fall on, in order: from their
 * milliseconds, which the `Date` type's range (to 2149) does not bound.
 */
async function eventDays(ch: ClickHouse, siteId: number, common: CommonParams): Promise<number[]> {
  const p = new Params();
  const rows = await ch.query<{ d: number }>(
    `SELECT intDiv(toUnixTimestamp64Milli(timestamp), ${p.bind('Int64', DAY_MS)}) AS d
     FROM events WHERE ${rangeCondition(p, siteId, common)}
     GROUP BY d ORDER BY d`,
    p.values,
  );
  return rows.map((r) => Number(r.d));
}

/**
 * One statement of an export: the range's matching events (of one UTC day, when given) in
 * order, NDJSON lines or CSV rows without a header.
 */
function exportStatement(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  format: ExportFormat,
  day?: number,
): AsyncIterable<Uint8Array> {
  const p = new Params();
  const select = format === 'csv' ? csvColumns(p) : ndjsonLine();
  const within =
    day === undefined
      ? []
      : [
          `timestamp >= fromUnixTimestamp64Milli(${p.bind('Int64', day * DAY_MS)}, 'UTC')`,
          `timestamp < fromUnixTimestamp64Milli(${p.bind('Int64', (day + 1) * DAY_MS)}, 'UTC')`,
        ];
  // Output names equal column names; the setting keeps WHERE and ORDER BY on the columns.
  // Read in order by one thread, without buffering ahead of the merge of the parts: about half
  // the memory of the default (which buffers blocks of every part on every thread), and no
  // slower, since the merge of the parts in order runs on one thread anyway.
  const sql = `SELECT ${select} FROM events
    WHERE ${whereClause(p, siteId, common, within)}
    ORDER BY timestamp, event_id
    SETTINGS prefer_column_name_to_alias = 1, optimize_read_in_order = 1,
      read_in_order_use_buffering = 0, max_threads = 1,
      output_format_json_escape_forward_slashes = 0`;
  return ch.stream(sql, p.values, format === 'csv' ? 'CSV' : 'TabSeparatedRaw');
}

/** The CSV header row, quoted as the engine quotes text. */
const CSV_HEADER = new TextEncoder().encode(`${FIELDS.map(([name]) => `"${name}"`).join(',')}\n`);
