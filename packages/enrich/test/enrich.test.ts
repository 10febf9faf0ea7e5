import { describe, expect, it } from 'vitest';
import lists from '../data/channels.json' with { type: 'json' };
import {
  CHANNELS,
  classifyChannel,
  createIpMatcher,
  createUserAgentParser,
  createVisitorIds,
  normalizeIpOrCidr,
  openGeo,
  parseQuery,
  sourceFamily,
  storedReferrer,
  toLocation,
} from '../src';

describe('IP exclusions', () => {
  it('normalizes addresses and CIDRs, rejecting anything else', () => {
    expect(normalizeIpOrCidr('10.1.2.3/8')).toBe('10.0.0.0/8');
    expect(normalizeIpOrCidr(' 192.168.1.7 ')).toBe('192.168.1.7');
    expect(normalizeIpOrCidr('::ffff:192.168.1.7')).toBe('192.168.1.7');
    expect(normalizeIpOrCidr('::ffff:10.0.0.0/104')).toBe('10.0.0.0/8');
    expect(normalizeIpOrCidr('2001:DB8:0:0:1::1/32')).toBe('2001:db8::/32');
    expect(normalizeIpOrCidr('2001:db8::1')).toBe('2001:db8::1');
    for (const bad of ['10.0.0.0/33', 'nope', '1.2.3', '2001:db8::/129', '1.2.3.4/8/9', '1.2.3.4/x', '']) {
      expect(normalizeIpOrCidr(bad)).toBeUndefined();
    }
  });

  it('matches exact addresses, v4 and v6 ranges, and v4-mapped v6 clients', () => {
    const excluded = createIpMatcher(['203.0.113.9', '10.0.0.0/8', '2001:db8::/32']);
    expect(excluded('203.0.113.9')).toBe(true);
    expect(excluded('203.0.113.10')).toBe(false);
    expect(excluded('10.200.3.4')).toBe(true);
    expect(excluded('::ffff:10.200.3.4')).toBe(true);
    expect(excluded('::FFFF:203.0.113.9')).toBe(true);
    expect(excluded('2001:db8:1::5')).toBe(true);
    expect(excluded('2001:db9::5')).toBe(false);
    expect(excluded('not-an-ip')).toBe(false);
    expect(createIpMatcher([])('10.0.0.1')).toBe(false);
  });
});

describe('geo', () => {
  it('reads both the MaxMind City layout and the flat ip-location-db layout', () => {
    expect(
      toLocation({
        country: { iso_code: 'de' },
        subdivisions: [{ names: { en: 'Bavaria' } }, { names: { en: 'Upper Bavaria' } }],
        city: { names: { en: 'Munich' } },
        location: { latitude: 48.1, longitude: 11.6 },
      }),
    ).toEqual({ country: 'DE', region: 'Bavaria', city: 'Munich', lat: 48.1, lon: 11.6 });
    expect(
      toLocation({ country_code: 'gb', state1: 'England', city: 'London', latitude: 51.5, longitude: -0.1 }),
    ).toEqual({
      country: 'GB',
      region: 'England',
      city: 'London',
      lat: 51.5,
      lon: -0.1,
    });
    expect(toLocation(null)).toEqual({ country: '', region: '', city: '', lat: 0, lon: 0 });
  });

  it('locates public v4 and v6 addresses with the bundled database; private ones are empty', async () => {
    const geo = await openGeo();
    const google = geo.lookup('8.8.8.8');
    expect(google.country).toBe('US');
    expect(google.lat).not.toBe(0);
    expect(geo.lookup('::ffff:8.8.8.8').country).toBe('US');
    expect(geo.lookup('2001:4860:4860::8888').country).toMatch(/^[A-Z]{2}$/);
    expect(geo.lookup('10.1.2.3')).toEqual({ country: '', region: '', city: '', lat: 0, lon: 0 });
    expect(geo.lookup('garbage')).toEqual({ country: '', region: '', city: '', lat: 0, lon: 0 });
  });

  it('names a missing GEOIP_DB_PATH file', async () => {
    await expect(openGeo('/nope/city.mmdb')).rejects.toThrow('GeoIP database not found: /nope/city.mmdb');
  });
});

