import { generateApiKey, hashSecret, recordId } from '@trackhouse/core';
import type { Pool, Sql } from '../database';

export interface ApiKeyRecord {
  id: string;
  userId: string;
  name: string;
  prefix: string;
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

const COLUMNS = ['id', 'user_id', 'name', 'prefix', 'created_at', 'expires_at', 'revoked_at', 'last_used_at'];
const PREFIX_LENGTH = 8;

/** Creates a key and returns its secret once; only the hash is stored. */
export async function createApiKey(
  sql: Sql,
  input: { userId: string; name: string; expiresAt?: Date | null },
): Promise<{ key: string; record: ApiKeyRecord }> {
  const key = generateApiKey();
  const [record] = await sql<ApiKeyRecord[]>`
    insert into api_keys (id, user_id, name, prefix, key_hash, expires_at)
    values (${recordId()}, ${input.userId}, ${input.name}, ${key.slice(0, PREFIX_LENGTH)}, ${hashSecret(key)},
            ${input.expiresAt ?? null})
    returning ${sql(COLUMNS)}`;
  return { key, record: record! };
}

/** The key record for a presented secret, whatever its state; callers check `isKeyUsable`. */
export async function findApiKey(sql: Sql, key: string): Promise<ApiKeyRecord | undefined> {
  const [row] = await sql<ApiKeyRecord[]>`
    select ${sql(COLUMNS)} from api_keys where key_hash = ${hashSecret(key)}`;
  return row;
}

export function isKeyUsable(record: ApiKeyRecord, now: Date): boolean {
  return record.revokedAt === null && (record.expiresAt === null || record.expiresAt > now);
}

export async function listApiKeys(sql: Sql, userId: string): Promise<ApiKeyRecord[]> {
  return sql<ApiKeyRecord[]>`
    select ${sql(COLUMNS)} from api_keys where user_id = ${userId} order by created_at, id`;
}

/** Revokes one of the user's keys; false when the user has no such key. */
export async function revokeApiKey(sql: Sql, userId: string, id: string): Promise<boolean> {
  const rows = await sql`
    update api_keys set revoked_at = coalesce(revoked_at, now())
    where id = ${id} and user_id = ${userId} returning id`;
  return rows.length > 0;
}

export async function touchApiKey(sql: Sql, id: string): Promise<void> {
  await sql`update api_keys set last_used_at = now() where id = ${id}`;
}

const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * Records that a key was used, at most once a minute per key (a write per request would cost
 * more than the request). Fire and forget: a failed write never fails the request.
 */
export function noteKeyUse(sql: Sql, record: ApiKeyRecord, now: Date): void {
  if (record.lastUsedAt && now.getTime() - record.lastUsedAt.getTime() < LAST_USED_RESOLUTION_MS) return;
  record.lastUsedAt = now;
  touchApiKey(sql, record.id).catch(() => {});
}

/**
 * Creates a key unless the user already holds `maxActive` usable keys, or `admit` (asked last:
 * a creation budget it may spend) says no. One transaction holding a lock per user, so that
 * concurrent creations cannot pass the cap together.
 */
export async function createApiKeyWithin(
  sql: Pool,
  input: { userId: string; name: string; expiresAt?: Date | null },
  limits: { maxActive: number; admit: () => Promise<boolean> },
): Promise<{ key: string; record: ApiKeyRecord } | 'too_many_active' | 'not_admitted'> {
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtext('api_keys'), hashtext(${input.userId}))`;
    const [row] = await tx<{ active: number }[]>`
      select count(*)::int as active from api_keys
      where user_id = ${input.userId} and revoked_at is null and (expires_at is null or expires_at > now())`;
    if ((row?.active ?? 0) >= limits.maxActive) return 'too_many_active' as const;
    if (!(await limits.admit())) return 'not_admitted' as const;
    return createApiKey(tx, input);
  });
}
