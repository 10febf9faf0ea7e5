import { z } from 'zod';

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce
    .number({ message: 'must be a number' })
    .int({ message: 'must be an integer' })
    .min(min, { message: `must be ≥ ${min}` })
    .max(max, { message: `must be ≤ ${max}` });
const url = (protocols: string[]) =>
  z.string().refine(
    (v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    { message: `must be a ${protocols.join(' or ')} URL` },
  );

/**
 * Every environment variable trackhouse reads, validated once at start.
 * Packages never read process.env; they receive the parsed values.
 */
export const configSchema = z.object({
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: int(0, 65535).default(3000),
  DATA_DIR: z.string().min(1).default('./data'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),

  DATABASE_URL: url(['postgres:', 'postgresql:']).optional(),
  REDIS_URL: url(['redis:', 'rediss:']).optional(),
  /** Prefix of every Redis key and channel, so several deployments can share one Redis. */
  REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9:_-]{1,64}$/, { message: 'letters, digits, ":", "_" or "-" only' })
    .default('trackhouse:'),
  CLICKHOUSE_URL: url(['http:', 'https:']).optional(),
  CLICKHOUSE_USER: z.string().default('default'),
  CLICKHOUSE_PASSWORD: z.string().default(''),
  CLICKHOUSE_DATABASE: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: 'must be a plain identifier' })
    .default('trackhouse'),
  /** Readers sharing the embedded engine; writes go through one dedicated connection. */
  CLICKHOUSE_QUERY_POOL: int(1, 16).default(3),
  /**
   * Whether unfiltered analytics answers read the per-session rollups (`true`, the default) or
   * the events alone (`false`: the same answers, slower; for checking the rollups).
   */
  QUERY_ROLLUPS: bool.default(true),
  /**
   * Seconds between the query service's background runs that build the per-day summaries of the
   * unfiltered answers for every site (one also at start, and one for a site whose goals
   * change); 0 leaves them to the reads that need them.
   */
  SUMMARIES_INTERVAL_S: int(0, 86_400).default(3600),
  /** The UTC days back from today whose summaries those runs build. */
  SUMMARIES_DAYS: int(1, 3660).default(35),

  /** Server secret for visitor ids. Standalone mode generates one under DATA_DIR when absent. */
  SECRET: z.string().min(16, { message: 'must be at least 16 characters' }).optional(),
  /**
   * How many proxies in front of the service append to X-Forwarded-For: `false` (0, the
   * default: the header is spoofable and ignored), `true` (1: the shipped nginx) or a count.
   */
  TRUST_PROXY: z
    .union([bool, z.string().regex(/^\d{1,2}$/, { message: 'must be true, false or a number of hops' })])
    .transform(Number)
    .pipe(z.number().int().min(0).max(16))
    .default(0),
  GEOIP_DB_PATH: z.string().min(1).optional(),

  TRACK_RATE_LIMIT_MAX: int(1).default(500),
  TRACK_RATE_LIMIT_WINDOW_S: int(1).default(600),
  QUERY_RATE_LIMIT_MAX: int(1).default(6000),
  QUERY_RATE_LIMIT_WINDOW_S: int(1).default(600),
  /** Keyless (browser) tracking requests per client address and site, per sliding window. */
  TRACK_ANON_RATE_LIMIT_MAX: int(1).default(3000),
  TRACK_ANON_RATE_LIMIT_WINDOW_S: int(1).default(600),
  /** Public-site and private-link reads (no API key) per client address, per sliding window. */
  READ_ANON_RATE_LIMIT_MAX: int(1).default(600),
  READ_ANON_RATE_LIMIT_WINDOW_S: int(1).default(600),
  /** Active (unrevoked, unexpired) API keys one user may hold. */
  API_KEYS_PER_USER_MAX: int(1, 10_000).default(50),
  /** API keys one user may create per day (sliding 24 hours), whatever key creates them. */
  API_KEY_CREATE_LIMIT_PER_DAY: int(1, 100_000).default(20),
  /** Bounds of every ClickHouse read: past the time a query is cancelled (503 QUERY_TIMEOUT). */
  CLICKHOUSE_READ_TIMEOUT_S: int(1, 3600).default(30),
  /**
   * A read is refused past this much memory; its aggregations and sorts spill to temporary files
   * past a quarter of it (2 GB by default).
   */
  CLICKHOUSE_READ_MAX_MEMORY_MB: int(16, 1_048_576).default(8192),
  /**
   * Past a quarter of CLICKHOUSE_READ_MAX_MEMORY_MB a read's aggregations and sorts go on in
   * temporary files (answering, slower); false refuses such a read at the limit instead.
   */
  CLICKHOUSE_READ_SPILL: bool.default(true),
  /** Server-wide monthly pageview limit per site; 0 means unlimited. */
  MONTHLY_PAGEVIEW_LIMIT: int(0).default(0),

  /** Write-ahead buffer of the ingest service (defaults to DATA_DIR/ingest-buffer). */
  INGEST_BUFFER_DIR: z.string().min(1).optional(),
  INGEST_BUFFER_MAX_MB: int(1).default(1024),
  INGEST_FLUSH_INTERVAL_MS: int(10, 60_000).default(500),
  INGEST_MAX_BATCH_ROWS: int(1, 1_000_000).default(50_000),
  /** Session replay data one site may record per UTC day (uncompressed rrweb JSON). */
  SESSION_REPLAY_MAX_MB_PER_DAY: int(1, 1_048_576).default(1024),
  /** Days a recorded replay batch is kept (a ClickHouse TTL; the value in force when recorded). */
  SESSION_REPLAY_RETENTION_DAYS: int(1, 3650).default(30),
  /**
   * A ClickHouse cluster (a name from the servers' remote_servers) that CLICKHOUSE_URL is a node
   * of: migrations create replicated local tables behind Distributed ones (docs/scaling.md).
   */
  CLICKHOUSE_CLUSTER: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: 'must be a plain identifier' })
    .optional(),
});

export type Config = z.infer<typeof configSchema>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Parses the environment; empty strings count as unset. Throws ConfigError naming each bad variable. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const cleaned: Record<string, string> = {};
  for (const key of Object.keys(configSchema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') cleaned[key] = value;
  }
  const parsed = configSchema.safeParse(cleaned);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`));
  }
  return parsed.data;
}
