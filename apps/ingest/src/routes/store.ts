import type { EventRow } from '../pipeline';
import { overloaded, refundQuota } from '../pipeline';
import { type DurableWriter, OverloadedError } from '../writer/writer';
import type { IngestContext } from './context';

/**
 * Hands counted rows to the durable writer. When the writer cannot take them (buffer full, disk
 * failing, shutting down) nothing was stored: the pageviews go back to their quotas and the
 * request answers 503 OVERLOADED with Retry-After, so the client retries.
 */
export async function store(ctx: IngestContext, rows: readonly EventRow[], lines: string, now: Date) {
  try {
    await ctx.writer.append(lines, rows.length);
  } catch (err) {
    await refund(ctx, rows, now);
    if (!(err instanceof OverloadedError)) ctx.log.error({ err }, 'write-ahead buffer refused rows');
    throw overloaded();
  }
}

/**
 * Hands one row of another table (identify, replay batch) to that table's writer; when the
 * writer cannot take it, nothing was stored and the request answers 503 OVERLOADED.
 */
export async function storeRow(ctx: IngestContext, writer: DurableWriter, line: string): Promise<void> {
  try {
    await writer.append(line, 1);
  } catch (err) {
    if (!(err instanceof OverloadedError)) ctx.log.error({ err }, 'write-ahead buffer refused a row');
    throw overloaded();
  }
}

/** Gives unstored pageviews back to their sites' quotas; a failure is logged, not thrown. */
export async function refund(ctx: IngestContext, rows: readonly EventRow[], now: Date): Promise<void> {
  await refundQuota(ctx.pipeline, rows, now).catch((err: unknown) =>
    ctx.log.warn({ err }, 'could not refund the monthly quota of unstored pageviews'),
  );
}

/** Forgets client event-id claims of events that were not stored, so their retries are. */
export async function releaseClaims(ctx: IngestContext, claims: readonly string[]): Promise<void> {
  await Promise.all(claims.map((claim) => ctx.pipeline.stores.once.release(claim)));
}
