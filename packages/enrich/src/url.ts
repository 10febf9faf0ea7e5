export interface Utm {
  source: string;
  medium: string;
  campaign: string;
  term: string;
  content: string;
}

export interface ParsedQuery {
  utm: Utm;
  /** Names of every parameter present (click ids). */
  params: Set<string>;
}

/** UTM values and parameter names from a querystring, with or without its leading `?`. */
export function parseQuery(querystring: string): ParsedQuery {
  const utm: Utm = { source: '', medium: '', campaign: '', term: '', content: '' };
  const params = new Set<string>();
  if (!querystring) return { utm, params };
  let search: URLSearchParams;
  try {
    search = new URLSearchParams(querystring.startsWith('?') ? querystring.slice(1) : querystring);
  } catch {
    return { utm, params };
  }
  for (const [rawKey, value] of search) {
    const key = rawKey.toLowerCase();
    params.add(key);
    if (key.startsWith('utm_')) {
      const field = key.slice(4) as keyof Utm;
      if (field in utm && !utm[field]) utm[field] = value.slice(0, 255);
    }
  }
  return { utm, params };
}

function hostOf(url: string): string | undefined {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return undefined;
  }
}

/** `host` is `domain` or one of its subdomains. */
export function isHostOfDomain(host: string, domain: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  const d = domain.toLowerCase().replace(/\.$/, '');
  return h === d || h.endsWith(`.${d}`);
}

/**
 * The referrer as stored: "" for a self-referral (its host is the event's hostname, or the site
 * domain or a subdomain of it), else unchanged.
 */
export function storedReferrer(
  referrer: string,
  hostname: string,
  siteDomain: string,
  parsedHost?: string,
): string {
  if (!referrer) return '';
  const host = parsedHost ?? hostOf(referrer);
  if (host === undefined) return referrer;
  if ((hostname && host === hostname.toLowerCase()) || isHostOfDomain(host, siteDomain)) return '';
  return referrer;
}

/** Host of an Origin or Referer header value; undefined when it is not a URL. */
export function headerHost(value: string): string | undefined {
  return hostOf(value);
}
