import { recordId } from '@trackhouse/core';
import type { Sql } from '../database';

export const ROLES = ['owner', 'admin', 'member'] as const;
export type Role = (typeof ROLES)[number];

export interface User {
  id: string;
  email: string;
  name: string | null;
  createdAt: Date;
}

export interface Member extends User {
  role: Role;
}

/** The user with this email (case-insensitive), created when absent. */
export async function getOrCreateUser(sql: Sql, email: string, name?: string): Promise<User> {
  const [row] = await sql<User[]>`
    insert into users (id, email, name) values (${recordId()}, ${email}, ${name ?? null})
    on conflict (lower(email)) do update set email = users.email
    returning id, email, name, created_at`;
  return row!;
}

export async function getUser(sql: Sql, id: string): Promise<User | undefined> {
  const [row] = await sql<User[]>`select id, email, name, created_at from users where id = ${id}`;
  return row;
}

export async function listUsers(sql: Sql): Promise<User[]> {
  return sql<User[]>`select id, email, name, created_at from users order by created_at, id`;
}

/** Adds the user to the organization, or changes the role of an existing membership. */
export async function setMembership(
  sql: Sql,
  organizationId: string,
  userId: string,
  role: Role,
): Promise<void> {
  await sql`
    insert into memberships (organization_id, user_id, role) values (${organizationId}, ${userId}, ${role})
    on conflict (organization_id, user_id) do update set role = excluded.role`;
}

export async function getRole(sql: Sql, organizationId: string, userId: string): Promise<Role | undefined> {
  const [row] = await sql<{ role: Role }[]>`
    select role from memberships where organization_id = ${organizationId} and user_id = ${userId}`;
  return row?.role;
}

export async function listMembers(sql: Sql, organizationId: string): Promise<Member[]> {
  return sql<Member[]>`
    select u.id, u.email, u.name, u.created_at, m.role
    from memberships m join users u on u.id = m.user_id
    where m.organization_id = ${organizationId}
    order by m.created_at, u.id`;
}

/** The first owner of the oldest organization: who `trackhouse init` acts for after the first run. */
export async function findFirstOwner(
  sql: Sql,
): Promise<{ organizationId: string; userId: string } | undefined> {
  const [row] = await sql<{ organizationId: string; userId: string }[]>`
    select m.organization_id, m.user_id
    from memberships m join organizations o on o.id = m.organization_id
    where m.role = 'owner'
    order by o.created_at, o.id, m.created_at
    limit 1`;
  return row;
}

/** The organizations a user belongs to, with the user's role in each (oldest first). */
export async function listUserOrganizations(
  sql: Sql,
  userId: string,
): Promise<{ id: string; name: string; role: Role }[]> {
  return sql<{ id: string; name: string; role: Role }[]>`
    select o.id, o.name, m.role
    from memberships m join organizations o on o.id = m.organization_id
    where m.user_id = ${userId}
    order by o.created_at, o.id`;
}
