import { recordId } from '@trackhouse/core';
import type { Sql } from '../database';

export interface Organization {
  id: string;
  name: string;
  createdAt: Date;
}

export async function createOrganization(sql: Sql, name: string): Promise<Organization> {
  const [row] = await sql<Organization[]>`
    insert into organizations (id, name) values (${recordId()}, ${name}) returning id, name, created_at`;
  return row!;
}

export async function getOrganization(sql: Sql, id: string): Promise<Organization | undefined> {
  const [row] = await sql<Organization[]>`select id, name, created_at from organizations where id = ${id}`;
  return row;
}

export async function listOrganizations(sql: Sql): Promise<Organization[]> {
  return sql<Organization[]>`select id, name, created_at from organizations order by created_at, id`;
}
