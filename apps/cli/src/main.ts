import { parseArgs } from 'node:util';
import {
  ClickHouseLockedError,
  migrationsTableStatement,
  planClickHouseMigrations,
  seedEvents,
} from '@trackhouse/clickhouse';
import { ConfigError, loadConfig } from '@trackhouse/core';
import { getSite, migratePostgres, openDatabase, type Pool } from '@trackhouse/postgres';
import { MIGRATIONS, openClickHouse } from '@trackhouse/runtime';
import * as commands from './commands';
import { formatTable } from './table';

const USAGE = `Usage: trackhouse <command> [options] [--json]

  init [--domain D] [--email E]                 first run: organization, owner, key, site
  orgs create --name N | orgs list
  users create --org ID --email E --role owner|admin|member | users list [--org ID]
  keys create --user ID --name N [--expires-in-days D] | keys list --user ID
  sites create --org ID --name N --domain D | sites list [--org ID]
  migrate [--dry-run]                           apply ClickHouse and Postgres migrations; --dry-run
                                                prints the ClickHouse SQL for the configured mode
                                                (single node or CLICKHOUSE_CLUSTER), touching nothing
  seed --site ID [--events N] [--days D]        generate realistic events straight into ClickHouse
                                                (embedded: stop the server first)
  buffer list | buffer show|retry|drop FILE     rows of the ingest buffer ClickHouse refused (dead
                                                letters); retry inserts them again (embedded: stop
                                                the server first)

Reads the same environment as the server (DATA_DIR, DATABASE_URL, CLICKHOUSE_URL, ...).`;

type Options = Record<string, string | undefined>;
type Handler = (sql: Pool, opts: Options) => Promise<commands.Output>;

const HANDLERS: Record<string, Handler> = {
  init: commands.init,
  'orgs create': commands.orgsCreate,
  'orgs list': commands.orgsList,
  'users create': commands.usersCreate,
  'users list': commands.usersList,
  'keys create': commands.keysCreate,
  'keys list': commands.keysList,
  'sites create': commands.sitesCreate,
  'sites list': commands.sitesList,
};

const STRING_OPTIONS = [
  'domain',
  'email',
  'name',
  'org',
  'role',
  'user',
  'expires-in-days',
  'site',
  'events',
  'days',
  'seed',
] as const;

async function migrate(sql: Pool, config: ReturnType<typeof loadConfig>): Promise<commands.Output> {
  const postgres = await migratePostgres(sql, MIGRATIONS.postgres);
  let clickhouse: Record<string, unknown>;
  try {
    const ch = await openClickHouse(config);
    await ch.close();
    clickhouse = { status: 'migrated' };
  } catch (err) {
    if (!(err instanceof ClickHouseLockedError)) throw err;
    // The running standalone server holds the embedded engine and migrated it at start.
    clickhouse = { status: 'held by the running server, which applies migrations at start' };
  }
  return {
    json: { postgres: { applied: postgres.applied }, clickhouse },
    table: [{ postgres: postgres.applied.join(', ') || 'up to date', clickhouse: clickhouse.status }],
  };
}

/**
 * The ClickHouse statements `migrate` would run for the configured mode, from the files alone
 * (no database is opened, so every file is listed: which ones a database already has is not
 * known). One statement per block, blocks separated by a blank line.
 */
async function migrationPlan(config: ReturnType<typeof loadConfig>): Promise<commands.Output> {
  const cluster = config.CLICKHOUSE_CLUSTER;
  const plan = [
    { file: 'schema_migrations', statements: [migrationsTableStatement(cluster)] },
    ...(await planClickHouseMigrations(MIGRATIONS.clickhouse, cluster)),
  ];
  const mode = cluster ? `cluster ${cluster}` : 'single node';
  const blocks = plan.flatMap(({ file, statements }) =>
    statements.map((s, i) => `${i === 0 ? `-- ${file}\n` : ''}${s.replace(/\n\s*\n/g, '\n')};`),
  );
  return {
    json: {
      mode,
      statements: plan.flatMap(({ file, statements }) => statements.map((sql) => ({ file, sql }))),
      text: [`-- ClickHouse migrations for ${mode} (dry run: nothing is applied)`, ...blocks].join('\n\n'),
    },
  };
}

