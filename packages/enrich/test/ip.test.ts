import { describe, expect, it } from 'vitest';
import { createIpMatcher, normalizeIp, normalizeIpOrCidr } from '../src';

describe('IPv6 text as RFC 5952 recommends', () => {
  it('writes every variant of section 2 as the one canonical form', () => {
    const variants = [
      '2001:db8:0:0:1:0:0:1',
      '2001:0db8:0:0:1:0:0:1',
      '2001:db8::1:0:0:1',
      '2001:db8::0:1:0:0:1',
      '2001:0db8::1:0:0:1',
      '2001:db8:0:0:1::1',
      '2001:db8:0000:0:1::1',
      '2001:DB8:0:0:1::1',
    ];
    for (const v of variants) expect(normalizeIpOrCidr(v)).toBe('2001:db8::1:0:0:1');
  });

  it('applies each rule of section 4', () => {
    const cases: [string, string][] = [
      // 4.1 leading zeros suppressed
      ['2001:0db8::0001', '2001:db8::1'],
      ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
      ['2001:db8:aaaa:bbbb:cccc:dddd:eeee:0001', '2001:db8:aaaa:bbbb:cccc:dddd:eeee:1'],
      // 4.2.1 "::" shortens as much as possible
      ['2001:db8:0:0:0:0:2:1', '2001:db8::2:1'],
      // 4.2.2 a single 16-bit 0 field is not shortened
      ['2001:db8::1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
      // 4.2.3 the longest run, the first of equal runs
      ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1'],
      ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
      // 4.3 lowercase
      ['2001:DB8::ABCD', '2001:db8::abcd'],
      // edges
      ['0:0:0:0:0:0:0:0', '::'],
      ['0:0:0:0:0:0:0:1', '::1'],
      ['1:0:0:0:0:0:0:0', '1::'],
      ['FE80:0:0:0:0:0:0:1', 'fe80::1'],
    ];
    for (const [given, canonical] of cases)
      expect({ given, out: normalizeIpOrCidr(given) }).toEqual({ given, out: canonical });
  });

  it('keeps the dotted quad of well-known prefixes that embed IPv4 (section 5)', () => {
    // IPv4-mapped addresses are the IPv4 address itself: exclusions and matching are by address.
    expect(normalizeIpOrCidr('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(normalizeIpOrCidr('::FFFF:c000:0201')).toBe('192.0.2.1');
    // IPv4-translated (RFC 2765) and the RFC 6052 well-known prefix.
    expect(normalizeIpOrCidr('::ffff:0:c000:201')).toBe('::ffff:0:192.0.2.1');
    expect(normalizeIpOrCidr('64:ff9b::c000:221')).toBe('64:ff9b::192.0.2.33');
    expect(normalizeIpOrCidr('0064:FF9B:0:0:0:0:192.0.2.33')).toBe('64:ff9b::192.0.2.33');
    // Other addresses stay hexadecimal, whatever their last 32 bits look like.
    expect(normalizeIpOrCidr('2001:db8::192.0.2.1')).toBe('2001:db8::c000:201');
  });

  it('writes ranges as their canonical network address', () => {
    expect(normalizeIpOrCidr('2001:0DB8:0000:0000:0001::/32')).toBe('2001:db8::/32');
    expect(normalizeIpOrCidr('2001:db8:0:0:1:0:0:1/128')).toBe('2001:db8::1:0:0:1/128');
    expect(normalizeIpOrCidr('64:ff9b::c000:221/96')).toBe('64:ff9b::/96');
    expect(normalizeIpOrCidr('::ffff:10.9.8.7/104')).toBe('10.0.0.0/8');
    expect(normalizeIpOrCidr('010.1.1.1')).toBeUndefined();
    expect(normalizeIpOrCidr('fe80::1%eth0')).toBeUndefined();
  });

  it('normalizes client addresses the same way', () => {
    expect(normalizeIp('2001:0DB8:0000:0000:0000:0000:0000:0001')).toBe('2001:db8::1');
    expect(normalizeIp('::ffff:203.0.113.9')).toBe('203.0.113.9');
    expect(normalizeIp(' 203.0.113.9 ')).toBe('203.0.113.9');
    expect(normalizeIp('not an address')).toBe('not an address');
  });
});

describe('matching excluded addresses', () => {
  const forms = {
    v6: ['2001:db8::1:0:0:1', '2001:0DB8:0000:0000:0001:0000:0000:0001', '2001:db8:0:0:1::1'],
    v4: ['192.0.2.1', '::ffff:192.0.2.1', '::ffff:c000:201', '0:0:0:0:0:ffff:192.0.2.1'],
    nat64: ['64:ff9b::192.0.2.33', '64:ff9b::c000:221', '0064:ff9b:0000:0000:0000:0000:c000:0221'],
  };

  it('matches an address in every form a user may enter it against a client in every form', () => {
    for (const group of Object.values(forms)) {
      for (const entry of group) {
        const normalized = normalizeIpOrCidr(entry)!;
        const excluded = createIpMatcher([normalized]);
        for (const client of group)
          expect({ entry, client, hit: excluded(client) }).toEqual({ entry, client, hit: true });
        for (const other of Object.values(forms).filter((g) => g !== group))
          for (const client of other)
            expect({ entry, client, hit: excluded(client) }).toEqual({ entry, client, hit: false });
      }
    }
  });

  it('matches ranges given in any form', () => {
    const excluded = createIpMatcher(
      ['2001:0DB8:0000::/32', '64:ff9b::c000:200/120', '::ffff:198.51.100.0/120'].map(
        (e) => normalizeIpOrCidr(e)!,
      ),
    );
    expect(excluded('2001:db8:ffff::1')).toBe(true);
    expect(excluded('2001:db9::1')).toBe(false);
    expect(excluded('64:ff9b::192.0.2.200')).toBe(true);
    expect(excluded('64:ff9b::192.0.3.1')).toBe(false);
    expect(excluded('198.51.100.77')).toBe(true);
    expect(excluded('::ffff:198.51.100.77')).toBe(true);
    expect(excluded('198.51.101.1')).toBe(false);
  });
});
