import { BlockList, isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Prefixes that say the last 32 bits are an IPv4 address, written as a dotted quad there
 * (RFC 5952 section 5): IPv4-translated addresses (RFC 2765) and the well-known prefix of
 * RFC 6052. IPv4-mapped addresses (`::ffff:a.b.c.d`) are the IPv4 address itself here.
 */
const EMBEDS_IPV4 = [ipaddr.IPv6.parseCIDR('::ffff:0:0:0/96'), ipaddr.IPv6.parseCIDR('64:ff9b::/96')];

/** RFC 5952 text: lowercase, no leading zeros, the longest zero run (the first of equal ones) as `::`. */
function ipv6Text(address: ipaddr.IPv6): string {
  const parts = address.parts;
  const [high16 = 0, low16 = 0] = parts.slice(6);
  if ((high16 === 0 && low16 === 0) || !EMBEDS_IPV4.some((range) => address.match(range))) {
    return address.toRFC5952String();
  }
  // The dotted quad is not part of any zero run: compress with two non-zero groups in its
  // place, then write the quad over them.
  const hex = new ipaddr.IPv6([...parts.slice(0, 6), 1, 1]).toRFC5952String();
  const quad = [high16 >> 8, high16 & 0xff, low16 >> 8, low16 & 0xff].join('.');
  return `${hex.slice(0, -'1:1'.length)}${quad}`;
}

/**
 * One text per address: IPv4 as dotted decimal, IPv4-mapped IPv6 as the IPv4 address, other
 * IPv6 in RFC 5952 form. Text that is no address comes back trimmed and lowercased.
 */
export function normalizeIp(ip: string): string {
  const text = ip.trim();
  if (!isIP(text)) return text.toLowerCase();
  const address = ipaddr.parse(text);
  if (address.kind() === 'ipv4') return address.toString();
  const v6 = address as ipaddr.IPv6;
  return v6.isIPv4MappedAddress() ? v6.toIPv4Address().toString() : ipv6Text(v6);
}

export function ipFamily(ip: string): 'ipv4' | 'ipv6' | undefined {
  const v = isIP(ip);
  return v === 4 ? 'ipv4' : v === 6 ? 'ipv6' : undefined;
}

/**
 * Parses an exclusion entry (an address or a CIDR) into its normalized text, or undefined when
 * it is neither. `10.1.2.3/8` normalizes to `10.0.0.0/8`; v4-mapped v6 entries become v4; zone
 * ids (`fe80::1%eth0`) are refused: they name no remote client.
 */
export function normalizeIpOrCidr(entry: string): string | undefined {
  const [rawAddress, rawPrefix, extra] = entry.trim().split('/');
  if (extra !== undefined || !rawAddress || rawAddress.includes('%')) return undefined;
  const address = normalizeIp(rawAddress);
  const family = ipFamily(address);
  if (!family) return undefined;
  if (rawPrefix === undefined) return address;
  if (!/^\d{1,3}$/.test(rawPrefix)) return undefined;
  let prefix = Number(rawPrefix);
  // A v4-mapped v6 range (::ffff:a.b.c.d/104+) is the v4 range it maps.
  if (family === 'ipv4' && ipFamily(rawAddress.trim()) === 'ipv6') prefix -= 96;
  const max = family === 'ipv4' ? 32 : 128;
  if (prefix < 0 || prefix > max) return undefined;
  const network =
    family === 'ipv4'
      ? ipaddr.IPv4.networkAddressFromCIDR(`${address}/${prefix}`).toString()
      : ipv6Text(ipaddr.IPv6.networkAddressFromCIDR(`${address}/${prefix}`));
  return `${network}/${prefix}`;
}

/** A matcher over normalized exclusion entries (addresses and CIDR ranges, v4 and v6). */
export function createIpMatcher(entries: readonly string[]): (ip: string) => boolean {
  if (entries.length === 0) return () => false;
  const list = new BlockList();
  for (const entry of entries) {
    const normalized = normalizeIpOrCidr(entry);
    if (!normalized) continue;
    const [address, prefix] = normalized.split('/') as [string, string | undefined];
    const family = ipFamily(address)!;
    if (prefix === undefined) list.addAddress(address, family);
    else list.addSubnet(address, Number(prefix), family);
  }
  return (ip) => {
    const address = normalizeIp(ip);
    const family = ipFamily(address);
    return family ? list.check(address, family) : false;
  };
}
