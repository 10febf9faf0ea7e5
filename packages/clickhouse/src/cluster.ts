/**
 * The cluster form of the migrations (CLICKHOUSE_CLUSTER), generated from the single-node files
 * so that one set of files describes both (docs/scaling.md, "Cluster mode"):
 *
 * - every `*MergeTree` table `t` becomes `t_local` on `Replicated*MergeTree` (Keeper path
 *   `/clickhouse/tables/{shard}/{database}/{table}`, replica `{replica}`), and `t` becomes a
 *   `Distributed` table over it: queries and inserts keep using `t`;
 * - materialized views read and fill the local tables, so each shard rolls up its own rows;
 * - `ALTER`s go to the local tables (column changes to the Distributed table too);
 * - every DDL carries `ON CLUSTER`; backfill `INSERT … SELECT`s go through the Distributed
 *   tables, with `IN (subquery)` made `GLOBAL`.
 *
 * A table with a `session_id` column is sharded by `cityHash64(site_id, session_id)`: a
 * session's events, its rollup row and its replay all live on one shard. Any other table is
 * sharded by a hash of its sorting key, so the rows a Replacing/Aggregating merge folds together
 * (and a `FINAL` read merges) meet on one shard.
 *
 * A statement of a shape it does not know fails loudly instead of being applied on one node.
 */

export const LOCAL_SUFFIX = '_local';

const CLUSTER_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

interface TableInfo {
  columns: Set<string>;
  shardingKey: string;
}

/** What the rewriter learnt of earlier statements (tables made local, their columns). */
export class ClusterSchema {
  readonly tables = new Map<string, TableInfo>();
  constructor(readonly cluster: string) {
    if (!CLUSTER_NAME.test(cluster))
      throw new Error(`cluster name ${JSON.stringify(cluster)} must be a plain identifier`);
  }

  /** The cluster statements for one single-node statement, in order. */
  rewrite(statement: string): string[] {
    const s = statement.trim();
    if (/^CREATE\s+TABLE\b/i.test(s)) return this.createTable(s);
    if (/^CREATE\s+MATERIALIZED\s+VIEW\b/i.test(s)) return [this.createMaterializedView(s)];
    if (/^CREATE\s+VIEW\b/i.test(s))
      return [insertOnCluster(s, /^CREATE\s+VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?\w+/i, this.cluster)];
    if (/^ALTER\s+TABLE\b/i.test(s)) return this.alterTable(s);
    if (/^INSERT\s+INTO\b/i.test(s))
      return [s.replace(/\b(NOT\s+)?IN\s*\(\s*SELECT\b/gi, (_m, not) => `GLOBAL ${not ?? ''}IN (SELECT`)];
    if (/^DROP\s+(TABLE|VIEW)\b/i.test(s)) return this.drop(s);
    throw new Error(`cluster mode cannot translate this statement (write it in the existing style):\n${s}`);
  }

  private createTable(s: string): string[] {
    const head = /^CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?(\w+)\s*/i.exec(s)!;
    const ifNotExists = head[1] ? 'IF NOT EXISTS ' : '';
    const name = head[2]!;
    let rest = s.slice(head[0].length);
    let definition: string;
    let columns: Set<string>;
    const as = /^AS\s+(\w+)\s*/i.exec(rest);
    if (as) {
      const source = as[1]!;
      const known = this.tables.get(source);
      definition = `AS ${known ? source + LOCAL_SUFFIX : source}`;
      columns = known?.columns ?? new Set();
      rest = rest.slice(as[0].length);
    } else if (rest.startsWith('(')) {
      const end = closingParen(rest, 0);
      definition = rest.slice(0, end + 1);
      columns = columnNames(definition);
      rest = rest.slice(end + 1).trimStart();
    } else {
      throw new Error(`cluster mode cannot translate this table definition:\n${s}`);
    }
    const engine = /^ENGINE\s*=\s*(\w+)/i.exec(rest);
    if (!engine || !/MergeTree$/.test(engine[1]!) || engine[1]!.startsWith('Replicated')) {
      // Not a MergeTree table (or already replicated): the same table on every node.
      return [`CREATE TABLE ${ifNotExists}${name} ON CLUSTER ${this.cluster} ${definition}\n${rest}`];
    }
    let after = rest.slice(engine[0].length);
    let args = '';
    if (after.startsWith('(')) {
      const end = closingParen(after, 0);
      args = after.slice(1, end).trim();
      after = after.slice(end + 1);
    }
    const replicated = `ENGINE = Replicated${engine[1]}('/clickhouse/tables/{shard}/{database}/{table}', '{replica}'${args ? `, ${args}` : ''})`;
    const settings = after.replace(
      /\bnon_replicated_deduplication_window\b/g,
      'replicated_deduplication_window',
    );
    const local = name + LOCAL_SUFFIX;
    const shardingKey = chooseShardingKey(columns, sortingKey(after));
    this.tables.set(name, { columns, shardingKey });
    return [
      `CREATE TABLE ${ifNotExists}${local} ON CLUSTER ${this.cluster} ${definition}\n${replicated}${settings}`,
      `CREATE TABLE ${ifNotExists}${name} ON CLUSTER ${this.cluster} AS ${local}\nENGINE = Distributed(${this.cluster}, currentDatabase(), ${local}, ${shardingKey})`,
    ];
  }

  private createMaterializedView(s: string): string {
    const head = /^CREATE\s+MATERIALIZED\s+VIEW\s+(IF\s+NOT\s+EXISTS\s+)?(\w+)\s+TO\s+(\w+)\s+AS\s+/i.exec(s);
    if (!head)
      throw new Error(
        `cluster mode needs materialized views in the form "… VIEW name TO target AS SELECT":\n${s}`,
      );
    const target = this.tables.has(head[3]!) ? head[3]! + LOCAL_SUFFIX : head[3]!;
    const select = this.localReferences(s.slice(head[0].length));
    return `CREATE MATERIALIZED VIEW ${head[1] ? 'IF NOT EXISTS ' : ''}${head[2]} ON CLUSTER ${this.cluster} TO ${target}\nAS ${select}`;
  }

  private alterTable(s: string): string[] {
    const head = /^ALTER\s+TABLE\s+(\w+)\s+/i.exec(s)!;
    const name = head[1]!;
    const actions = s.slice(head[0].length);
    if (!this.tables.has(name)) return [`ALTER TABLE ${name} ON CLUSTER ${this.cluster} ${actions}`];
    const out = [`ALTER TABLE ${name}${LOCAL_SUFFIX} ON CLUSTER ${this.cluster} ${actions}`];
    // The Distributed table mirrors the columns (not their codecs, which only storage has).
    if (/^(ADD|DROP|MODIFY|RENAME)\s+COLUMN\b/i.test(actions)) {
      out.push(`ALTER TABLE ${name} ON CLUSTER ${this.cluster} ${withoutCodecs(actions)}`);
      if (/^ADD\s+COLUMN\b/i.test(actions))
        this.tables
          .get(name)!
          .columns.add(/^ADD\s+COLUMN\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)/i.exec(actions)![1]!);
    }
    return out;
  }

