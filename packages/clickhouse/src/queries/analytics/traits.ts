import type { ClickHouse } from '../../client';
import { Params } from '../builder';
import { EVENT_ORDER } from './shared';

/**
 * User profiles as identify calls left them (docs/decisions.md "User profiles, traits and
 * replays"): per identified user and trait the latest value wins (ties in the same millisecond
 * by the greater JSON text), and a trait whose latest value is JSON `null` is gone.
 */

/**
 * The merged profiles of a site as rows `(iid, trait, value)`, `value` the JSON text, removed
 * traits left out; `where` narrows the rows read (conditions on `identified_user_id`, `trait`).
 */
export function mergedProfiles(p: Params, siteId: number, where: string[] = []): string {
  return `SELECT identified_user_id AS iid, trait, argMax(value, (updated_at, value)) AS v
    FROM user_profiles
    WHERE ${[`site_id = ${p.bind('UInt32', siteId)}`, ...where].join(' AND ')}
    GROUP BY iid, trait
    HAVING v != 'null'`;
}

/** A trait's value as text: a JSON string decoded, any other JSON value as its JSON text. */
export const TRAIT_TEXT = `if(JSONType(v) = 'String', JSONExtractString(v), v)`;

/** Which identified user an anonymous visitor is now, as rows `(au, alias)`: the latest call wins. */
export function currentAliases(p: Params, siteId: number, where: string[] = []): string {
  return `SELECT user_id AS au, argMax(identified_user_id, (updated_at, identified_user_id)) AS alias
    FROM user_aliases
    WHERE ${[`site_id = ${p.bind('UInt32', siteId)}`, ...where].join(' AND ')}
    GROUP BY au`;
}

export type Traits = Record<string, unknown>;

/** The merged traits of each identified id given (an id without a profile is absent). */
export async function getTraits(ch: ClickHouse, siteId: number, ids: string[]): Promise<Map<string, Traits>> {
  const wanted = [...new Set(ids.filter((id) => id !== ''))];
  const out = new Map<string, Traits>();
  if (wanted.length === 0) return out;
  const p = new Params();
  const rows = await ch.query<{ iid: string; trait: string; v: string }>(
    `${mergedProfiles(p, siteId, [`identified_user_id IN ${p.bind('Array(String)', wanted)}`])}
     ORDER BY iid, trait`,
    p.values,
  );
  for (const r of rows) {
    const traits = out.get(r.iid) ?? {};
    traits[r.trait] = JSON.parse(r.v);
    out.set(r.iid, traits);
  }
  return out;
}

/** The current alias (identified id) of each anonymous id given that has one. */
export async function getAliases(
  ch: ClickHouse,
  siteId: number,
  userIds: string[],
): Promise<Map<string, string>> {
  if (userIds.length === 0) return new Map();
  const p = new Params();
  const rows = await ch.query<{ au: string; alias: string }>(
    currentAliases(p, siteId, [`user_id IN ${p.bind('Array(String)', [...new Set(userIds)])}`]),
    p.values,
  );
  return new Map(rows.map((r) => [r.au, r.alias]));
}

/** The anonymous ids whose current alias is one of `ids`, each with that alias. */
export async function aliasedVisitors(
  ch: ClickHouse,
  siteId: number,
  ids: string[],
): Promise<{ au: string; alias: string }[]> {
  if (ids.length === 0) return [];
  const p = new Params();
  const list = p.bind('Array(String)', ids);
  // Visitors ever aliased to one of the ids first (a narrow read), then their latest alias.
  return ch.query<{ au: string; alias: string }>(
    `SELECT au, alias FROM (${currentAliases(p, siteId, [
      `user_id IN (SELECT user_id FROM user_aliases WHERE site_id = ${p.bind('UInt32', siteId)} AND identified_user_id IN ${list})`,
    ])}) WHERE alias IN ${list}`,
    p.values,
  );
}

export interface TraitKey {
  key: string;
  userCount: number;
}

/** Every trait key of the site's profiles with how many users have it, most users first. */
export async function listTraitKeys(ch: ClickHouse, siteId: number): Promise<TraitKey[]> {
  const p = new Params();
  return ch.query<TraitKey>(
    `SELECT trait AS key, count() AS userCount FROM (${mergedProfiles(p, siteId)})
     GROUP BY key ORDER BY userCount DESC, key ASC`,
    p.values,
  );
}

export interface Paged {
  limit: number;
  offset: number;
}

