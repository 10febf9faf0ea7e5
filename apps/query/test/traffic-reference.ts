import type { CommonParams, Filter, StoredEvent } from '@trackhouse/clickhouse';
import { compareEvents, inRange, selectEvents } from './reference';

/**
 * Brute-force answers of SPEC 13 over generated events, written from the spec's definitions
 * (not from the queries): events in range, counted sessions, session metrics over a session's
 * events in range, buckets found with the platform's own time-zone data.
 */

const iso = (ts: string) => `${ts.replace(' ', 'T')}Z`;
const ms = (e: StoredEvent) => Date.parse(iso(e.timestamp));

/** Rounded as the API rounds: from integers, halves up. */
export const ratio = (num: number, den: number) => (den === 0 ? 0 : Math.round((num * 100) / den) / 100);

/** Byte order of UTF-8 text (ClickHouse's order of strings). */
export const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

function group<T>(items: T[], key: (t: T) => string): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const i of items) {
    const k = key(i);
    const list = m.get(k);
    if (list) list.push(i);
    else m.set(k, [i]);
  }
  return m;
}

/** What every SPEC 13 answer of one site, range and filter set is built from. */
export interface Selection {
  /** Events in range matching every filter. */
  selected: StoredEvent[];
  selectedSet: Set<StoredEvent>;
  /** Counted sessions: their events in range, filters not applied, in event order. */
  sessions: Map<string, StoredEvent[]>;
}

export function selection(all: StoredEvent[], siteId: number, c: CommonParams): Selection {
  const selected = selectEvents(all, siteId, c);
  const counted = new Set(selected.map((e) => e.session_id));
  const ranged = all.filter((e) => inRange(e, siteId, c) && counted.has(e.session_id));
  const sessions = group(ranged, (e) => e.session_id);
  for (const list of sessions.values()) list.sort(compareEvents);
  return { selected, selectedSet: new Set(selected), sessions };
}

const pageviewCount = (events: StoredEvent[]) => events.filter((e) => e.type === 'pageview').length;
const durationMs = (events: StoredEvent[]) => ms(events.at(-1)!) - ms(events[0]!);

function averages(sessions: StoredEvent[][]) {
  const n = sessions.length;
  return {
    pages_per_session: ratio(
      sessions.reduce((s, e) => s + pageviewCount(e), 0),
      n,
    ),
    bounce_rate: ratio(sessions.filter((e) => pageviewCount(e) === 1).length * 100, n),
    session_duration: ratio(
      sessions.reduce((s, e) => s + durationMs(e), 0),
      n * 1000,
    ),
  };
}

export function overview(s: Selection) {
  return {
    sessions: s.sessions.size,
    pageviews: s.selected.filter((e) => e.type === 'pageview').length,
    users: new Set(s.selected.map((e) => e.user_id)).size,
    ...averages([...s.sessions.values()]),
  };
}

// ---- time zones -------------------------------------------------------------------------

const formats = new Map<string, Intl.DateTimeFormat>();
const offsets = new Map<string, number>();

/**
 * Offset of local time from UTC at an instant, in ms, from the platform's time-zone data.
 * Offsets change only at instants that are whole quarter hours in UTC, so one lookup per quarter
 * hour serves every instant in it.
 */
function offsetAt(at: number, timeZone: string): number {
  const quarter = Math.floor(at / 900_000) * 900_000;
  const key = `${timeZone} ${quarter}`;
  const known = offsets.get(key);
  if (known !== undefined) return known;
  let f = formats.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formats.set(timeZone, f);
  }
  const p = Object.fromEntries(f.formatToParts(new Date(quarter)).map((x) => [x.type, Number(x.value)]));
  const offset = Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!) - quarter;
  offsets.set(key, offset);
  return offset;
}

const shiftDate = (date: string, days: number) =>
  new Date(Date.parse(date) + days * 86_400_000).toISOString().slice(0, 10);

