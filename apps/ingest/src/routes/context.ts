import type { PipelineDeps } from '../pipeline';
import type { DurableWriter } from '../writer/writer';

/** What the ingest routes share. */
export interface IngestContext {
  pipeline: PipelineDeps;
  writer: DurableWriter;
  trustProxy: boolean;
}
