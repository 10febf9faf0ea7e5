import { timingSafeEqual } from 'node:crypto';
import { ApiError, bearerToken, clientAddress, isApiKeyShaped } from '@trackhouse/core';
import { type RateLimiter, type RateLimitResult, rateLimited, rateLimitHeaders } from '@trackhouse/limits';
import {
  findApiKey,
  getRole,
  getSite,
  isKeyUsable,
  noteKeyUse,
  type Role,
  type SiteRecord,
  type Sql,
} from '@trackhouse/postgres';
import type { Context } from 'hono';

export interface Caller {
  keyId: string;
  userId: string;
  /** The presented key's expiry: keys it creates expire no later (docs/decisions.md). */
  keyExpiresAt: Date | null;
}

/** A sliding-window budget and the 429 message naming it. */
export interface Budget {
  limiter: RateLimiter;
  message: string;
}

/** What a request may do with a site: a member's role, or a read-only viewer (public or private link). */
export interface SiteAccess {
  site: SiteRecord;
  role: Role | undefined;
}

export type Need = 'read' | 'member' | 'admin';

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Throws the 429 of SPEC section 5 when over budget; else sets the RateLimit headers. */
function enforce(c: Context, limit: RateLimitResult, message: string): void {
  if (!limit.allowed) throw rateLimited(limit, message);
  for (const [k, v] of Object.entries(rateLimitHeaders(limit))) c.header(k, v);
}

/**
 * SPEC section 4: user-scoped keys, organization roles, public sites and private link keys;
 * the query service's per-key rate limit (section 5), and a budget per client address for the
 * reads that need no key.
 */
export class Authorizer {
  constructor(
    private readonly sql: Sql,
    private readonly perKey: Budget,
    private readonly perAddress: Budget & { trustedProxyHops: number },
  ) {}

  /** The caller of a request with a Bearer key (validated and rate-limited), else undefined. */
  async caller(c: Context): Promise<Caller | undefined> {
    const key = bearerToken(c);
    if (key === undefined) return undefined;
    const record = isApiKeyShaped(key) ? await findApiKey(this.sql, key) : undefined;
    const now = new Date();
    if (!record || !isKeyUsable(record, now)) throw new ApiError('INVALID_API_KEY', 'Invalid API key');
    noteKeyUse(this.sql, record, now);
    enforce(c, await this.perKey.limiter.hit(record.id, Date.now()), this.perKey.message);
    return { keyId: record.id, userId: record.userId, keyExpiresAt: record.expiresAt };
  }

  /** A read without a key (public site or private link), counted per client address. */
  private async viewer(c: Context, site: SiteRecord): Promise<SiteAccess> {
    const address = clientAddress(c, this.perAddress.trustedProxyHops);
    enforce(c, await this.perAddress.limiter.hit(address, Date.now()), this.perAddress.message);
    return { site, role: undefined };
  }

  async requireCaller(c: Context): Promise<Caller> {
    const caller = await this.caller(c);
    if (!caller) throw new ApiError('MISSING_API_KEY', 'API key required');
    return caller;
  }

  /** Role of the caller in an organization, or 403 when not a member (or short of `need`). */
  async orgRole(caller: Caller, organizationId: string, need: Exclude<Need, 'read'>): Promise<Role> {
    const role = await getRole(this.sql, organizationId, caller.userId);
    if (!role) throw new ApiError('ACCESS_DENIED', 'Access denied');
    if (need === 'admin' && role === 'member')
      throw new ApiError('FORBIDDEN_ROLE', 'This action needs the admin or owner role');
    return role;
  }

  async site(c: Context, siteId: number, need: Need): Promise<SiteAccess> {
    const site = await getSite(this.sql, siteId);
    if (!site) throw new ApiError('SITE_NOT_FOUND', 'Site not found');
    const caller = await this.caller(c);
    const viewer = need === 'read' && (site.public || this.privateLinkMatches(c, site));
    if (caller) {
      const role = await getRole(this.sql, site.organizationId, caller.userId);
      if (role) {
        if (need === 'admin' && role === 'member') {
          throw new ApiError('FORBIDDEN_ROLE', 'This action needs the admin or owner role');
        }
        return { site, role };
      }
      if (viewer) return { site, role: undefined };
      throw new ApiError('ACCESS_DENIED', 'Access denied');
    }
    if (viewer) return this.viewer(c, site);
    throw new ApiError('MISSING_API_KEY', 'API key required');
  }

  private privateLinkMatches(c: Context, site: SiteRecord): boolean {
    const presented = c.req.header('x-private-key');
    return Boolean(presented && site.privateLinkKey && sameSecret(presented, site.privateLinkKey));
  }
}