/** The instant of local midnight starting `date`. */
export function localMidnight(date: string, timeZone: string): number {
  const guess = Date.parse(`${date}T00:00:00Z`);
  let t = guess - offsetAt(guess, timeZone);
  t = guess - offsetAt(t, timeZone);
  return t;
}

function localDate(at: number, timeZone: string): string {
  return new Date(at + offsetAt(at, timeZone)).toISOString().slice(0, 10);
}

export type Bucket = 'minute' | 'five_minutes' | 'fifteen_minutes' | 'hour' | 'day' | 'week' | 'month';
const FIXED: Partial<Record<Bucket, number>> = {
  minute: 60_000,
  five_minutes: 300_000,
  fifteen_minutes: 900_000,
  hour: 3_600_000,
};

/** Calendar date of the local bucket start for day, week (Monday) and month buckets. */
function bucketDate(date: string, bucket: Bucket): string {
  if (bucket === 'week') {
    const weekday = (new Date(`${date}T00:00:00Z`).getUTCDay() + 6) % 7; // Monday = 0
    return shiftDate(date, -weekday);
  }
  return bucket === 'month' ? `${date.slice(0, 8)}01` : date;
}

/** Start instant of the bucket holding `at`, aligned in local time. */
export function bucketStart(at: number, bucket: Bucket, timeZone: string): number {
  const size = FIXED[bucket];
  if (size) {
    const off = offsetAt(at, timeZone);
    return Math.floor((at + off) / size) * size - off;
  }
  return localMidnight(bucketDate(localDate(at, timeZone), bucket), timeZone);
}

/** Every bucket start from the bucket of `first` to the bucket of `last`, both included. */
export function bucketsBetween(first: number, last: number, bucket: Bucket, timeZone: string): number[] {
  const out = new Set<number>();
  if (FIXED[bucket]) {
    // Every minute: each bucket of any size holds whole minutes.
    for (let t = bucketStart(first, bucket, timeZone); t <= last; t += 60_000)
      out.add(bucketStart(t, bucket, timeZone));
  } else {
    const end = localDate(last, timeZone);
    for (let d = localDate(first, timeZone); d <= end; d = shiftDate(d, 1))
      out.add(localMidnight(bucketDate(d, bucket), timeZone));
  }
  return [...out].sort((a, b) => a - b);
}

export function overviewBucketed(s: Selection, c: CommonParams, bucket: Bucket, now: number) {
  const tz = c.timeZone;
  const starts = [...s.sessions.values()].map((e) => ms(e[0]!));
  const first = c.startDate ? localMidnight(c.startDate, tz) : Math.min(...starts);
  const last = c.endDate
    ? localMidnight(shiftDate(c.endDate, 1), tz) - 1
    : Math.max(now, ...s.selected.map(ms), ...starts);
  if (!c.startDate && starts.length === 0) return [];
  const byBucket = group(s.selected, (e) => String(bucketStart(ms(e), bucket, tz)));
  const sessionsByBucket = group([...s.sessions.values()], (e) => String(bucketStart(ms(e[0]!), bucket, tz)));
  return bucketsBetween(first, last, bucket, tz).map((b) => {
    const events = byBucket.get(String(b)) ?? [];
    const sessions = sessionsByBucket.get(String(b)) ?? [];
    return {
      time: new Date(b).toISOString(),
      pageviews: events.filter((e) => e.type === 'pageview').length,
      sessions: sessions.length,
      users: new Set(events.map((e) => e.user_id)).size,
      ...averages(sessions),
    };
  });
}

// ---- metric -----------------------------------------------------------------------------

const SESSION_ATTRIBUTES = new Set([
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
  'country',
  'region',
  'city',
  'language',
]);

interface Tally {
  sessions: Set<string>;
  /** Sessions' pageviews, pageviews or custom events: what the item's `pageviews`/`count` counts. */
  events: number;
  bounces: Set<string>;
  gaps: number[];
}

