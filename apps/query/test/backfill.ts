import { type ClickHouse, LOCAL_SUFFIX, planClickHouseMigrations } from '@trackhouse/clickhouse';
import { expect } from 'vitest';
import { CLICKHOUSE_MIGRATIONS } from '../../../test/helpers';

/**
 * A migration's backfill stores for a site what its view stored: the site's rows of `table` are
 * deleted, the migration's one `INSERT … SELECT` (in the handle's form) run twice, and `stored`
 * (the site's rows, in a form that adds up rows of several parts) answers as before each time.
 */
export async function expectBackfillAsView<T>(
  ch: ClickHouse,
  {
    migration,
    table,
    siteId,
    stored,
  }: {
    migration: string;
    table: string;
    siteId: number;
    stored: () => Promise<T[]>;
  },
): Promise<void> {
  const viewed = await stored();
  expect(viewed.length).toBeGreaterThan(0);
  const [planned] = (await planClickHouseMigrations(CLICKHOUSE_MIGRATIONS, ch.cluster)).filter((m) =>
    m.file.startsWith(`${migration}_`),
  );
  const backfill = planned!.statements.filter((s) => /^INSERT\s/i.test(s));
  expect(backfill).toHaveLength(1);
  await ch.command(
    ch.cluster
      ? `DELETE FROM ${table}${LOCAL_SUFFIX} ON CLUSTER ${ch.cluster} WHERE site_id = ${siteId}`
      : `DELETE FROM ${table} WHERE site_id = {s:UInt32}`,
    { s: siteId },
  );
  expect(await stored()).toEqual([]);
  await ch.command(backfill[0]!);
  expect(await stored()).toEqual(viewed);
  await ch.command(backfill[0]!);
  expect(await stored()).toEqual(viewed);
}
