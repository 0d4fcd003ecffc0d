/**
 * Which network addresses steerbot may connect to when it fetches a URL on a
 * user's or a model's behalf (`guarded-fetch.ts`): public ones, plus what the
 * operator allowed by host name, address or CIDR range. Loopback, private,
 * link-local (cloud metadata), CGNAT, multicast, documentation and reserved
 * ranges are not public, nor are the IPv6 forms that carry an IPv4 address a
 * gateway would reach for us (IPv4-compatible, 6to4, NAT64, Teredo).
 */
import { BlockList, isIP } from 'node:net';

/** Ranges that are not public. IPv4-mapped IPv6 is unmapped and checked as IPv4 instead (see `unmapIpv4`). */
const NOT_PUBLIC = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  NOT_PUBLIC.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  // IPv4-compatible (`::a.b.c.d`, deprecated), which also holds `::` and `::1`.
  ['::', 96],
  // IPv4-translated (SIIT, `::ffff:0:a.b.c.d`).
  ['::ffff:0:0:0', 96],
  // NAT64: well-known and local-use prefixes; a NAT64 gateway connects to the IPv4 address inside.
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  // Teredo and 6to4 embed an IPv4 address a relay would reach.
  ['2001::', 32],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const)
  NOT_PUBLIC.addSubnet(net, bits, 'ipv6');

/**
 * The IPv4 address inside an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`,
 * `::ffff:7f00:1`), or `ip` itself. (A rule for `::ffff:0:0/96` would match
 * every IPv4 address, so mapped addresses are unmapped instead.)
 */
export function unmapIpv4(ip: string): string {
  const dotted = /^(?:0{0,4}:){0,5}:?ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (dotted) return dotted[1]!;
  const hex = /^(?:0{0,4}:){0,5}:?ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(ip);
  if (!hex) return ip;
  const hi = Number.parseInt(hex[1]!, 16);
  const lo = Number.parseInt(hex[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

const familyOf = (ip: string): 'ipv4' | 'ipv6' => (isIP(ip) === 4 ? 'ipv4' : 'ipv6');

/** True when `ip` is an IP address on the public internet; false for anything else, including what is not an address. */
export function isPublicAddress(ip: string): boolean {
  const a = unmapIpv4(ip);
  if (!isIP(a)) return false;
  return !NOT_PUBLIC.check(a, familyOf(a));
}

/** True when `entry` is an IP address or a CIDR range (`10.0.0.0/8`, `fd00::/8`), as written: no white space around it. */
export function isAddressOrRange(entry: string): boolean {
  const [address = '', bits, ...rest] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (bits === undefined) return true;
  return /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
}

/** True when `entry` is a valid allow-list entry: a host name, an IP address, or a CIDR range (`10.1.0.0/16`, `fd00::/8`). */
export function isAllowEntry(entry: string): boolean {
  const e = entry.trim();
  return isAddressOrRange(e) || /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/i.test(e);
}

/**
 * Hosts and addresses the operator allows although they are not public:
 * host names (`intranet.example.com`, any address it resolves to), IP
 * addresses, or CIDR ranges (`10.1.0.0/16`).
 */
export class AddressPolicy {
  private readonly hosts = new Set<string>();
  private readonly ranges = new BlockList();

  /** @throws Error naming the entry when one is not a host name, an address or a CIDR range (config schemas check with `isAllowEntry` first). */
  constructor(allowPrivate: readonly string[] = []) {
    for (const raw of allowPrivate) {
      if (!isAllowEntry(raw)) throw new Error(`not a host name, IP address or CIDR range: ${raw}`);
      const e = raw.trim().toLowerCase();
      const [addr, bits] = e.split('/') as [string, string | undefined];
      if (!isIP(addr)) this.hosts.add(e);
      else if (bits !== undefined) this.ranges.addSubnet(addr, Number(bits), familyOf(addr));
      else this.ranges.addAddress(addr, familyOf(addr));
    }
  }

  /** True when host `host` (a name, or the address itself) may be reached at address `ip`. */
  allows(host: string, ip: string): boolean {
    if (isPublicAddress(ip) || this.hosts.has(host.toLowerCase())) return true;
    const a = unmapIpv4(ip);
    return isIP(a) !== 0 && this.ranges.check(a, familyOf(a));
  }
}
