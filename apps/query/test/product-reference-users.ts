import type { CommonParams, StoredEvent } from '@trackhouse/clickhouse';
import { compareEvents, selectEvents } from './reference';
import {
  byteOrder,
  localMidnight,
  selection,
  users as trafficUsers,
  type UserSort,
} from './traffic-reference';

/**
 * Brute-force answers for user profiles, traits and replays, from the rows as inserted and the
 * definitions in docs/decisions.md ("User profiles, traits and replays"), not from the queries.
 */

/** A row of `identifies`: traits as key -> JSON text. */
export interface IdentifyRow {
  site_id: number;
  timestamp: string;
  event_id: string;
  user_id: string;
  identified_user_id: string;
  traits: Record<string, string>;
  is_new_identify: boolean;
}

/** A row of `session_replay`. */
export interface ReplayRow {
  site_id: number;
  session_id: string;
  timestamp: string;
  batch_id: string;
  user_id: string;
  identified_user_id: string;
  start_time: string;
  end_time: string;
  event_count: number;
  size: number;
  events: string;
  page_url: string;
  viewport_width: number;
  viewport_height: number;
  language: string;
  retention_days: number;
}

const iso = (ts: string) => `${ts.replace(' ', 'T')}Z`;
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Latest value per identified id and trait (ties: greater JSON text), removed traits left out. */
export function profiles(rows: IdentifyRow[], siteId: number): Map<string, Map<string, string>> {
  const latest = new Map<string, { at: string; v: string }>();
  for (const r of rows) {
    if (r.site_id !== siteId) continue;
    for (const [trait, v] of Object.entries(r.traits)) {
      const key = JSON.stringify([r.identified_user_id, trait]);
      const seen = latest.get(key);
      if (!seen || r.timestamp > seen.at || (r.timestamp === seen.at && byteOrder(v, seen.v) > 0))
        latest.set(key, { at: r.timestamp, v });
    }
  }
  const out = new Map<string, Map<string, string>>();
  for (const [key, { v }] of latest) {
    if (v === 'null') continue;
    const [iid, trait] = JSON.parse(key) as [string, string];
    const profile = out.get(iid) ?? new Map<string, string>();
    profile.set(trait, v);
    out.set(iid, profile);
  }
  return out;
}

/** Current alias of each anonymous id: its latest new identify (ties: greater identified id). */
export function aliases(rows: IdentifyRow[], siteId: number): Map<string, string> {
  const latest = new Map<string, IdentifyRow>();
  for (const r of rows) {
    if (r.site_id !== siteId || !r.is_new_identify) continue;
    const seen = latest.get(r.user_id);
    if (
      !seen ||
      r.timestamp > seen.timestamp ||
      (r.timestamp === seen.timestamp && byteOrder(r.identified_user_id, seen.identified_user_id) > 0)
    )
      latest.set(r.user_id, r);
  }
  return new Map([...latest].map(([u, r]) => [u, r.identified_user_id]));
}

/** A value as the API's text: a JSON string decoded, anything else its JSON text. */
export function traitText(json: string): string {
  const v: unknown = JSON.parse(json);
  return typeof v === 'string' ? v : json;
}

const parsed = (profile: Map<string, string> | undefined) =>
  Object.fromEntries([...(profile ?? [])].map(([k, v]) => [k, JSON.parse(v) as unknown]));

export interface Profiles {
  profiles: Map<string, Map<string, string>>;
  aliases: Map<string, string>;
}

export const profilesOf = (rows: IdentifyRow[], siteId: number): Profiles => ({
  profiles: profiles(rows, siteId),
  aliases: aliases(rows, siteId),
});

export interface Search {
  traitKey?: string;
  traitValue?: string;
  search?: string;
}

