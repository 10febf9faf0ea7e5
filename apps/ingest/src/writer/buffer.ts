import { join } from 'node:path';
import type { Config } from '@trackhouse/core';

/**
 * The write-ahead buffer as the operator sees it (the CLI imports this module alone): where it
 * lives, and its dead letters, which are plain files readable while the service runs.
 */
export function bufferDirectory(config: Pick<Config, 'DATA_DIR' | 'INGEST_BUFFER_DIR'>): string {
  return config.INGEST_BUFFER_DIR ?? join(config.DATA_DIR, 'ingest-buffer');
}

export {
  type DeadLetterInfo,
  DeadLetterNotFoundError,
  type DeadLetterSummary,
  deadLetterDirectory,
  deadLetterFile,
  dropDeadLetter,
  listDeadLetters,
  readDeadLetter,
  retryDeadLetter,
} from './dead-letter';
