import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type EmbeddedServer, startEmbeddedPostgres } from '@trackhouse/postgres';
import type { TestProject } from 'vitest/node';
import { ensureDashboardBuilt } from '../apps/dashboard/build';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A Postgres server URL tests create their own databases on. */
    postgresUrl: string;
    /** Redis for the production-path suites; empty when none is configured. */
    redisUrl: string;
  }
}

let embedded: EmbeddedServer | undefined;
let dataDir: string | undefined;

/**
 * Tests use DATABASE_URL when it is set (CI: the machine's Postgres); otherwise one embedded
 * PostgreSQL server is started for the whole run. Redis suites run only when REDIS_URL is set.
 */
export async function setup(project: TestProject): Promise<void> {
  let postgresUrl = process.env.DATABASE_URL ?? '';
  if (!postgresUrl) {
    dataDir = await mkdtemp(join(tmpdir(), 'trackhouse-test-pg-'));
    embedded = await startEmbeddedPostgres(dataDir);
    postgresUrl = embedded.url;
  }
  // The query service serves the dashboard's build, and the browser tests open it.
  await ensureDashboardBuilt();
  project.provide('postgresUrl', postgresUrl);
  project.provide('redisUrl', process.env.REDIS_URL ?? '');
}

export async function teardown(): Promise<void> {
  await embedded?.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}
