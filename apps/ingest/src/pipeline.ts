import type { StoredEvent } from '@trackhouse/clickhouse';
import {
  ApiError,
  isApiKeyShaped,
  secondsUntil,
  startOfNextUtcMonth,
  toClickHouseDateTime,
  utcDayKey,
  utcMonthKey,
  uuidv7,
} from '@trackhouse/core';
import {
  classifyChannel,
  type createUserAgentParser,
  type createVisitorIds,
  type Geo,
  headerHost,
  isHostOfDomain,
  parseQuery,
  storedReferrer,
} from '@trackhouse/enrich';
import type { RateLimiter, RateLimitResult, Stores } from '@trackhouse/limits';
import { isKeyUsable } from '@trackhouse/postgres';
import type { EventType, TrackPayload } from './schemas';
import type { IngestDirectory, TrackedSite } from './sites';

const SESSION_TIMEOUT_MS = 30 * 60 * 1000;
const newSessionId = () => uuidv7();
const QUOTA_TTL_S = 40 * 86_400;

export interface PipelineDeps {
  directory: IngestDirectory;
  stores: Stores;
  trackLimiter: RateLimiter;
  geo: Geo;
  parseUserAgent: ReturnType<typeof createUserAgentParser>;
  visitorId: ReturnType<typeof createVisitorIds>;
  /** Server default for sites whose own limit is null; 0 = unlimited. */
  monthlyPageviewLimit: number;
  rateLimitMessage: string;
  writerFull: () => boolean;
}

/** What the transport knows about the request, apart from the body. */
export interface RequestInfo {
  clientIp: string;
  userAgent: string;
  origin: string | undefined;
  referer: string | undefined;
  /** The key from Authorization: Bearer, or from the body's api_key. */
  apiKey: string | undefined;
}

export interface Credentials {
  keyId: string;
  userId: string;
  rateLimit: RateLimitResult;
}

/** One row of the events table. */
export type EventRow = StoredEvent;

/**
 * A row as one JSONEachRow line. Empty strings, zeros and an empty map are left out: the table's
 * defaults are the same values, and the line is shorter to write, fsync and parse.
 */
export function serializeRow(row: Pick<EventRow, 'site_id'> & Partial<EventRow>): string {
  let line = `{"site_id":${row.site_id}`;
  for (const key of ROW_COLUMNS) {
    const value = row[key];
    if (value === undefined || value === '' || value === 0) continue;
    if (typeof value === 'object') {
      let empty = true;
      for (const _ in value) {
        empty = false;
        break;
      }
      if (empty) continue;
      line += `,"${key}":${JSON.stringify(value)}`;
    } else if (typeof value === 'number') {
      line += `,"${key}":${value}`;
    } else {
      line += `,"${key}":${NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`}`;
    }
  }
  return `${line}}\n`;
}

/** Characters JSON must escape; most values have none and are quoted as they are. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what must be escaped
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** Every column after site_id, in table order: a fixed list iterates faster than the object's keys. */
const ROW_COLUMNS = [
  'timestamp',
  'event_id',
  'type',
  'event_name',
  'properties',
  'props',
  'session_id',
  'user_id',
  'identified_user_id',
  'pathname',
  'querystring',
  'hostname',
  'page_title',
  'referrer',
  'channel',
  'utm_source',
  'utm_medium',
  'utm_campaign',
  'utm_term',
  'utm_content',
  'browser',
  'browser_version',
  'operating_system',
  'operating_system_version',
  'device_type',
  'language',
  'country',
  'region',
  'city',
  'lat',
  'lon',
  'screen_width',
  'screen_height',
] as const satisfies readonly Exclude<keyof StoredEvent, 'site_id'>[];

export type Outcome =
  | { kind: 'store'; row: EventRow }
  | { kind: 'skip'; reason: 'excluded_ip' | 'excluded_country' | 'outbound_disabled' };

/** Step 3: properties must be a JSON object; returns it, or throws INVALID_PROPERTIES. */
export function parseProperties(text: string | undefined): Record<string, unknown> {
  if (text === undefined || text === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ApiError('INVALID_PROPERTIES', 'JSON parsing error', {
      formErrors: ['properties is not valid JSON'],
    });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ApiError('INVALID_PROPERTIES', 'JSON parsing error', {
      formErrors: ['properties must be a JSON object'],
    });
  }
  return value as Record<string, unknown>;
}

export async function loadSite(deps: PipelineDeps, siteId: number): Promise<TrackedSite> {
  const site = await deps.directory.site(siteId);
  if (!site) throw new ApiError('SITE_NOT_FOUND', 'Site not found');
  return site;
}

/** Step 5 (key part): a usable key; the rate limit is counted once per request. */
export async function authenticate(deps: PipelineDeps, key: string, now: Date): Promise<Credentials> {
  const record = isApiKeyShaped(key) ? await deps.directory.apiKey(key) : undefined;
  if (!record || !isKeyUsable(record, now)) throw new ApiError('INVALID_API_KEY', 'Invalid API key');
  deps.directory.keyUsed(record, now);
  const rateLimit = await deps.trackLimiter.hit(record.id, now.getTime());
  if (!rateLimit.allowed) {
    throw new ApiError('RATE_LIMITED', deps.rateLimitMessage, undefined, {
      'Retry-After': String(rateLimit.resetSeconds),
      ...rateLimitHeaders(rateLimit),
    });
  }
  return { keyId: record.id, userId: record.userId, rateLimit };
}

export function rateLimitHeaders(r: RateLimitResult): Record<string, string> {
  return {
    'RateLimit-Limit': String(r.limit),
    'RateLimit-Remaining': String(r.remaining),
    'RateLimit-Reset': String(r.resetSeconds),
  };
}

export async function authorizeSite(
  deps: PipelineDeps,
  creds: Credentials,
  site: TrackedSite,
): Promise<void> {
  const role = await deps.directory.role(site.record.organizationId, creds.userId);
  if (!role) throw new ApiError('ACCESS_DENIED', 'Access denied');
}

/** Step 6: what a keyless (browser) request must pass. */
export function checkAnonymous(
  deps: PipelineDeps,
  site: TrackedSite,
  userAgent: string,
  info: RequestInfo,
): void {
  if (site.record.blockBots && deps.parseUserAgent(userAgent).isBot)
    throw new ApiError('BOT_DETECTED', 'Bot detected');
  const source = info.origin ?? info.referer;
  if (source === undefined) return;
  const host = headerHost(source);
  if (!host || !isHostOfDomain(host, site.record.domain)) {
    throw new ApiError('DOMAIN_MISMATCH', `Origin does not match the site's domain`);
  }
}

