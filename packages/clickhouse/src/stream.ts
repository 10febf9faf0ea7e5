import type { ClickHouseClient } from '@clickhouse/client';
import { Session } from 'chdb';

/** Output formats a streamed read may ask for (names of ClickHouse formats). */
export type StreamFormat = 'JSONEachRow' | 'CSVWithNames' | 'TabSeparatedRaw';

export type ResultStream = (
  sql: string,
  params: Record<string, unknown>,
  format: StreamFormat,
) => AsyncIterable<Uint8Array>;

/** A server answers over HTTP: the response body is read as it arrives. */
export function serverStream(client: ClickHouseClient): ResultStream {
  return async function* (sql, params, format) {
    const result = await client.exec({ query: `${sql}\nFORMAT ${format}`, query_params: params });
    try {
      for await (const chunk of result.stream as AsyncIterable<Uint8Array>) yield chunk;
    } finally {
      // An early stop (the HTTP client went away) closes the socket, which cancels the query.
      (result.stream as { destroy?: () => void }).destroy?.();
    }
  };
}

/**
 * The embedded engine's client connections materialize whole results, so streamed reads open a
 * native session of their own on the same data directory (one active stream per session): the
 * engine hands over one block at a time, fetched only when the previous one was consumed.
 */
export function embeddedStream(path: string): ResultStream {
  return async function* (sql, params, format) {
    const session = new Session(path);
    try {
      for await (const chunk of session.queryStreamBind(sql, params, { format })) yield chunk.raw();
    } finally {
      session.close();
    }
  };
}
