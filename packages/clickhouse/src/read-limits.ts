import type { ClickHouseSettings } from '@clickhouse/client';
import type { ClickHouse } from './client';

/**
 * How long and how much memory one read may take (CLICKHOUSE_READ_TIMEOUT_S, _MAX_MEMORY_MB), and
 * whether its aggregations and sorts may go on in temporary files past a quarter of that
 * memory (CLICKHOUSE_READ_SPILL).
 */
export interface ReadLimits {
  timeoutSeconds: number;
  maxMemoryMb: number;
  spill: boolean;
}

/**
 * The settings that bound a read. They go with every call: the embedded engine applies call
 * settings as `SET` on the connection, where they stay, so a read that did not carry them
 * would run under whatever the previous call left there.
 */
export function readLimitSettings(limits: ReadLimits): ClickHouseSettings {
  const spillBytes = limits.spill ? String(Math.round(limits.maxMemoryMb * 256 * 1024)) : '0';
  return {
    // Seconds, fractions allowed. `throw` (not `break`): a cut-off answer would be a wrong one.
    max_execution_time: limits.timeoutSeconds,
    timeout_overflow_mode: 'throw',
    max_memory_usage: String(Math.round(limits.maxMemoryMb * 1024 * 1024)),
    // Past a quarter of the limit a GROUP BY or ORDER BY writes its state to the engine's
    // temporary files and merges them, so a read over many sessions answers, slower, where it
    // would be refused. A quarter, not the half ClickHouse suggests: a hash table just under the
    // threshold doubles when it grows, holding old and new at once (at half, such an
    // aggregation failed in the resize under limits of 64 and 256 MB). 0 turns it off.
    max_bytes_before_external_group_by: spillBytes,
    max_bytes_before_external_sort: spillBytes,
  };
}

/** Why ClickHouse refused a read, for the reasons a caller can act on; else undefined. */
export type ReadFailure = 'timeout' | 'memory' | 'regex' | 'time_zone';

// Server codes: TIMEOUT_EXCEEDED, TOO_SLOW (the estimate says it would time out),
// MEMORY_LIMIT_EXCEEDED, CANNOT_COMPILE_REGEXP, BAD_ARGUMENTS (only with a time zone message).
const BY_CODE: Record<string, ReadFailure> = {
  '159': 'timeout',
  '160': 'timeout',
  '241': 'memory',
  '427': 'regex',
};

export function classifyReadFailure(err: unknown): ReadFailure | undefined {
  if (!(err instanceof Error)) return undefined;
  const code = String((err as { code?: unknown }).code ?? '');
  const known = BY_CODE[code];
  if (known) return known;
  // The time zone names the runtime accepts and the engine's tz data can differ (a zone newer
  // than the engine's data); the engine then refuses to load it.
  if (code === '36' && /cannot load time zone/i.test(err.message)) return 'time_zone';
  return undefined;
}

/** `ch` with every `query` bounded by `limits`; failures are rethrown for `onFailure` to map. */
export function withReadLimits(
  ch: ClickHouse,
  limits: ReadLimits,
  onFailure: (failure: ReadFailure, err: Error) => Error,
): ClickHouse {
  const settings = readLimitSettings(limits);
  return {
    ...ch,
    async query<T>(sql: string, params?: Record<string, unknown>, extra?: ClickHouseSettings) {
      try {
        return await ch.query<T>(sql, params, { ...extra, ...settings });
      } catch (err) {
        const failure = classifyReadFailure(err);
        throw failure ? onFailure(failure, err as Error) : err;
      }
    },
  };
}
