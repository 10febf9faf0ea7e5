import { type ClickHouse, type ReadFailure, withReadLimits } from '@trackhouse/clickhouse';
import { ApiError, type Config } from '@trackhouse/core';

export type ReadSettings = Pick<
  Config,
  'CLICKHOUSE_READ_TIMEOUT_S' | 'CLICKHOUSE_READ_MAX_MEMORY_MB' | 'CLICKHOUSE_READ_SPILL'
>;

/**
 * The query service's ClickHouse: every read bounded in time and memory, and the engine's
 * refusals a caller can act on answered as such (503 with Retry-After, or 400), never a 500.
 */
export function boundedReads(ch: ClickHouse, settings: ReadSettings): ClickHouse {
  const timeoutSeconds = settings.CLICKHOUSE_READ_TIMEOUT_S;
  // Waiting as long as a read may run gives a loaded server the time to drain.
  const retry = { 'Retry-After': String(Math.max(1, Math.ceil(timeoutSeconds))) };
  const errors: Record<ReadFailure, () => ApiError> = {
    timeout: () =>
      new ApiError(
        'QUERY_TIMEOUT',
        `The query took longer than the server allows (${timeoutSeconds} s): narrow the date range or the filters`,
        undefined,
        retry,
      ),
    memory: () =>
      new ApiError(
        'QUERY_TOO_LARGE',
        `The query needs more memory than the server allows (${settings.CLICKHOUSE_READ_MAX_MEMORY_MB} MB): narrow the date range or the filters`,
        undefined,
        retry,
      ),
    // Each pattern passed the RE2 check; together (or as a goal's path pattern) they can still
    // be too large for the engine to compile.
    regex: () =>
      new ApiError('INVALID_PARAMS', 'Invalid parameters', {
        fieldErrors: {},
        formErrors: ["the filters' regular expressions (or a goal's path pattern) are too large to compile"],
      }),
    time_zone: () =>
      new ApiError('INVALID_PARAMS', 'Invalid parameters', {
        fieldErrors: { time_zone: ['a time zone the database does not know'] },
        formErrors: [],
      }),
  };
  return withReadLimits(
    ch,
    {
      timeoutSeconds,
      maxMemoryMb: settings.CLICKHOUSE_READ_MAX_MEMORY_MB,
      spill: settings.CLICKHOUSE_READ_SPILL,
    },
    (failure) => errors[failure](),
  );
}
