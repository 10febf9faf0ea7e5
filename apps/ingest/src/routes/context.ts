import type { Logger } from '@trackhouse/core';
import type { PipelineDeps } from '../pipeline';
import type { TableWriters } from '../writer/tables';
import type { DurableWriter } from '../writer/writer';

/** What the ingest routes share. */
export interface IngestContext {
  pipeline: PipelineDeps;
  /** The events table's writer. */
  writer: DurableWriter;
  writers: TableWriters;
  trustedProxyHops: number;
  log: Logger;
  replay: {
    /** Replay bytes one site may record per UTC day. */
    maxBytesPerDay: number;
    retentionDays: number;
  };
}