async function seed(
  sql: Pool,
  config: ReturnType<typeof loadConfig>,
  opts: Options,
): Promise<commands.Output> {
  const number = (v: string | undefined, flag: string, def: number, max: number) => {
    if (v === undefined) return def;
    if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max)
      throw new commands.UsageError(`--${flag} must be 1..${max}`);
    return Number(v);
  };
  const siteId = number(opts.site, 'site', 0, 2_147_483_647);
  if (!siteId) throw new commands.UsageError('missing --site');
  const events = number(opts.events, 'events', 100_000, 1_000_000_000);
  const days = number(opts.days, 'days', 30, 3650);
  if (!(await getSite(sql, siteId))) throw new commands.UsageError(`no site ${siteId}`);
  let ch: Awaited<ReturnType<typeof openClickHouse>>;
  try {
    ch = await openClickHouse(config);
  } catch (err) {
    if (err instanceof ClickHouseLockedError)
      throw new commands.UsageError('the running server holds the embedded ClickHouse data: stop it first');
    throw err;
  }
  const started = Date.now();
  try {
    const progress = (done: number) => {
      const width = 30;
      const filled = Math.round((done / events) * width);
      const rate = Math.round(done / Math.max(0.001, (Date.now() - started) / 1000));
      process.stderr.write(
        `\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${events} events, ${rate}/s `,
      );
    };
    const inserted = await seedEvents(ch, {
      siteId,
      events,
      days,
      seed: number(opts.seed, 'seed', 1, 2 ** 31),
      onProgress: progress,
    });
    process.stderr.write('\n');
    const seconds = Math.round((Date.now() - started) / 100) / 10;
    return {
      json: { siteId, events: inserted, days, seconds },
      table: [{ siteId, events: inserted, days, seconds }],
    };
  } finally {
    await ch.close();
  }
}

async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        json: { type: 'boolean', default: false },
        'dry-run': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
        ...Object.fromEntries(STRING_OPTIONS.map((o) => [o, { type: 'string' as const }])),
      },
    });
  } catch (err) {
    return fail(err instanceof Error ? err.message : String(err), argv.includes('--json'), 2);
  }
  const json = parsed.values.json === true;
  const name = parsed.positionals.join(' ');
  if (parsed.values.help || name === '') {
    console.log(USAGE);
    return parsed.values.help ? 0 : 2;
  }
  const isBuffer = parsed.positionals[0] === 'buffer';
  const handler = HANDLERS[name];
  if (!handler && name !== 'migrate' && name !== 'seed' && !isBuffer)
    return fail(`unknown command "${name}"\n\n${USAGE}`, json, 2);

  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    return fail(err instanceof ConfigError ? err.message : String(err), json, 2);
  }
  if (name === 'migrate' && parsed.values['dry-run'] === true) {
    return run(() => migrationPlan(config), json, true);
  }
  // Dead letters are files and ClickHouse rows: no Postgres needed (nor the ingest modules
  // loaded for the other commands).
  if (isBuffer) {
    const { buffer } = await import('./buffer');
    return run(() => buffer(config, parsed.positionals.slice(1)), json);
  }
  const db = await openDatabase(
    config.DATABASE_URL
      ? { url: config.DATABASE_URL, max: 2 }
      : {
          dataDir: config.DATA_DIR,
          max: 2,
          // Right after the server stopped, its embedded PostgreSQL may still be shutting down.
          embedded: { onWait: (message) => console.error(`trackhouse: ${message}`) },
        },
  );
  try {
    return await run(async () => {
      if (name === 'migrate') return migrate(db.sql, config);
      await migratePostgres(db.sql, MIGRATIONS.postgres);
      if (name === 'seed') return seed(db.sql, config, parsed.values as Options);
      return handler!(db.sql, parsed.values as Options);
    }, json);
  } finally {
    await db.close();
  }
}

/** Runs a command and prints its output (or its error): the exit code. */
async function run(command: () => Promise<commands.Output>, json: boolean, raw = false): Promise<number> {
  try {
    const output = await command();
    if (raw && !json) console.log(String(output.json.text));
    else console.log(json ? JSON.stringify(output.json) : formatTable(output.table ?? [output.json]));
    return 0;
  } catch (err) {
    if (err instanceof commands.UsageError) return fail(err.message, json, 2);
    return fail(err instanceof Error ? err.message : String(err), json, 1);
  }
}

function fail(message: string, json: boolean, code: number): number {
  if (json) console.log(JSON.stringify({ success: false, error: message }));
  else console.error(`trackhouse: ${message}`);
  return code;
}

// Output piped into a command that stops reading (`| head`) is not an error of ours.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

main(process.argv.slice(2)).then((code) => process.exit(code));
