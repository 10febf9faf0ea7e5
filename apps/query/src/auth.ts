import { timingSafeEqual } from 'node:crypto';
import { ApiError, bearerToken, isApiKeyShaped } from '@trackhouse/core';
import type { RateLimiter } from '@trackhouse/limits';
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

/**
 * SPEC section 4: user-scoped keys, organization roles, public sites and private link keys,
 * and the query service's per-key rate limit.
 */
export class Authorizer {
  constructor(
    private readonly sql: Sql,
    private readonly limiter: RateLimiter,
    private readonly rateLimitMessage: string,
  ) {}

  /** The caller of a request with a Bearer key (validated and rate-limited), else undefined. */
  async caller(c: Context): Promise<Caller | undefined> {
    const key = bearerToken(c);
    if (key === undefined) return undefined;
    const record = isApiKeyShaped(key) ? await findApiKey(this.sql, key) : undefined;
    const now = new Date();
    if (!record || !isKeyUsable(record, now)) throw new ApiError('INVALID_API_KEY', 'Invalid API key');
    noteKeyUse(this.sql, record, now);
    const limit = await this.limiter.hit(record.id, Date.now());
    const headers = {
      'RateLimit-Limit': String(limit.limit),
      'RateLimit-Remaining': String(limit.remaining),
      'RateLimit-Reset': String(limit.resetSeconds),
    };
    if (!limit.allowed) {
      throw new ApiError('RATE_LIMITED', this.rateLimitMessage, undefined, {
        'Retry-After': String(limit.resetSeconds),
        ...headers,
      });
    }
    for (const [k, v] of Object.entries(headers)) c.header(k, v);
    return { keyId: record.id, userId: record.userId };
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
    if (viewer) return { site, role: undefined };
    throw new ApiError('MISSING_API_KEY', 'API key required');
  }

  private privateLinkMatches(c: Context, site: SiteRecord): boolean {
    const presented = c.req.header('x-private-key');
    return Boolean(presented && site.privateLinkKey && sameSecret(presented, site.privateLinkKey));
  }
}
