/**
 * ClickHouse errors that describe the inserted data itself: the same lines fail the same way
 * on every attempt, so retrying them only blocks the buffer. Every other failure (unreachable
 * server, timeouts, memory, too many parts, a missing table, an unknown code) is transient and
 * retried in order: dead-lettering healthy rows during a server or configuration problem would
 * be worse than waiting (docs/decisions.md, "Insert failures").
 */
export const CONTENT_ERROR_CODES: ReadonlyMap<number, string> = new Map([
  [6, 'CANNOT_PARSE_TEXT'],
  [16, 'NO_SUCH_COLUMN_IN_TABLE'],
  [25, 'CANNOT_PARSE_ESCAPE_SEQUENCE'],
  [26, 'CANNOT_PARSE_QUOTED_STRING'],
  [27, 'CANNOT_PARSE_INPUT_ASSERTION_FAILED'],
  [32, 'ATTEMPT_TO_READ_AFTER_EOF'],
  [33, 'CANNOT_READ_ALL_DATA'],
  [38, 'CANNOT_PARSE_DATE'],
  [41, 'CANNOT_PARSE_DATETIME'],
  [53, 'TYPE_MISMATCH'],
  [69, 'ARGUMENT_OUT_OF_BOUND'],
  [70, 'CANNOT_CONVERT_TYPE'],
  [72, 'CANNOT_PARSE_NUMBER'],
  [117, 'INCORRECT_DATA'],
  [128, 'TOO_LARGE_ARRAY_SIZE'],
  [131, 'TOO_LARGE_STRING_SIZE'],
  [190, 'SIZES_OF_ARRAYS_DONT_MATCH'],
  [306, 'TOO_DEEP_RECURSION'],
  [321, 'VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE'],
  [349, 'CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN'],
  [376, 'CANNOT_PARSE_UUID'],
  [377, 'ILLEGAL_SYNTAX_FOR_DATA_TYPE'],
  [691, 'UNKNOWN_ELEMENT_OF_ENUM'],
]);

/** A refused insert as kept beside dead-lettered rows. */
export interface InsertError {
  code: number | null;
  type: string;
  message: string;
}

const MAX_MESSAGE = 2000;

/** The ClickHouse error code of a failure: `.code` of the client's error, else `Code: N.` in the text. */
export function clickHouseCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^\d+$/.test(code)) return Number(code);
  if (typeof code === 'number') return code;
  const match = /\bCode: (\d+)\./.exec(err instanceof Error ? err.message : String(err));
  return match ? Number(match[1]) : undefined;
}

export function isContentError(err: unknown): boolean {
  const code = clickHouseCode(err);
  return code !== undefined && CONTENT_ERROR_CODES.has(code);
}

export function describeInsertError(err: unknown): InsertError {
  const code = clickHouseCode(err) ?? null;
  const type = (err as { type?: unknown } | null)?.type;
  return {
    code,
    type: typeof type === 'string' && type !== '' ? type : (CONTENT_ERROR_CODES.get(code ?? -1) ?? 'UNKNOWN'),
    message: (err instanceof Error ? err.message : String(err)).slice(0, MAX_MESSAGE),
  };
}

/**
 * The 1-based row of an insert of `rows` rows that a parse error names (`(at row N)`; exact
 * with parallel parsing off, as inserts run), if it names one within range.
 */
export function refusedRow(err: unknown, rows: number): number | undefined {
  const match = /\(at row (\d+)\)/.exec(err instanceof Error ? err.message : String(err));
  const row = match ? Number(match[1]) : 0;
  return row >= 1 && row <= rows ? row : undefined;
}

/**
 * A ClickHouse message without the data it quotes (it shows the rows near a parse error in
 * single quotes): what may go to logs, which must not carry tracked content.
 */
export function redactedReason(message: string): string {
  const quote = message.indexOf("'");
  const cut = quote === -1 ? message : message.slice(0, quote);
  return cut.split('\n')[0]!.slice(0, 200).trim();
}
