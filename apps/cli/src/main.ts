import { parseArgs } from 'node:util';
import { ClickHouseLockedError, seedEvents } from '@trackhouse/clickhouse';
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
  migrate                                       apply ClickHouse and Postgres migrations
  seed --site ID [--events N] [--days D]        generate realistic events straight into ClickHouse
                                                (embedded: stop the server first)

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
  const handler = HANDLERS[name];
  if (!handler && name !== 'migrate' && name !== 'seed')
    return fail(`unknown command "${name}"\n\n${USAGE}`, json, 2);

  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    return fail(err instanceof ConfigError ? err.message : String(err), json, 2);
  }
  const db = await openDatabase(
    config.DATABASE_URL ? { url: config.DATABASE_URL, max: 2 } : { dataDir: config.DATA_DIR, max: 2 },
  );
  try {
    let output: commands.Output;
    if (name === 'migrate') {
      output = await migrate(db.sql, config);
    } else if (name === 'seed') {
      await migratePostgres(db.sql, MIGRATIONS.postgres);
      output = await seed(db.sql, config, parsed.values as Options);
    } else {
      await migratePostgres(db.sql, MIGRATIONS.postgres);
      output = await handler!(db.sql, parsed.values as Options);
    }
    console.log(json ? JSON.stringify(output.json) : formatTable(output.table ?? [output.json]));
    return 0;
  } catch (err) {
    if (err instanceof commands.UsageError) return fail(err.message, json, 2);
    return fail(err instanceof Error ? err.message : String(err), json, 1);
  } finally {
    await db.close();
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