describe('user agents', () => {
  const parse = createUserAgentParser(2);
  it('parses browser, major version, OS and device type', () => {
    const chrome =
      'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
    expect(parse(chrome)).toEqual({
      browser: 'Chrome',
      browser_version: '131',
      operating_system: 'Windows',
      operating_system_version: '10',
      device_type: 'desktop',
      isBot: false,
    });
    expect(parse('Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)').isBot).toBe(
      true,
    );
    const iphone =
      'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1';
    expect(parse(iphone)).toMatchObject({
      browser: 'Mobile Safari',
      operating_system: 'iOS',
      device_type: 'mobile',
    });
    const ipad =
      'Mozilla/5.0 (iPad; CPU OS 16_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.0 Mobile/15E148 Safari/604.1';
    expect(parse(ipad).device_type).toBe('tablet');
    expect(
      parse('Mozilla/5.0 (PlayStation 5 3.20) AppleWebKit/605.1.15 (KHTML, like Gecko)').device_type,
    ).toBe('console');
    expect(
      parse(
        'Mozilla/5.0 (SMART-TV; Linux; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/4.0 TV Safari/537.36',
      ).device_type,
    ).toBe('tv');
  });

  it('falls back to the screen width when neither device nor OS tells', () => {
    expect(parse('curl/8.5.0', 390).device_type).toBe('mobile');
    expect(parse('curl/8.5.0', 800).device_type).toBe('tablet');
    expect(parse('curl/8.5.0', 1920).device_type).toBe('desktop');
    expect(parse('', undefined).device_type).toBe('desktop');
  });
});

describe('channels', () => {
  const ch = (referrer: string, qs = '') => {
    const { utm, params } = parseQuery(qs);
    return classifyChannel({ referrer, utm, params });
  };
  it.each([
    ['', '', 'Direct'],
    ['https://www.google.co.uk/', '', 'Organic Search'],
    ['https://duckduckgo.com/', '', 'Organic Search'],
    ['https://www.google.com/', '?gclid=abc', 'Paid Search'],
    ['', 'utm_source=google&utm_medium=cpc', 'Paid Search'],
    ['https://t.co/xyz', '', 'Organic Social'],
    ['https://l.facebook.com/', '', 'Organic Social'],
    ['', 'utm_source=facebook&utm_medium=paid_social', 'Paid Social'],
    ['', '?fbclid=1', 'Paid Social'],
    ['https://www.youtube.com/watch', '', 'Organic Video'],
    ['', 'utm_source=youtube&utm_medium=cpv', 'Paid Video'],
    ['https://mail.google.com/', '', 'Email'],
    ['', 'utm_medium=email&utm_source=weekly', 'Email'],
    ['', 'utm_medium=sms', 'SMS'],
    ['https://chatgpt.com/', '', 'AI'],
    ['https://www.perplexity.ai/search', '', 'AI'],
    ['https://gemini.google.com/app', '', 'AI'],
    ['', 'utm_medium=display&utm_source=network', 'Display'],
    ['', 'utm_medium=affiliate&utm_source=partner1', 'Affiliate'],
    ['https://blog.example.org/post', '', 'Referral'],
    ['', 'utm_source=unknownthing', 'Unknown'],
  ])('referrer %j, query %j → %s', (referrer, qs, expected) => {
    expect(ch(referrer, qs)).toBe(expected);
  });

  it('knows every family of the data file and answers only spec channels', () => {
    for (const family of lists.families) {
      const entry = lists.sources[family as keyof typeof lists.sources][0]!;
      expect(sourceFamily(entry.includes('.') ? entry : `${entry}.com`)).toBe(family);
    }
    expect(CHANNELS).toHaveLength(14);
  });
});

describe('referrers and query strings', () => {
  it('stores self-referrals as empty', () => {
    expect(storedReferrer('https://example.com/a', 'example.com', 'example.com')).toBe('');
    expect(storedReferrer('https://blog.example.com/a', 'www.example.com', 'example.com')).toBe('');
    expect(storedReferrer('https://app.other.io/', 'app.other.io', 'example.com')).toBe('');
    expect(storedReferrer('https://google.com/', 'example.com', 'example.com')).toBe('https://google.com/');
    expect(storedReferrer('https://notexample.com/', 'example.com', 'example.com')).toBe(
      'https://notexample.com/',
    );
  });

  it('extracts UTM values and parameter names', () => {
    const { utm, params } = parseQuery('?utm_source=News&UTM_MEDIUM=email&utm_campaign=fall&gclid=1');
    expect(utm).toEqual({ source: 'News', medium: 'email', campaign: 'fall', term: '', content: '' });
    expect(params.has('gclid')).toBe(true);
  });
});

describe('visitor ids', () => {
  it('are 16 hex characters, stable per site/IP/UA, and rotate daily when salted', () => {
    const ids = createVisitorIds('secret-secret-secret');
    const base = { siteId: 1, ip: '1.2.3.4', userAgent: 'UA' };
    const id = ids(base);
    expect(id).toMatch(/^[0-9a-f]{16}$/);
    expect(ids(base)).toBe(id);
    expect(ids({ ...base, siteId: 2 })).not.toBe(id);
    expect(ids({ ...base, ip: '1.2.3.5' })).not.toBe(id);
    expect(createVisitorIds('another-secret-value')(base)).not.toBe(id);
    const monday = ids({ ...base, saltDay: '2026-11-23' });
    expect(monday).not.toBe(id);
    expect(ids({ ...base, saltDay: '2026-11-23' })).toBe(monday);
    expect(ids({ ...base, saltDay: '2026-11-24' })).not.toBe(monday);
  });
});