/**
 * Steps 7–9 for one validated event of a known site whose credentials passed: exclusions,
 * quota, enrichment, identity and session. Returns the row to store, or why it is skipped.
 */
export async function processEvent(
  deps: PipelineDeps,
  site: TrackedSite,
  payload: TrackPayload,
  properties: Record<string, unknown>,
  info: RequestInfo,
  at: { now: Date; timestamp?: Date; eventId?: string },
): Promise<Outcome> {
  const ip = payload.ip_address ?? info.clientIp;
  const userAgent = payload.user_agent ?? info.userAgent;
  const record = site.record;
  const location = deps.geo.lookup(ip);
  if (ip && site.isExcludedIp(ip)) return { kind: 'skip', reason: 'excluded_ip' };
  if (location.country && site.excludedCountries.has(location.country))
    return { kind: 'skip', reason: 'excluded_country' };
  if (payload.type === 'outbound' && !record.trackOutbound)
    return { kind: 'skip', reason: 'outbound_disabled' };

  await consumeQuota(deps, site, payload.type, at.now);

  const ua = deps.parseUserAgent(userAgent, payload.screenWidth);
  const hostname = payload.hostname ?? '';
  const sentReferrer = payload.referrer ?? '';
  const referrerHost = sentReferrer ? headerHost(sentReferrer) : undefined;
  const referrer = storedReferrer(sentReferrer, hostname, record.domain, referrerHost);
  const querystring = payload.querystring ?? '';
  const { utm, params } = parseQuery(querystring);
  const userId = deps.visitorId({
    siteId: record.siteId,
    ip,
    userAgent,
    saltDay: record.saltUserIds ? utcDayKey(at.now) : undefined,
  });
  const sessionId = await deps.stores.sessions.touch(
    `${record.siteId}:${userId}`,
    newSessionId,
    SESSION_TIMEOUT_MS,
  );

  const props: Record<string, string> = {};
  for (const [k, v] of Object.entries(properties)) props[k] = typeof v === 'string' ? v : JSON.stringify(v);

  return {
    kind: 'store',
    row: {
      site_id: record.siteId,
      timestamp: toClickHouseDateTime(at.timestamp ?? at.now),
      event_id: at.eventId ?? uuidv7(),
      type: payload.type,
      event_name: payload.type === 'pageview' ? '' : (payload.event_name ?? ''),
      properties: JSON.stringify(properties),
      props,
      session_id: sessionId,
      user_id: userId,
      identified_user_id: payload.user_id ?? '',
      pathname: payload.pathname ?? '',
      querystring: record.trackUrlParams ? querystring : '',
      hostname,
      page_title: payload.page_title ?? '',
      referrer,
      channel: classifyChannel({ referrer, referrerHost: referrer ? referrerHost : '', utm, params }),
      utm_source: utm.source,
      utm_medium: utm.medium,
      utm_campaign: utm.campaign,
      utm_term: utm.term,
      utm_content: utm.content,
      browser: ua.browser,
      browser_version: ua.browser_version,
      operating_system: ua.operating_system,
      operating_system_version: ua.operating_system_version,
      device_type: ua.device_type,
      language: payload.language ?? '',
      country: location.country,
      region: location.region,
      city: location.city,
      lat: location.lat,
      lon: location.lon,
      screen_width: payload.screenWidth ?? 0,
      screen_height: payload.screenHeight ?? 0,
    },
  };
}

/**
 * Step 8, with step 10's bound checked first so a pageview is never counted and then refused.
 * Pageviews are counted; other events only check that the site is under its limit.
 */
async function consumeQuota(
  deps: PipelineDeps,
  site: TrackedSite,
  type: EventType,
  now: Date,
): Promise<void> {
  if (deps.writerFull()) throw overloaded();
  const limit = site.record.monthlyPageviewLimit ?? deps.monthlyPageviewLimit;
  if (limit === 0 && type !== 'pageview') return;
  const key = `${site.record.siteId}:${utcMonthKey(now)}`;
  const result = await deps.stores.quota.consume(key, limit, type === 'pageview' ? 1 : 0, QUOTA_TTL_S);
  if (!result.allowed) {
    throw new ApiError('OVER_MONTHLY_LIMIT', 'Over monthly limit', undefined, {
      'Retry-After': String(secondsUntil(startOfNextUtcMonth(now), now)),
    });
  }
}

export function overloaded(): ApiError {
  return new ApiError('OVERLOADED', 'Ingest buffer is full, retry later', undefined, { 'Retry-After': '5' });
}
