import { recordId } from '@trackhouse/core';
import type { Sql } from '../database';

export interface SiteConfig {
  public: boolean;
  saltUserIds: boolean;
  blockBots: boolean;
  excludedIPs: string[];
  excludedCountries: string[];
  trackOutbound: boolean;
  trackUrlParams: boolean;
  monthlyPageviewLimit: number | null;
  /** Browser-client features (the tracking config); ingest refuses the types of those off. */
  trackErrors: boolean;
  webVitals: boolean;
  sessionReplay: boolean;
  trackButtonClicks: boolean;
  trackCopy: boolean;
  trackFormInteractions: boolean;
  /** Read by browser scripts only: the server cannot tell a first pageview from a later one. */
  trackInitialPageView: boolean;
  trackSpaNavigation: boolean;
}

export interface SiteRecord extends SiteConfig {
  siteId: number;
  id: string;
  organizationId: string;
  name: string;
  domain: string;
  createdBy: string | null;
  createdAt: Date;
  updatedAt: Date;
  privateLinkKey: string | null;
}

/** SiteConfig field → column; the only names that reach SQL as identifiers. */
const CONFIG_COLUMNS = {
  public: 'public',
  saltUserIds: 'salt_user_ids',
  blockBots: 'block_bots',
  excludedIPs: 'excluded_ips',
  excludedCountries: 'excluded_countries',
  trackOutbound: 'track_outbound',
  trackUrlParams: 'track_url_params',
  monthlyPageviewLimit: 'monthly_pageview_limit',
  trackErrors: 'track_errors',
  webVitals: 'web_vitals',
  sessionReplay: 'session_replay',
  trackButtonClicks: 'track_button_clicks',
  trackCopy: 'track_copy',
  trackFormInteractions: 'track_form_interactions',
  trackInitialPageView: 'track_initial_page_view',
  trackSpaNavigation: 'track_spa_navigation',
} as const satisfies Record<keyof SiteConfig, string>;

export const SITE_CONFIG_KEYS = Object.keys(CONFIG_COLUMNS) as (keyof SiteConfig)[];

const select = (sql: Sql) => sql`
  select site_id, id, organization_id, name, domain, created_by, created_at, updated_at, public,
         salt_user_ids, block_bots, excluded_ips as "excludedIPs", excluded_countries,
         track_outbound, track_url_params, monthly_pageview_limit, private_link_key, track_errors,
         web_vitals, session_replay, track_button_clicks, track_copy, track_form_interactions,
         track_initial_page_view, track_spa_navigation
  from sites`;

function toColumns(config: Partial<SiteConfig>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of SITE_CONFIG_KEYS) {
    if (config[key] !== undefined) out[CONFIG_COLUMNS[key]] = config[key];
  }
  return out;
}

export async function createSite(
  sql: Sql,
  input: {
    organizationId: string;
    name: string;
    domain: string;
    createdBy: string | null;
  } & Partial<SiteConfig>,
): Promise<SiteRecord> {
  const values = {
    id: recordId(),
    organization_id: input.organizationId,
    name: input.name,
    domain: input.domain,
    created_by: input.createdBy,
    ...toColumns(input),
  };
  const [row] = await sql<{ siteId: number }[]>`
    insert into sites ${sql(values as Record<string, string>, Object.keys(values) as (keyof typeof values)[])}
    returning site_id`;
  return (await getSite(sql, row!.siteId))!;
}

export async function getSite(sql: Sql, siteId: number): Promise<SiteRecord | undefined> {
  const [row] = await sql<SiteRecord[]>`${select(sql)} where site_id = ${siteId}`;
  return row;
}

export async function listSites(sql: Sql, organizationId?: string): Promise<SiteRecord[]> {
  return organizationId === undefined
    ? sql<SiteRecord[]>`${select(sql)} order by site_id`
    : sql<SiteRecord[]>`${select(sql)} where organization_id = ${organizationId} order by site_id`;
}

export async function findSiteByDomain(
  sql: Sql,
  organizationId: string,
  domain: string,
): Promise<SiteRecord | undefined> {
  const [row] = await sql<SiteRecord[]>`
    ${select(sql)} where organization_id = ${organizationId} and lower(domain) = lower(${domain})
    order by site_id limit 1`;
  return row;
}

/** What a site is called, apart from its config: changed by the same update. */
export interface SiteNaming {
  name: string;
  domain: string;
}

export async function updateSiteConfig(
  sql: Sql,
  siteId: number,
  config: Partial<SiteConfig & SiteNaming>,
): Promise<SiteRecord | undefined> {
  const columns = toColumns(config);
  if (config.name !== undefined) columns.name = config.name;
  if (config.domain !== undefined) columns.domain = config.domain;
  if (Object.keys(columns).length > 0) {
    await sql`
      update sites set ${sql(columns as Record<string, string>, Object.keys(columns))}, updated_at = now()
      where site_id = ${siteId}`;
  }
  return getSite(sql, siteId);
}

export async function setPrivateLinkKey(sql: Sql, siteId: number, key: string | null): Promise<boolean> {
  const rows = await sql`
    update sites set private_link_key = ${key}, updated_at = now() where site_id = ${siteId} returning site_id`;
  return rows.length > 0;
}

/** Deletes the site; its goals go with it (foreign key cascade). */
export async function deleteSite(sql: Sql, siteId: number): Promise<boolean> {
  const rows = await sql`delete from sites where site_id = ${siteId} returning site_id`;
  return rows.length > 0;
}
