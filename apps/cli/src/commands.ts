import { domainSchema } from '@trackhouse/core';
import {
  createApiKey,
  createOrganization,
  createSite,
  findFirstOwner,
  findSiteByDomain,
  getOrCreateUser,
  getOrganization,
  getUser,
  listApiKeys,
  listMembers,
  listOrganizations,
  listSites,
  listUsers,
  type Pool,
  ROLES,
  type Role,
  type Sql,
  setMembership,
} from '@trackhouse/postgres';
import { z } from 'zod';

export class UsageError extends Error {}

/** A command's result: the JSON object printed with --json, and rows for the human table. */
export interface Output {
  json: Record<string, unknown>;
  table?: Record<string, unknown>[];
}

function parse<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const result = schema.safeParse(value);
  if (!result.success) throw new UsageError(`${what}: ${result.error.issues[0]?.message ?? 'invalid'}`);
  return result.data;
}

function required(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new UsageError(`missing --${flag}`);
  return value;
}

const DEFAULT_OWNER_EMAIL = 'owner@trackhouse.local';

/**
 * First run: an organization, its owner, an API key and a site. Later runs: a new key for that
 * owner, and a site for the domain unless the organization already has one for it.
 */
export async function init(sql: Pool, opts: { domain?: string; email?: string }): Promise<Output> {
  const domain = parse(domainSchema, opts.domain ?? 'localhost', '--domain');
  let owner = await findFirstOwner(sql);
  if (!owner) {
    const email = parse(z.email(), opts.email ?? DEFAULT_OWNER_EMAIL, '--email');
    owner = await sql.begin(async (tx) => {
      const org = await createOrganization(tx, 'Default');
      const user = await getOrCreateUser(tx, email);
      await setMembership(tx, org.id, user.id, 'owner');
      return { organizationId: org.id, userId: user.id };
    });
  }
  const site =
    (await findSiteByDomain(sql, owner.organizationId, domain)) ??
    (await createSite(sql, {
      organizationId: owner.organizationId,
      name: domain,
      domain,
      createdBy: owner.userId,
    }));
  const { key } = await createApiKey(sql, { userId: owner.userId, name: `init ${new Date().toISOString()}` });
  const json = {
    organizationId: owner.organizationId,
    userId: owner.userId,
    apiKey: key,
    siteId: site.siteId,
  };
  return { json, table: [json] };
}

export async function orgsCreate(sql: Sql, opts: { name?: string }): Promise<Output> {
  const org = await createOrganization(
    sql,
    parse(z.string().trim().min(1).max(200), required(opts.name, 'name'), '--name'),
  );
  return { json: { organizationId: org.id }, table: [{ organizationId: org.id, name: org.name }] };
}

export async function orgsList(sql: Sql): Promise<Output> {
  const orgs = await listOrganizations(sql);
  const data = orgs.map((o) => ({
    organizationId: o.id,
    name: o.name,
    createdAt: o.createdAt.toISOString(),
  }));
  return { json: { data }, table: data };
}

export async function usersCreate(
  sql: Sql,
  opts: { org?: string; email?: string; role?: string },
): Promise<Output> {
  const orgId = required(opts.org, 'org');
  const email = parse(z.email(), required(opts.email, 'email'), '--email');
  const role = parse(z.enum(ROLES), opts.role ?? 'member', '--role') as Role;
  if (!(await getOrganization(sql, orgId))) throw new UsageError(`no organization ${orgId}`);
  const user = await getOrCreateUser(sql, email);
  await setMembership(sql, orgId, user.id, role);
  return {
    json: { userId: user.id },
    table: [{ userId: user.id, email: user.email, organizationId: orgId, role }],
  };
}

export async function usersList(sql: Sql, opts: { org?: string }): Promise<Output> {
  const rows = opts.org
    ? (await listMembers(sql, opts.org)).map((m) => ({ userId: m.id, email: m.email, role: m.role }))
    : (await listUsers(sql)).map((u) => ({ userId: u.id, email: u.email }));
  return { json: { data: rows }, table: rows };
}

export async function keysCreate(
  sql: Sql,
  opts: { user?: string; name?: string; 'expires-in-days'?: string },
): Promise<Output> {
  const userId = required(opts.user, 'user');
  const name = parse(z.string().trim().min(1).max(200), required(opts.name, 'name'), '--name');
  const days =
    opts['expires-in-days'] === undefined
      ? undefined
      : parse(z.coerce.number().int().min(1).max(3650), opts['expires-in-days'], '--expires-in-days');
  if (!(await getUser(sql, userId))) throw new UsageError(`no user ${userId}`);
  const expiresAt = days === undefined ? null : new Date(Date.now() + days * 86_400_000);
  const { key, record } = await createApiKey(sql, { userId, name, expiresAt });
  return {
    json: { apiKey: key, keyId: record.id },
    table: [{ keyId: record.id, apiKey: key, expiresAt: expiresAt?.toISOString() ?? 'never' }],
  };
}

export async function keysList(sql: Sql, opts: { user?: string }): Promise<Output> {
  const keys = await listApiKeys(sql, required(opts.user, 'user'));
  const data = keys.map((k) => ({
    keyId: k.id,
    name: k.name,
    prefix: k.prefix,
    createdAt: k.createdAt.toISOString(),
    expiresAt: k.expiresAt?.toISOString() ?? null,
    revoked: k.revokedAt !== null,
  }));
  return { json: { data }, table: data };
}

export async function sitesCreate(
  sql: Sql,
  opts: { org?: string; name?: string; domain?: string },
): Promise<Output> {
  const orgId = required(opts.org, 'org');
  const name = parse(z.string().trim().min(1).max(200), required(opts.name, 'name'), '--name');
  const domain = parse(domainSchema, required(opts.domain, 'domain'), '--domain');
  if (!(await getOrganization(sql, orgId))) throw new UsageError(`no organization ${orgId}`);
  const site = await createSite(sql, { organizationId: orgId, name, domain, createdBy: null });
  return {
    json: { siteId: site.siteId },
    table: [{ siteId: site.siteId, name, domain, organizationId: orgId }],
  };
}

export async function sitesList(sql: Sql, opts: { org?: string }): Promise<Output> {
  const data = (await listSites(sql, opts.org)).map((s) => ({
    siteId: s.siteId,
    name: s.name,
    domain: s.domain,
    organizationId: s.organizationId,
    public: s.public,
  }));
  return { json: { data }, table: data };
}
