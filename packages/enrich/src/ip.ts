import { BlockList, isIP } from 'node:net';

/** `::ffff:1.2.3.4` → `1.2.3.4`; other addresses unchanged (lowercased). */
export function normalizeIp(ip: string): string {
  const lower = ip.trim().toLowerCase();
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(lower);
  return mapped ? mapped[1]! : lower;
}

export function ipFamily(ip: string): 'ipv4' | 'ipv6' | undefined {
  const v = isIP(ip);
  return v === 4 ? 'ipv4' : v === 6 ? 'ipv6' : undefined;
}

/**
 * Parses an exclusion entry (an address or a CIDR) into its normalized text, or undefined when
 * it is neither. `10.1.2.3/8` normalizes to `10.0.0.0/8`; v4-mapped v6 entries become v4.
 */
export function normalizeIpOrCidr(entry: string): string | undefined {
  const [rawAddress, rawPrefix, extra] = entry.trim().split('/');
  if (extra !== undefined || !rawAddress) return undefined;
  let address = normalizeIp(rawAddress);
  const family = ipFamily(address);
  if (!family) return undefined;
  if (rawPrefix === undefined) return address;
  if (!/^\d{1,3}$/.test(rawPrefix)) return undefined;
  let prefix = Number(rawPrefix);
  // A v4-mapped v6 range (::ffff:a.b.c.d/104+) is the v4 range it maps.
  if (family === 'ipv4' && ipFamily(rawAddress.trim()) === 'ipv6') prefix -= 96;
  const max = family === 'ipv4' ? 32 : 128;
  if (prefix < 0 || prefix > max) return undefined;
  address = networkAddress(address, family, prefix);
  return `${address}/${prefix}`;
}

function networkAddress(address: string, family: 'ipv4' | 'ipv6', prefix: number): string {
  const bytes = toBytes(address, family);
  for (let bit = prefix; bit < bytes.length * 8; bit++) bytes[bit >> 3]! &= ~(0x80 >> (bit & 7));
  return fromBytes(bytes, family);
}

function toBytes(address: string, family: 'ipv4' | 'ipv6'): number[] {
  if (family === 'ipv4') return address.split('.').map(Number);
  const groupsOf = (part: string | undefined): string[] =>
    part
      ? part.split(':').flatMap((g) => {
          if (!g.includes('.')) return [g];
          // An embedded dotted quad (64:ff9b::1.2.3.4) is the last two groups.
          const [a = 0, b = 0, c = 0, d = 0] = g.split('.').map(Number);
          return [((a << 8) | b).toString(16), ((c << 8) | d).toString(16)];
        })
      : [];
  const [head, tail] = address.split('::');
  const before = groupsOf(head);
  const after = groupsOf(tail);
  const zeros = address.includes('::') ? 8 - before.length - after.length : 0;
  return [...before, ...Array<string>(zeros).fill('0'), ...after].flatMap((g) => {
    const n = Number.parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
}

function fromBytes(bytes: number[], family: 'ipv4' | 'ipv6'): string {
  if (family === 'ipv4') return bytes.join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return compressV6(groups);
}

function compressV6(groups: string[]): string {
  let best = { start: -1, len: 0 };
  for (let i = 0; i < groups.length; ) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < groups.length && groups[j] === '0') j++;
    if (j - i > best.len) best = { start: i, len: j - i };
    i = j;
  }
  if (best.len < 2) return groups.join(':');
  return `${groups.slice(0, best.start).join(':')}::${groups.slice(best.start + best.len).join(':')}`;
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