/** Milliseconds from events[i] to the next event of its session, undefined for the last. */
const gapAfter = (events: StoredEvent[], i: number) =>
  i + 1 < events.length ? ms(events[i + 1]!) - ms(events[i]!) : undefined;

export function metric(s: Selection, parameter: Exclude<Filter['parameter'], 'user_id'>) {
  const tallies = new Map<string, Tally>();
  const tally = (value: string) => {
    let t = tallies.get(value);
    if (!t) {
      t = { sessions: new Set(), events: 0, bounces: new Set(), gaps: [] };
      tallies.set(value, t);
    }
    return t;
  };
  let allEvents = 0;
  for (const [id, events] of s.sessions) {
    const bounce = pageviewCount(events) === 1;
    const count = (t: Tally, gap: number | undefined) => {
      t.sessions.add(id);
      if (bounce) t.bounces.add(id);
      if (gap !== undefined) t.gaps.push(gap);
    };
    if (SESSION_ATTRIBUTES.has(parameter) || parameter === 'entry_page' || parameter === 'exit_page') {
      const pages = events.flatMap((e, i) => (e.type === 'pageview' ? [i] : []));
      const at = parameter === 'entry_page' ? pages[0] : parameter === 'exit_page' ? pages.at(-1) : 0;
      const value =
        at === undefined
          ? ''
          : parameter.endsWith('_page')
            ? events[at]!.pathname
            : String(events[0]![parameter as keyof StoredEvent]);
      const t = tally(value);
      count(t, at === undefined || !parameter.endsWith('_page') ? undefined : gapAfter(events, at));
      t.events += pageviewCount(events);
      allEvents += pageviewCount(events);
      continue;
    }
    const type = parameter === 'event_name' ? 'custom_event' : 'pageview';
    events.forEach((e, i) => {
      if (e.type !== type || !s.selectedSet.has(e)) return;
      const t = tally(String(e[parameter as keyof StoredEvent]));
      count(t, parameter === 'pathname' ? gapAfter(events, i) : undefined);
      t.events++;
      allEvents++;
    });
  }
  const isEvent = parameter === 'event_name';
  const timed = parameter === 'pathname' || parameter === 'entry_page' || parameter === 'exit_page';
  const items = [...tallies]
    .filter(([value]) => value !== '')
    .map(([value, t]) => {
      const count = isEvent ? t.events : t.sessions.size;
      return {
        value,
        count,
        percentage: ratio(count * 100, isEvent ? allEvents : s.sessions.size),
        pageviews: isEvent ? 0 : t.events,
        pageviews_percentage: isEvent ? 0 : ratio(t.events * 100, allEvents),
        bounce_rate: ratio(t.bounces.size * 100, t.sessions.size),
        ...(timed
          ? {
              time_on_page_seconds: ratio(
                t.gaps.reduce((a, b) => a + b, 0),
                t.gaps.length * 1000,
              ),
            }
          : {}),
      };
    })
    .sort((a, b) => b.count - a.count || byteOrder(a.value, b.value));
  return { data: items, totalCount: items.length };
}

// ---- sessions and users -----------------------------------------------------------------

/** A session's fields over the given events (in event order). */
export function sessionRecord(id: string, events: StoredEvent[]) {
  const first = events[0]!;
  const pages = events.filter((e) => e.type === 'pageview');
  const identified = events.filter((e) => e.identified_user_id !== '').at(-1);
  return {
    session_id: id,
    user_id: first.user_id,
    identified_user_id: identified?.identified_user_id ?? '',
    country: first.country,
    region: first.region,
    city: first.city,
    language: first.language,
    browser: first.browser,
    operating_system: first.operating_system,
    device_type: first.device_type,
    hostname: first.hostname,
    entry_page: pages[0]?.pathname ?? '',
    exit_page: pages.at(-1)?.pathname ?? '',
    pageviews: pages.length,
    events: events.length,
    session_duration: durationMs(events) / 1000,
    session_start: iso(first.timestamp),
    session_end: iso(events.at(-1)!.timestamp),
    referrer: first.referrer,
    channel: first.channel,
    utm_source: first.utm_source,
    utm_medium: first.utm_medium,
    utm_campaign: first.utm_campaign,
  };
}

