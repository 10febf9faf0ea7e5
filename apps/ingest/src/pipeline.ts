import { type StoredEvent, WEB_VITALS } from '@trackhouse/clickhouse';
import {
  ApiError,
  isApiKeyShaped,
  parseStorableJson,
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
  type Location,
  parseQuery,
  storedReferrer,
} from '@trackhouse/enrich';
import { type RateLimiter, type RateLimitResult, rateLimited, type Stores } from '@trackhouse/limits';
import { isKeyUsable, type SiteConfig } from '@trackhouse/postgres';
import { checkAutocaptureProperties } from './autocapture';
import { isBackdated, SESSION_TIMEOUT_MS } from './backdated';
import type { EventType, TrackPayload } from './schemas';
import type { IngestDirectory, TrackedSite } from './sites';

const newSessionId = () => uuidv7();
const QUOTA_TTL_S = 40 * 86_400;
/** Client event ids are remembered this long; a replay within it is stored once. */
const EVENT_ID_MEMORY_MS = 8 * 86_400_000;

export interface PipelineDeps {
  directory: IngestDirectory;
  stores: Stores;
  trackLimiter: RateLimiter;
  /** Keyless tracking per (site, client address). */
  anonymousLimiter: RateLimiter;
  anonymousLimitMessage: string;
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
  // A vital of 0 (a page without layout shifts) is a measurement, not a default: kept.
  if (row.type === 'performance') {
    for (const vital of WEB_VITALS) {
      const value = row[vital];
      if (typeof value === 'number') line += `,"${vital}":${value}`;
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

export type SkipReason = 'excluded_ip' | 'excluded_country' | `${EventType}_disabled`;

export type Outcome = { kind: 'store'; row: EventRow } | { kind: 'skip'; reason: SkipReason };

/** The site setting that turns each optional event type on. */
const FEATURE_OF: Partial<Record<EventType, keyof SiteConfig>> = {
  outbound: 'trackOutbound',
  error: 'trackErrors',
  performance: 'webVitals',
  button_click: 'trackButtonClicks',
  copy: 'trackCopy',
  form_submit: 'trackFormInteractions',
  input_change: 'trackFormInteractions',
};

/** Step 7's exclusions: the site's excluded addresses and countries. */
export function excludedBy(
  site: TrackedSite,
  ip: string,
  location: Location,
): 'excluded_ip' | 'excluded_country' | undefined {
  if (ip && site.isExcludedIp(ip)) return 'excluded_ip';
  if (location.country && site.excludedCountries.has(location.country)) return 'excluded_country';
  return undefined;
}

/** True when the site's configuration turns this event type off. */
export function isTypeDisabled(site: TrackedSite, type: EventType): boolean {
  const feature = FEATURE_OF[type];
  return feature !== undefined && site.record[feature] === false;
}

/** Step 3 for one event: its properties, with the bounds of autocaptured ones checked. */
export function eventProperties(payload: Pick<TrackPayload, 'type' | 'properties'>): Record<string, unknown> {
  const properties = parseProperties(payload.properties);
  checkAutocaptureProperties(payload.type, properties);
  return properties;
}

/** Step 3: properties must be a JSON object; returns it (storable), or throws INVALID_PROPERTIES. */
export function parseProperties(text: string | undefined): Record<string, unknown> {
  if (text === undefined || text === '') return {};
  let value: unknown;
  try {
    value = parseStorableJson(text);
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
  if (!rateLimit.allowed) throw rateLimited(rateLimit, deps.rateLimitMessage);
  return { keyId: record.id, userId: record.userId, rateLimit };
}

export async function authorizeSite(
  deps: PipelineDeps,
  creds: Credentials,
  site: TrackedSite,
): Promise<void> {
  const role = await deps.directory.role(site.record.organizationId, creds.userId);
  if (!role) throw new ApiError('ACCESS_DENIED', 'Access denied');
}

/**
 * Step 6: what a keyless (browser) request must pass. First a budget per site and client
 * address (the connection's, or the proxy's X-Forwarded-For entry; never the body's
 * `ip_address`, which the sender chooses), so one script cannot spend a site's monthly quota.
 */
export async function checkAnonymous(
  deps: PipelineDeps,
  site: TrackedSite,
  userAgent: string,
  info: RequestInfo,
  nowMs: number,
): Promise<void> {
  const budget = await deps.anonymousLimiter.hit(`${site.record.siteId}:${info.clientIp}`, nowMs);
  if (!budget.allowed) throw rateLimited(budget, deps.anonymousLimitMessage);
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
  const exclusion = excludedBy(site, ip, location);
  if (exclusion) return { kind: 'skip', reason: exclusion };
  if (isTypeDisabled(site, payload.type)) return { kind: 'skip', reason: `${payload.type}_disabled` };

  await consumeQuota(deps, site, payload.type, at.now);
  try {
    return {
      kind: 'store',
      row: await buildRow(deps, site, payload, properties, { ip, userAgent, location }, at),
    };
  } catch (err) {
    // Counted but not stored: a retry must find the quota as it was.
    if (payload.type === 'pageview') {
      await deps.stores.quota.consume(quotaKey(record.siteId, at.now), 0, -1, QUOTA_TTL_S).catch(() => {});
    }
    throw err;
  }
}

/** The anonymous visitor id (SPEC section 6), daily rotating for sites with `saltUserIds`. */
export function visitorIdOf(
  deps: PipelineDeps,
  site: TrackedSite,
  ip: string,
  userAgent: string,
  now: Date,
): string {
  const record = site.record;
  return deps.visitorId({
    siteId: record.siteId,
    ip,
    userAgent,
    saltDay: record.saltUserIds ? utcDayKey(now) : undefined,
  });
}

/** The visitor's live session (created or extended): every event type, and replay batches. */
export function touchSession(deps: PipelineDeps, siteId: number, userId: string): Promise<string> {
  return deps.stores.sessions.touch(`${siteId}:${userId}`, newSessionId, SESSION_TIMEOUT_MS);
}

/** Step 9: enrichment, identity and session of an event that passed every check. */
async function buildRow(
  deps: PipelineDeps,
  site: TrackedSite,
  payload: TrackPayload,
  properties: Record<string, unknown>,
  { ip, userAgent, location }: { ip: string; userAgent: string; location: Location },
  at: { now: Date; timestamp?: Date; eventId?: string },
): Promise<EventRow> {
  const record = site.record;
  const ua = deps.parseUserAgent(userAgent, payload.screenWidth);
  const hostname = payload.hostname ?? '';
  const sentReferrer = payload.referrer ?? '';
  const referrerHost = sentReferrer ? headerHost(sentReferrer) : undefined;
  const referrer = storedReferrer(sentReferrer, hostname, record.domain, referrerHost);
  const querystring = payload.querystring ?? '';
  const { utm, params } = parseQuery(querystring);
  const userId = visitorIdOf(deps, site, ip, userAgent, at.now);
  // A backdated event gets its session from its batch (assignBackdatedSessions), not from the
  // visitor's live session, which it would otherwise extend across days.
  const sessionId = isBackdated(at.timestamp, at.now) ? '' : await touchSession(deps, record.siteId, userId);

  const props: Record<string, string> = {};
  for (const [k, v] of Object.entries(properties)) props[k] = typeof v === 'string' ? v : JSON.stringify(v);

  return {
    site_id: record.siteId,
    timestamp: toClickHouseDateTime(at.timestamp ?? at.now),
    event_id: at.eventId ?? uuidv7(),
    type: payload.type,
    event_name: eventName(payload),
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
    ...(payload.type === 'performance' ? vitalsOf(payload) : {}),
  };
}

/** Pageviews have no name; web-vitals reports are named as the browser client names them. */
function eventName(payload: TrackPayload): string {
  if (payload.type === 'pageview') return '';
  return payload.event_name ?? (payload.type === 'performance' ? 'web-vitals' : '');
}

function vitalsOf(payload: TrackPayload): Pick<EventRow, (typeof WEB_VITALS)[number]> {
  return { lcp: payload.lcp, cls: payload.cls, inp: payload.inp, fcp: payload.fcp, ttfb: payload.ttfb };
}

const quotaKey = (siteId: number, now: Date) => `${siteId}:${utcMonthKey(now)}`;

/**
 * Step 8, with step 10's bound checked first so a pageview is never counted and then refused
 * (the writer reports itself full while its disk fails, too). Pageviews are counted; other
 * events only check that the site is under its limit.
 */
async function consumeQuota(
  deps: PipelineDeps,
  site: TrackedSite,
  type: EventType,
  now: Date,
): Promise<void> {
  if (deps.writerFull()) throw overloaded();
  await chargeMonthlyQuota(deps, site, type === 'pageview' ? 1 : 0, now);
}

/**
 * Counts `amount` pageviews against the site's monthly limit (0: checks that it is under it),
 * or throws 429 OVER_MONTHLY_LIMIT.
 */
export async function chargeMonthlyQuota(
  deps: PipelineDeps,
  site: TrackedSite,
  amount: number,
  now: Date,
): Promise<void> {
  const limit = site.record.monthlyPageviewLimit ?? deps.monthlyPageviewLimit;
  if (limit === 0 && amount === 0) return;
  const result = await deps.stores.quota.consume(
    quotaKey(site.record.siteId, now),
    limit,
    amount,
    QUOTA_TTL_S,
  );
  if (!result.allowed) {
    throw new ApiError('OVER_MONTHLY_LIMIT', 'Over monthly limit', undefined, {
      'Retry-After': String(secondsUntil(startOfNextUtcMonth(now), now)),
    });
  }
}

/**
 * Gives back what rows that were counted but not stored took from their sites' monthly quotas
 * (the write failed after counting). Best effort: a failure here is logged by the caller.
 */
export async function refundQuota(deps: PipelineDeps, rows: readonly EventRow[], now: Date): Promise<void> {
  const perSite = new Map<number, number>();
  for (const r of rows) if (r.type === 'pageview') perSite.set(r.site_id, (perSite.get(r.site_id) ?? 0) + 1);
  await Promise.all(
    [...perSite].map(([siteId, n]) => deps.stores.quota.consume(quotaKey(siteId, now), 0, -n, QUOTA_TTL_S)),
  );
}

/**
 * Claims a client-chosen event id for a site, so a retried request stores its event once.
 * Returns the claim to release if the event ends up not stored, or `duplicate` when the id was
 * claimed before.
 */
export async function claimEventId(
  deps: PipelineDeps,
  siteId: number,
  eventId: string,
): Promise<{ claim: string } | 'duplicate'> {
  const claim = `${siteId}:${eventId.toLowerCase()}`;
  return (await deps.stores.once.claim(claim, EVENT_ID_MEMORY_MS)) ? { claim } : 'duplicate';
}

export function overloaded(): ApiError {
  return new ApiError('OVERLOADED', 'Ingest buffer is full, retry later', undefined, { 'Retry-After': '5' });
}