/** The users list: SPEC 13's items, the identified id completed by the alias, the profile, narrowed. */
export function usersList(
  all: StoredEvent[],
  p: Profiles,
  siteId: number,
  c: CommonParams,
  sort: UserSort,
  order: 'asc' | 'desc',
  s: Search = {},
) {
  const items = trafficUsers(selection(all, siteId, c), sort, order).map((u) => {
    const iid = u.identified_user_id || (p.aliases.get(u.user_id) ?? '');
    return { ...u, identified_user_id: iid, traits: parsed(p.profiles.get(iid)) };
  });
  return items.filter((u) => {
    const profile = p.profiles.get(u.identified_user_id);
    if (s.traitKey !== undefined) {
      const v = profile?.get(s.traitKey);
      if (v === undefined || traitText(v) !== s.traitValue) return false;
    }
    if (s.search !== undefined) {
      const q = s.search.toLowerCase();
      const texts = [u.user_id, u.identified_user_id, ...[...(profile?.values() ?? [])].map(traitText)];
      if (!texts.some((t) => t.toLowerCase().includes(q))) return false;
    }
    return true;
  });
}

/** The events that make up the user `id` (anonymous id, identified id, or the alias of events without one). */
function userEvents(all: StoredEvent[], p: Profiles, siteId: number, id: string, anonymousToo: boolean) {
  return all
    .filter(
      (e) =>
        e.site_id === siteId &&
        ((anonymousToo && e.user_id === id) ||
          e.identified_user_id === id ||
          (e.identified_user_id === '' && p.aliases.get(e.user_id) === id)),
    )
    .sort(compareEvents);
}

/** `users/:userId`. */
export function userDetail(all: StoredEvent[], p: Profiles, siteId: number, id: string) {
  const events = userEvents(all, p, siteId, id, true);
  const latest = events.at(-1);
  if (!latest) return undefined;
  const iid =
    events.filter((e) => e.identified_user_id !== '').at(-1)?.identified_user_id ??
    p.aliases.get(latest.user_id) ??
    '';
  return {
    user_id: latest.user_id,
    identified_user_id: iid,
    sessions: new Set(events.map((e) => e.session_id)).size,
    pageviews: events.filter((e) => e.type === 'pageview').length,
    events: events.length,
    first_seen: iso(events[0]!.timestamp),
    last_seen: iso(latest.timestamp),
    country: latest.country,
    region: latest.region,
    city: latest.city,
    browser: latest.browser,
    operating_system: latest.operating_system,
    device_type: latest.device_type,
    language: latest.language,
    traits: parsed(p.profiles.get(iid)),
  };
}

const byCountThenText =
  <T extends { userCount: number }>(text: (t: T) => string) =>
  (a: T, b: T) =>
    b.userCount - a.userCount || byteOrder(text(a), text(b));

export function traitKeys(p: Profiles) {
  const counts = new Map<string, number>();
  for (const profile of p.profiles.values())
    for (const k of profile.keys()) counts.set(k, (counts.get(k) ?? 0) + 1);
  return [...counts].map(([key, userCount]) => ({ key, userCount })).sort(byCountThenText((t) => t.key));
}

export function traitValues(p: Profiles, key: string, limit: number, offset: number) {
  const counts = new Map<string, number>();
  for (const profile of p.profiles.values()) {
    const v = profile.get(key);
    if (v !== undefined) counts.set(traitText(v), (counts.get(traitText(v)) ?? 0) + 1);
  }
  const all = [...counts]
    .map(([value, userCount]) => ({ value, userCount }))
    .sort(byCountThenText((t) => t.value));
  return {
    values: all.slice(offset, offset + limit),
    total: all.length,
    hasMore: offset + limit < all.length,
  };
}

export function traitUsers(
  all: StoredEvent[],
  p: Profiles,
  siteId: number,
  key: string,
  value: string,
  limit: number,
  offset: number,
) {
  const ids = [...p.profiles]
    .filter(([, profile]) => {
      const v = profile.get(key);
      return v !== undefined && traitText(v) === value;
    })
    .map(([id]) => id)
    .sort(byteOrder);
  const users = ids.slice(offset, offset + limit).map((id) => {
    const events = userEvents(all, p, siteId, id, false);
    const latest = events.at(-1);
    return {
      user_id: latest?.user_id ?? '',
      identified_user_id: id,
      traits: parsed(p.profiles.get(id)),
      country: latest?.country ?? '',
      region: latest?.region ?? '',
      city: latest?.city ?? '',
      browser: latest?.browser ?? '',
      operating_system: latest?.operating_system ?? '',
      device_type: latest?.device_type ?? '',
      sessions: new Set(events.map((e) => e.session_id)).size,
    };
  });
  return { users, total: ids.length, hasMore: offset + limit < ids.length };
}