/** Counted sessions, newest start first, ties by id. */
export function sessions(s: Selection) {
  return [...s.sessions]
    .map(([id, events]) => sessionRecord(id, events))
    .sort((a, b) =>
      a.session_start !== b.session_start
        ? a.session_start < b.session_start
          ? 1
          : -1
        : byteOrder(a.session_id, b.session_id),
    );
}

/** A session over all its events, and those events in order (as the API answers events). */
export function sessionDetail(all: StoredEvent[], siteId: number, sessionId: string) {
  const events = all.filter((e) => e.site_id === siteId && e.session_id === sessionId).sort(compareEvents);
  return events.length === 0
    ? undefined
    : { session: sessionRecord(sessionId, events), events: events.map(apiEvent) };
}

/** A stored row as SPEC 10's Event. */
export function apiEvent(e: StoredEvent) {
  return {
    timestamp: iso(e.timestamp),
    type: e.type,
    event_name: e.event_name,
    properties: e.properties,
    session_id: e.session_id,
    user_id: e.user_id,
    identified_user_id: e.identified_user_id,
    pathname: e.pathname,
    querystring: e.querystring,
    hostname: e.hostname,
    page_title: e.page_title,
    referrer: e.referrer,
    browser: e.browser,
    browser_version: e.browser_version,
    operating_system: e.operating_system,
    operating_system_version: e.operating_system_version,
    language: e.language,
    country: e.country,
    region: e.region,
    city: e.city,
    lat: e.lat,
    lon: e.lon,
    screen_width: e.screen_width,
    screen_height: e.screen_height,
    device_type: e.device_type,
    channel: e.channel,
    event_id: e.event_id,
  };
}

function userRecord(events: StoredEvent[]) {
  const sorted = [...events].sort(compareEvents);
  const latest = sorted.at(-1)!;
  const identified = sorted.filter((e) => e.identified_user_id !== '').at(-1);
  return {
    user_id: latest.user_id,
    identified_user_id: identified?.identified_user_id ?? '',
    sessions: new Set(sorted.map((e) => e.session_id)).size,
    pageviews: pageviewCount(sorted),
    events: sorted.length,
    first_seen: iso(sorted[0]!.timestamp),
    last_seen: iso(latest.timestamp),
    country: latest.country,
    region: latest.region,
    city: latest.city,
    browser: latest.browser,
    operating_system: latest.operating_system,
    device_type: latest.device_type,
    language: latest.language,
    // No identify calls in these data: no profile.
    traits: {},
  };
}

export type UserSort = 'last_seen' | 'first_seen' | 'sessions' | 'pageviews' | 'events';

/** One item per anonymous id among the selected events, ranked by `sort` then id ascending. */
export function users(s: Selection, sort: UserSort, order: 'asc' | 'desc') {
  const list = [...group(s.selected, (e) => e.user_id).values()].map(userRecord);
  const sign = order === 'asc' ? 1 : -1;
  return list
    .sort((a, b) => {
      const x = a[sort];
      const y = b[sort];
      const byKey = typeof x === 'number' ? x - (y as number) : x < y ? -1 : x > y ? 1 : 0;
      return byKey !== 0 ? sign * byKey : byteOrder(a.user_id, b.user_id);
    })
    .map(({ region: _r, city: _c, language: _l, ...listed }) => listed);
}

/** Every event of all time whose anonymous or identified id is `userId`. */
export function userDetail(all: StoredEvent[], siteId: number, userId: string) {
  const events = all.filter(
    (e) => e.site_id === siteId && (e.user_id === userId || e.identified_user_id === userId),
  );
  return events.length === 0 ? undefined : userRecord(events);
}
