import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createClickHouse } from '@trackhouse/clickhouse';
import { median, timesOf } from './profile';
import { option } from './query';

/** A statement's forms to compare: its bound values and each form's text, by name. */
interface Forms {
  params: Record<string, unknown>;
  forms: Record<string, string>;
}

/** The rows of an answer in one order, each value as text: two forms agree when these are equal. */
const canonical = (rows: Record<string, unknown>[]) =>
  JSON.stringify(
    rows
      .map((r) =>
        JSON.stringify(
          Object.keys(r)
            .sort()
            .map((k) => [k, String(r[k])]),
        ),
      )
      .sort(),
  );

/**
 * `pnpm bench forms --data-dir DIR --file FORMS.json [--runs R]`: several forms of one statement,
 * run in turn on a seeded data directory (server stopped), R times each after a first run that
 * is not timed; each form's median time and CPU time, and whether it returned the first form's
 * rows. FORMS.json is `{ "params": {…}, "forms": { "name": "SELECT …" } }`, a statement and its
 * values as `pnpm bench profile --sql` prints them. Values of 16 digits or more in an array are
 * read as 64-bit integers (JSON numbers cannot hold them).
 */
export async function benchForms(args: string[]): Promise<void> {
  const dir = option(args, 'data-dir');
  const file = option(args, 'file');
  if (!dir || !file) throw new Error('--data-dir DIR --file FORMS.json');
  const runs = Number(option(args, 'runs') ?? 5);
  const { params, forms } = JSON.parse(readFileSync(file, 'utf8')) as Forms;
  for (const [k, v] of Object.entries(params))
    if (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string' && /^\d{16,}$/.test(x)))
      params[k] = v.map((x) => BigInt(x as string));
  const ch = createClickHouse({
    kind: 'embedded',
    dataDir: join(resolve(dir), 'clickhouse'),
    queryPoolSize: 1,
  });
  try {
    const timed = new Map(
      Object.keys(forms).map((n) => [n, { ms: [] as number[], cpu: [] as number[], rows: '' }]),
    );
    for (let i = 0; i <= runs; i++)
      for (const [name, sql] of Object.entries(forms)) {
        let rows: Record<string, unknown>[] = [];
        const t = await timesOf(async () => {
          rows = await ch.query<Record<string, unknown>>(sql, params);
        });
        const form = timed.get(name)!;
        if (i === 0) form.rows = canonical(rows);
        else {
          form.ms.push(t.ms);
          form.cpu.push(t.cpuMs);
        }
      }
    const first = [...timed.values()][0]?.rows;
    for (const [name, form] of timed)
      console.log(
        `${name.padEnd(24)} ${median(form.ms).toFixed(1).padStart(9)} ms ${median(form.cpu).toFixed(1).padStart(9)} ms of CPU  ${form.rows === first ? 'same rows' : 'OTHER ROWS'}`,
      );
  } finally {
    await ch.close();
  }
}