// ---- replays -------------------------------------------------------------------------------

const batchOrder = (a: ReplayRow, b: ReplayRow) =>
  cmp(a.start_time, b.start_time) || cmp(a.timestamp, b.timestamp) || byteOrder(a.batch_id, b.batch_id);

const ATTRIBUTES = [
  'country',
  'region',
  'city',
  'browser',
  'browser_version',
  'operating_system',
  'operating_system_version',
  'device_type',
] as const;

/** The attributes of the session's first event ("" without events). */
function sessionAttributes(
  all: StoredEvent[],
  siteId: number,
  sessionId: string,
): Record<(typeof ATTRIBUTES)[number], string> {
  const first = all.filter((e) => e.site_id === siteId && e.session_id === sessionId).sort(compareEvents)[0];
  return Object.fromEntries(ATTRIBUTES.map((a) => [a, first ? String(first[a]) : ''])) as Record<
    (typeof ATTRIBUTES)[number],
    string
  >;
}

function metadata(all: StoredEvent[], siteId: number, sessionId: string, batches: ReplayRow[]) {
  const first = batches[0]!;
  const start = batches.map((b) => b.start_time).sort()[0]!;
  const end = batches
    .map((b) => b.end_time)
    .sort()
    .at(-1)!;
  return {
    session_id: sessionId,
    user_id: first.user_id,
    identified_user_id: batches.filter((b) => b.identified_user_id !== '').at(-1)?.identified_user_id ?? '',
    start_time: iso(start),
    end_time: iso(end),
    duration_ms: Date.parse(iso(end)) - Date.parse(iso(start)),
    page_url: first.page_url,
    event_count: batches.reduce((n, b) => n + b.event_count, 0),
    size: batches.reduce((n, b) => n + b.size, 0),
    viewport_width: first.viewport_width,
    viewport_height: first.viewport_height,
    language: first.language,
    ...sessionAttributes(all, siteId, sessionId),
  };
}

function sessionsOf(rows: ReplayRow[], siteId: number): Map<string, ReplayRow[]> {
  const out = new Map<string, ReplayRow[]>();
  for (const r of rows) {
    if (r.site_id !== siteId) continue;
    out.set(r.session_id, [...(out.get(r.session_id) ?? []), r]);
  }
  for (const list of out.values()) list.sort(batchOrder);
  return out;
}

/** Replays whose first rrweb event is in the range (filters: the session has a matching event in range). */
export function replayList(rows: ReplayRow[], all: StoredEvent[], siteId: number, c: CommonParams) {
  const from = c.startDate ? localMidnight(c.startDate, c.timeZone) : Number.NEGATIVE_INFINITY;
  const to = c.endDate
    ? localMidnight(
        new Date(Date.parse(`${c.endDate}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10),
        c.timeZone,
      )
    : Number.POSITIVE_INFINITY;
  const matching =
    c.filters.length > 0 ? new Set(selectEvents(all, siteId, c).map((e) => e.session_id)) : undefined;
  return [...sessionsOf(rows, siteId)]
    .map(([id, batches]) => metadata(all, siteId, id, batches))
    .filter((m) => {
      const start = Date.parse(m.start_time);
      return start >= from && start < to && (!matching || matching.has(m.session_id));
    })
    .sort((a, b) => cmp(b.start_time, a.start_time) || byteOrder(a.session_id, b.session_id));
}

/** A replay's metadata and all its events in order. */
export function replayOf(rows: ReplayRow[], all: StoredEvent[], siteId: number, sessionId: string) {
  const batches = sessionsOf(rows, siteId).get(sessionId);
  if (!batches) return undefined;
  return {
    metadata: metadata(all, siteId, sessionId, batches),
    events: batches.flatMap((b) => JSON.parse(b.events) as unknown[]),
  };
}
