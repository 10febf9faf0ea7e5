import { OpenAPIHono } from '@hono/zod-openapi';
import type { ClickHouse } from '@trackhouse/clickhouse';
import { type HttpEnv, validationError } from '@trackhouse/core';
import type { Stores } from '@trackhouse/limits';
import type { Pool } from '@trackhouse/postgres';
import type { QuerySettings } from './app';
import type { Authorizer } from './auth';
import type { SummaryBuilder } from './summaries';

/**
 * What every query route gets: the authorizer, the stores (ClickHouse with every read bounded)
 * and the parsed settings, nothing read from the environment.
 */
export interface QueryContext {
  auth: Authorizer;
  sql: Pool;
  ch: ClickHouse;
  stores: Stores;
  settings: QuerySettings;
  summaries?: Pick<SummaryBuilder, 'schedule'>;
}

/** An OpenAPI router whose validation failures answer in the spec's error shape. */
export function router(): OpenAPIHono<HttpEnv> {
  return new OpenAPIHono<HttpEnv>({
    defaultHook: (result) => {
      if (!result.success) {
        const body = result.target === 'json';
        throw validationError(
          body ? 'INVALID_PAYLOAD' : 'INVALID_PARAMS',
          body ? 'Invalid payload' : 'Invalid parameters',
          result.error.issues,
        );
      }
    },
  });
}
