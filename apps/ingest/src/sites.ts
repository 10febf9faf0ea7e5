import { createIpMatcher } from '@trackhouse/enrich';
import type { ConfigChannel } from '@trackhouse/limits';
import {
  type ApiKeyRecord,
  findApiKey,
  getRole,
  getSite,
  noteKeyUse,
  type Role,
  type SiteRecord,
  type Sql,
} from '@trackhouse/postgres';
import { TtlCache } from './ttl-cache';

export interface TrackedSite {
  record: SiteRecord;
  isExcludedIp: (ip: string) => boolean;
  excludedCountries: ReadonlySet<string>;
}

/** Site configuration and credentials as the ingest hot path sees them. */
export interface IngestDirectory {
  site(siteId: number): Promise<TrackedSite | undefined>;
  apiKey(key: string): Promise<ApiKeyRecord | undefined>;
  role(organizationId: string, userId: string): Promise<Role | undefined>;
  /** Records a key's use (last_used_at, at most once a minute per key). */
  keyUsed(record: ApiKeyRecord, now: Date): void;
  close(): Promise<void>;
}

/**
 * Everything is cached for at most `ttlMs` (2 s by default, the spec's bound for config changes
 * to reach every replica); the config-change channel drops a site's entry at once.
 */
export async function createIngestDirectory(
  sql: Sql,
  channel: ConfigChannel,
  ttlMs = 2_000,
): Promise<IngestDirectory> {
  const sites = new TtlCache<number, TrackedSite | undefined>(ttlMs, async (siteId) => {
    const record = await getSite(sql, siteId);
    if (!record) return undefined;
    return {
      record,
      isExcludedIp: createIpMatcher(record.excludedIPs),
      excludedCountries: new Set(record.excludedCountries.map((c) => c.toUpperCase())),
    };
  });
  const keys = new TtlCache<string, ApiKeyRecord | undefined>(ttlMs, (key) => findApiKey(sql, key));
  const roles = new TtlCache<string, Role | undefined>(ttlMs, (k) => {
    const [org = '', user = ''] = k.split('\u0000');
    return getRole(sql, org, user);
  });
  const unsubscribe = await channel.subscribe((siteId) => sites.delete(siteId));
  return {
    site: (siteId) => sites.get(siteId),
    apiKey: (key) => keys.get(key),
    role: (org, user) => roles.get(`${org}\u0000${user}`),
    keyUsed: (record, now) => noteKeyUse(sql, record, now),
    close: unsubscribe,
  };
}
