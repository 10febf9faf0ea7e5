import type { Sql } from '../database';

/**
 * A step as the API takes it (validated there): a page pattern or a custom event. A type, not an
 * interface, so that it is assignable to the JSON the driver stores.
 */
export type FunnelStepRecord = {
  type: 'page' | 'event';
  value: string;
  name?: string;
  eventPropertyKey?: string;
  eventPropertyValue?: string | number;
};

export interface FunnelRecord {
  funnelId: number;
  siteId: number;
  name: string;
  steps: FunnelStepRecord[];
  createdAt: Date;
  updatedAt: Date;
}

export interface FunnelInput {
  name: string;
  steps: FunnelStepRecord[];
}

const COLUMNS = ['funnel_id', 'site_id', 'name', 'steps', 'created_at', 'updated_at'];

export async function createFunnel(sql: Sql, siteId: number, input: FunnelInput): Promise<FunnelRecord> {
  const [row] = await sql<FunnelRecord[]>`
    insert into funnels (site_id, name, steps)
    values (${siteId}, ${input.name}, ${sql.json(input.steps)})
    returning ${sql(COLUMNS)}`;
  return row!;
}

/** Oldest first. Only funnels of this site are ever listed, updated or deleted. */
export async function listFunnels(sql: Sql, siteId: number): Promise<FunnelRecord[]> {
  return sql<
    FunnelRecord[]
  >`select ${sql(COLUMNS)} from funnels where site_id = ${siteId} order by funnel_id`;
}

export async function updateFunnel(
  sql: Sql,
  siteId: number,
  funnelId: number,
  input: FunnelInput,
): Promise<FunnelRecord | undefined> {
  const [row] = await sql<FunnelRecord[]>`
    update funnels set name = ${input.name}, steps = ${sql.json(input.steps)}, updated_at = now()
    where site_id = ${siteId} and funnel_id = ${funnelId}
    returning ${sql(COLUMNS)}`;
  return row;
}

export async function deleteFunnel(sql: Sql, siteId: number, funnelId: number): Promise<boolean> {
  const rows =
    await sql`delete from funnels where site_id = ${siteId} and funnel_id = ${funnelId} returning funnel_id`;
  return rows.length > 0;
}
