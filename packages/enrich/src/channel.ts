import lists from '../data/channels.json' with { type: 'json' };

export const CHANNELS = [
  'Direct',
  'Organic Search',
  'Paid Search',
  'Organic Social',
  'Paid Social',
  'Organic Video',
  'Paid Video',
  'Email',
  'SMS',
  'AI',
  'Display',
  'Affiliate',
  'Referral',
  'Unknown',
] as const;
export type Channel = (typeof CHANNELS)[number];

type Family = 'email' | 'ai' | 'video' | 'social' | 'search';
const FAMILIES = lists.families as Family[];
const SOURCES = lists.sources as Record<Family, string[]>;
const mediums = Object.fromEntries(Object.entries(lists.mediums).map(([k, v]) => [k, new Set(v)])) as Record<
  keyof typeof lists.mediums,
  Set<string>
>;
const SEARCH_CLICK_IDS = lists.clickIds.search;
const SOCIAL_CLICK_IDS = lists.clickIds.social;

const familyCache = new Map<string, Family | undefined>();

/** The source family of a host or utm_source value, by the rules in data/channels.json. */
export function sourceFamily(value: string): Family | undefined {
  if (familyCache.has(value)) return familyCache.get(value);
  const family = findFamily(value);
  // Hosts and sources repeat; the cache is bounded by clearing it when it grows large.
  if (familyCache.size >= 10_000) familyCache.clear();
  familyCache.set(value, family);
  return family;
}

function findFamily(value: string): Family | undefined {
  const host = value
    .trim()
    .toLowerCase()
    .replace(/^www\./, '');
  if (!host) return undefined;
  const labels = host.split('.');
  const inner = labels.length > 1 ? labels.slice(0, -1) : labels;
  for (const family of FAMILIES) {
    for (const entry of SOURCES[family]) {
      const matches = entry.includes('.')
        ? host === entry || host.endsWith(`.${entry}`)
        : inner.includes(entry);
      if (matches) return family;
    }
  }
  return undefined;
}

export interface ChannelInput {
  /** Stored referrer (already "" for self-referrals). */
  referrer: string;
  /** Its host, when the caller parsed it already. */
  referrerHost?: string | undefined;
  utm: { source: string; medium: string };
  /** Query parameter names present on the landing URL (click ids). */
  params: ReadonlySet<string>;
}

function hostOfReferrer(referrer: string): string {
  if (!referrer) return '';
  try {
    return new URL(referrer).hostname;
  } catch {
    return '';
  }
}

export function classifyChannel({ referrer, referrerHost, utm, params }: ChannelInput): Channel {
  const medium = utm.medium.trim().toLowerCase();
  const source = utm.source.trim().toLowerCase();
  const host = referrerHost ?? hostOfReferrer(referrer);
  const family = (source && sourceFamily(source)) || (host ? sourceFamily(host) : undefined);
  const searchClick = SEARCH_CLICK_IDS.some((id) => params.has(id));
  const socialClick = SOCIAL_CLICK_IDS.some((id) => params.has(id));
  const paid = mediums.paid.has(medium) || searchClick || socialClick;

  if (mediums.email.has(medium) || family === 'email') return 'Email';
  if (mediums.sms.has(medium)) return 'SMS';
  if (mediums.affiliate.has(medium)) return 'Affiliate';
  if (family === 'ai') return 'AI';
  if (paid) {
    if (mediums.display.has(medium)) return 'Display';
    if (family === 'search' || mediums.paidSearch.has(medium) || searchClick) return 'Paid Search';
    if (family === 'social' || mediums.paidSocial.has(medium) || socialClick) return 'Paid Social';
    if (family === 'video' || mediums.paidVideo.has(medium)) return 'Paid Video';
    return 'Unknown';
  }
  if (family === 'search' || mediums.organic.has(medium)) return 'Organic Search';
  if (family === 'social' || mediums.social.has(medium)) return 'Organic Social';
  if (family === 'video' || mediums.video.has(medium)) return 'Organic Video';
  if (!host && !source && !medium) return 'Direct';
  if (host) return 'Referral';
  return 'Unknown';
}