/** The values of one trait (as text) with how many users have each, most users first, paged. */
export async function listTraitValues(
  ch: ClickHouse,
  siteId: number,
  key: string,
  page: Paged,
): Promise<{ values: { value: string; userCount: number }[]; total: number; hasMore: boolean }> {
  const p = new Params();
  const source = `SELECT ${TRAIT_TEXT} AS value FROM (${mergedProfiles(p, siteId, [`trait = ${p.bind('String', key)}`])})`;
  const [values, [count]] = await Promise.all([
    ch.query<{ value: string; userCount: number }>(
      `SELECT value, count() AS userCount FROM (${source})
       GROUP BY value ORDER BY userCount DESC, value ASC
       LIMIT ${p.bind('UInt32', page.limit)} OFFSET ${p.bind('UInt32', page.offset)}`,
      p.values,
    ),
    ch.query<{ total: number }>(`SELECT uniqExact(value) AS total FROM (${source})`, p.values),
  ]);
  const total = count?.total ?? 0;
  return { values, total, hasMore: page.offset + page.limit < total };
}

/** Identified ids whose merged profile has `key` with the text `value`, in id order, paged. */
export async function usersWithTrait(
  ch: ClickHouse,
  siteId: number,
  key: string,
  value: string,
  page: Paged,
): Promise<{ ids: string[]; total: number }> {
  const p = new Params();
  const source = `SELECT iid FROM (${mergedProfiles(p, siteId, [`trait = ${p.bind('String', key)}`])})
    WHERE ${TRAIT_TEXT} = ${p.bind('String', value)}`;
  const [rows, [count]] = await Promise.all([
    ch.query<{ iid: string }>(
      `${source} ORDER BY iid LIMIT ${p.bind('UInt32', page.limit)} OFFSET ${p.bind('UInt32', page.offset)}`,
      p.values,
    ),
    ch.query<{ total: number }>(`SELECT count() AS total FROM (${source})`, p.values),
  ]);
  return { ids: rows.map((r) => r.iid), total: count?.total ?? 0 };
}

/** A user of the trait-value list: the profile, and a summary of the user's events of all time. */
export interface TraitUser {
  user_id: string;
  identified_user_id: string;
  traits: Traits;
  country: string;
  region: string;
  city: string;
  browser: string;
  operating_system: string;
  device_type: string;
  sessions: number;
}

const SUMMARY_FIELDS = [
  'user_id',
  'country',
  'region',
  'city',
  'browser',
  'operating_system',
  'device_type',
] as const;

/**
 * `user-traits/users`: the identified users with `key` = `value` (text), in id order, paged.
 * A user's events are those carrying the identified id, and those without one of the visitors
 * whose current alias it is; fields from the latest of them ("" and 0 without events).
 */
export async function listTraitUsers(
  ch: ClickHouse,
  siteId: number,
  key: string,
  value: string,
  page: Paged,
): Promise<{ users: TraitUser[]; total: number; hasMore: boolean }> {
  const { ids, total } = await usersWithTrait(ch, siteId, key, value, page);
  const hasMore = page.offset + page.limit < total;
  if (ids.length === 0) return { users: [], total, hasMore };
  const [aliased, traits] = await Promise.all([aliasedVisitors(ch, siteId, ids), getTraits(ch, siteId, ids)]);
  const p = new Params();
  const list = p.bind('Array(String)', ids);
  const anons = p.bind(
    'Array(String)',
    aliased.map((a) => a.au),
  );
  const aliases = p.bind(
    'Array(String)',
    aliased.map((a) => a.alias),
  );
  type Row = { k: string; s_sessions: number } & Record<`s_${(typeof SUMMARY_FIELDS)[number]}`, string>;
  const rows = await ch.query<Row>(
    `SELECT if(identified_user_id != '', identified_user_id, transform(user_id, ${anons}, ${aliases}, '')) AS k,
       ${SUMMARY_FIELDS.map((f) => `argMax(${f}, ${EVENT_ORDER}) AS s_${f}`).join(', ')},
       uniqExact(session_id) AS s_sessions
     FROM events
     WHERE site_id = ${p.bind('UInt32', siteId)}
       AND (identified_user_id IN ${list} OR (identified_user_id = '' AND user_id IN ${anons}))
     GROUP BY k`,
    p.values,
  );
  const byId = new Map(rows.map((r) => [r.k, r]));
  const users = ids.map((id): TraitUser => {
    const r = byId.get(id);
    return {
      user_id: r?.s_user_id ?? '',
      identified_user_id: id,
      traits: traits.get(id) ?? {},
      country: r?.s_country ?? '',
      region: r?.s_region ?? '',
      city: r?.s_city ?? '',
      browser: r?.s_browser ?? '',
      operating_system: r?.s_operating_system ?? '',
      device_type: r?.s_device_type ?? '',
      sessions: r?.s_sessions ?? 0,
    };
  });
  return { users, total, hasMore };
}