  private drop(s: string): string[] {
    const head = /^DROP\s+(TABLE|VIEW)\s+(IF\s+EXISTS\s+)?(\w+)/i.exec(s)!;
    const [, kind, ifExists, name] = head;
    const rest = s.slice(head[0].length);
    const drop = (table: string) =>
      `DROP ${kind!.toUpperCase()} ${ifExists ? 'IF EXISTS ' : ''}${table} ON CLUSTER ${this.cluster}${rest}`;
    if (!this.tables.has(name!)) return [drop(name!)];
    this.tables.delete(name!);
    return [drop(name!), drop(name! + LOCAL_SUFFIX)];
  }

  /** `FROM t` / `JOIN t` of known tables read the local table (a view runs on each shard). */
  private localReferences(select: string): string {
    return select.replace(/\b(FROM|JOIN)\s+(\w+)\b/gi, (m, kw, table) =>
      this.tables.has(table) ? `${kw} ${table}${LOCAL_SUFFIX}` : m,
    );
  }
}

/** The cluster statements of one migration file's statements. */
export function clusterStatements(schema: ClusterSchema, statements: string[]): string[] {
  return statements.flatMap((s) => schema.rewrite(s));
}

function chooseShardingKey(columns: Set<string>, sortKey: string | undefined): string {
  if (columns.has('site_id') && columns.has('session_id')) return 'cityHash64(site_id, session_id)';
  if (sortKey && sortKey !== 'tuple()') return `cityHash64(${sortKey.replace(/^\((.*)\)$/s, '$1')})`;
  return 'rand()';
}

/** The ORDER BY expression of a table's engine clause. */
function sortingKey(clause: string): string | undefined {
  const m = /\bORDER\s+BY\s+/i.exec(clause);
  if (!m) return undefined;
  const from = m.index + m[0].length;
  if (clause[from] === '(') return clause.slice(from, closingParen(clause, from) + 1);
  return /^[\w.]+(\([^)]*\))?/.exec(clause.slice(from))?.[0];
}

/** Column names of a `( … )` definition: the first word of each top-level entry. */
function columnNames(definition: string): Set<string> {
  const names = new Set<string>();
  let depth = 0;
  let start = 1;
  for (let i = 1; i < definition.length - 1; i++) {
    const c = definition[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      addColumn(names, definition.slice(start, i));
      start = i + 1;
    }
  }
  addColumn(names, definition.slice(start, definition.length - 1));
  return names;
}

function addColumn(names: Set<string>, entry: string): void {
  const word = /^\s*`?(\w+)`?/.exec(entry)?.[1];
  if (word && !/^(INDEX|PROJECTION|CONSTRAINT)$/i.test(word)) names.add(word);
}

/** Index of the parenthesis closing the one at `open` (quotes respected). */
function closingParen(text: string, open: number): number {
  let depth = 0;
  let quote: string | undefined;
  for (let i = open; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = undefined;
    } else if (c === "'" || c === '`' || c === '"') quote = c;
    else if (c === '(') depth++;
    else if (c === ')' && --depth === 0) return i;
  }
  throw new Error(`unbalanced parentheses in:\n${text}`);
}

function withoutCodecs(actions: string): string {
  let out = actions;
  for (let m = /\s+CODEC\s*\(/i.exec(out); m; m = /\s+CODEC\s*\(/i.exec(out)) {
    const open = m.index + m[0].length - 1;
    out = out.slice(0, m.index) + out.slice(closingParen(out, open) + 1);
  }
  return out;
}

function insertOnCluster(s: string, head: RegExp, cluster: string): string {
  return s.replace(head, (m) => `${m} ON CLUSTER ${cluster}`);
}
