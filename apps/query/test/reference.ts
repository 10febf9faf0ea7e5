import type { CommonParams, Filter, GoalDefinition, StoredEvent } from '@trackhouse/clickhouse';

/** Brute-force answers over generated events, to compare the query service against. */

const dayFormats = new Map<string, Intl.DateTimeFormat>();
const days = new Map<string, string>();
function localDay(timestamp: string, timeZone: string): string {
  // Local dates change only at whole quarter hours (UTC): one lookup per quarter hour.
  const ms = Date.parse(`${timestamp.replace(' ', 'T')}Z`);
  const key = `${timeZone} ${Math.floor(ms / 900_000)}`;
  const known = days.get(key);
  if (known !== undefined) return known;
  let f = dayFormats.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' });
    dayFormats.set(timeZone, f);
  }
  const day = f.format(new Date(ms));
  days.set(key, day);
  return day;
}

/** ClickHouse orders UUIDs by their last 8 bytes, then their first 8. */
function uuidKey(id: string): string {
  const h = id.replace(/-/g, '');
  return h.slice(16) + h.slice(0, 16);
}

export function compareEvents(a: StoredEvent, b: StoredEvent): number {
  if (a.timestamp !== b.timestamp) return a.timestamp < b.timestamp ? -1 : 1;
  const x = uuidKey(a.event_id);
  const y = uuidKey(b.event_id);
  return x < y ? -1 : x > y ? 1 : 0;
}

function matches(value: string, f: Pick<Filter, 'type' | 'value'>): boolean {
  const positive = f.type.replace(/^not_/, '');
  const hit =
    positive === 'equals'
      ? f.value.includes(value)
      : positive === 'contains'
        ? f.value.some((v) => value.toLowerCase().includes(v.toLowerCase()))
        : f.value.some((v) => new RegExp(v).test(value));
  return f.type.startsWith('not_') ? !hit : hit;
}

export function inRange(e: StoredEvent, siteId: number, c: CommonParams): boolean {
  if (e.site_id !== siteId) return false;
  const day = localDay(e.timestamp, c.timeZone);
  return (!c.startDate || day >= c.startDate) && (!c.endDate || day <= c.endDate);
}

export function selectEvents(all: StoredEvent[], siteId: number, c: CommonParams): StoredEvent[] {
  const ranged = all.filter((e) => inRange(e, siteId, c));
  const sessionPages = new Map<string, StoredEvent[]>();
  for (const e of ranged) {
    if (e.type !== 'pageview') continue;
    const list = sessionPages.get(e.session_id) ?? [];
    list.push(e);
    sessionPages.set(e.session_id, list);
  }
  for (const list of sessionPages.values()) list.sort(compareEvents);
  return ranged.filter((e) =>
    c.filters.every((f) => {
      if (f.parameter === 'user_id') {
        const positive = { type: f.type.replace(/^not_/, '') as Filter['type'], value: f.value };
        const hit = matches(e.user_id, positive) || matches(e.identified_user_id, positive);
        return f.type.startsWith('not_') ? !hit : hit;
      }
      if (f.parameter === 'entry_page' || f.parameter === 'exit_page') {
        const pages = sessionPages.get(e.session_id);
        if (!pages?.length) return false;
        const page = f.parameter === 'entry_page' ? pages[0]! : pages.at(-1)!;
        return matches(page.pathname, f);
      }
      return matches(String(e[f.parameter]), f);
    }),
  );
}

function pathRegex(pattern: string): RegExp {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === '*' && pattern[i + 1] === '*') {
      if (out.endsWith('/') && (i + 2 === pattern.length || pattern[i + 2] === '/')) {
        out = `${out.slice(0, -1)}(?:/.*)?`;
        i += 2;
        if (pattern[i] === '/') out += '/';
        continue;
      }
      out += '.*';
      i++;
    } else if (ch === '*') out += '[^/]+';
    else out += ch.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${out}$`);
}

export function convertsGoal(e: StoredEvent, goal: GoalDefinition): boolean {
  if (goal.goalType === 'path')
    return e.type === 'pageview' && pathRegex(goal.config.pathPattern).test(e.pathname);
  if (e.type !== 'custom_event' || e.event_name !== goal.config.eventName) return false;
  const { eventPropertyKey: key, eventPropertyValue: value } = goal.config;
  if (key === undefined || value === undefined) return true;
  const actual = (JSON.parse(e.properties) as Record<string, unknown>)[key];
  return typeof value === 'number' ? typeof actual === 'number' && actual === value : actual === value;
}

export function goalStats(events: StoredEvent[], goal: GoalDefinition) {
  const sessions = new Set(events.map((e) => e.session_id));
  const converted = new Set(events.filter((e) => convertsGoal(e, goal)).map((e) => e.session_id));
  return {
    total_sessions: sessions.size,
    total_conversions: converted.size,
    conversion_rate: sessions.size === 0 ? 0 : converted.size / sessions.size,
  };
}

const iso = (ts: string) => `${ts.replace(' ', 'T')}Z`;

export function goalSessions(events: StoredEvent[], goal: GoalDefinition) {
  const bySession = new Map<string, StoredEvent[]>();
  for (const e of events) {
    const list = bySession.get(e.session_id) ?? [];
    list.push(e);
    bySession.set(e.session_id, list);
  }
  const out = [];
  for (const [sessionId, list] of bySession) {
    if (!list.some((e) => convertsGoal(e, goal))) continue;
    list.sort(compareEvents);
    const first = list[0]!;
    const last = list.at(-1)!;
    const pages = list.filter((e) => e.type === 'pageview');
    const start = Date.parse(iso(first.timestamp));
    const end = Date.parse(iso(last.timestamp));
    out.push({
      session_id: sessionId,
      user_id: first.user_id,
      country: first.country,
      browser: first.browser,
      operating_system: first.operating_system,
      device_type: first.device_type,
      entry_page: pages[0]?.pathname ?? '',
      exit_page: pages.at(-1)?.pathname ?? '',
      pageviews: pages.length,
      session_duration: Math.floor((end - start) / 1000),
      session_start: iso(first.timestamp),
      session_end: iso(last.timestamp),
      referrer: first.referrer,
      channel: first.channel,
    });
  }
  return out.sort((a, b) =>
    a.session_end !== b.session_end
      ? a.session_end < b.session_end
        ? 1
        : -1
      : a.session_id < b.session_id
        ? -1
        : 1,
  );
}

export function countBy<T>(items: T[], key: (t: T) => string): Map<string, number> {
  const m = new Map<string, number>();
  for (const i of items) m.set(key(i), (m.get(key(i)) ?? 0) + 1);
  return m;
}
