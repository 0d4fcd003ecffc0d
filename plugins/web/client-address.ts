/**
 * Who a web chat request comes from, for the per-client limits: the TCP
 * peer, or, when the peer is a reverse proxy the operator listed
 * (`trustedProxies`), the client its `X-Forwarded-For` names. Proxies append
 * the address they saw, so only the right-most entries were written by
 * proxies we trust; everything left of the first address that is not one of
 * them is that client's own claim. IPv6 clients count by their /64: one
 * subscriber usually holds a whole /64 and could take a fresh address per
 * request.
 */
import { BlockList, isIP } from 'node:net';
import { isAddressOrRange, type RouteRequest, unmapIpv4 } from 'steerbot/plugin';

type Family = 'ipv4' | 'ipv6';

/** The part of a request the client is read from. */
export type ClientRequest = Pick<RouteRequest, 'headers' | 'remoteAddress'>;

/**
 * An address as sockets and proxies write it (`::ffff:10.0.0.5`,
 * `[2001:db8::1]:443`, `10.0.0.5:5678`), reduced to the bare address
 * (IPv4-mapped IPv6, dotted or hex, to IPv4); undefined when it is not an address.
 */
function bareAddress(raw: string | undefined): { address: string; family: Family } | undefined {
  if (!raw) return undefined;
  let a = raw.trim();
  a = /^\[([^\]]+)\](?::\d+)?$/.exec(a)?.[1] ?? /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(a)?.[1] ?? a;
  a = unmapIpv4(a);
  const family = isIP(a);
  if (family === 0) return undefined;
  return { address: a.toLowerCase(), family: family === 4 ? 'ipv4' : 'ipv6' };
}

/** The first four groups of an IPv6 address, normalized (`2001:db8:0:1::5` → `2001:db8:0:1`). */
function prefix64(address: string): string {
  // An IPv4 tail (`64:ff9b::192.0.2.1`) is two groups, all in the last 64 bits.
  const s = address.replace(/%.*$/, '').replace(/\d+\.\d+\.\d+\.\d+$/, '0:0');
  const [left = '', right] = s.split('::');
  const head = left === '' ? [] : left.split(':');
  const tail = right === undefined || right === '' ? [] : right.split(':');
  const fill = right === undefined ? [] : new Array<string>(8 - head.length - tail.length).fill('0');
  return [...head, ...fill, ...tail]
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':');
}

/** Finds each request's client; built once from `trustedProxies`. */
export class ClientAddresses {
  private readonly trusted = new BlockList();
  private readonly any: boolean;

  /** @throws Error naming an entry that is neither an address nor a CIDR range (the config schema checks first). */
  constructor(trustedProxies: readonly string[]) {
    for (const entry of trustedProxies) {
      if (!isAddressOrRange(entry)) throw new Error(`not an IP address or CIDR range: ${entry}`);
      const [address, bits] = entry.split('/') as [string, string | undefined];
      const bare = bareAddress(address)!;
      if (bits === undefined) this.trusted.addAddress(bare.address, bare.family);
      else this.trusted.addSubnet(address, Number(bits), isIP(address) === 4 ? 'ipv4' : 'ipv6');
    }
    this.any = trustedProxies.length > 0;
  }

  /**
   * The key the request's client is counted under: its IPv4 address, or its
   * IPv6 /64 (`2001:db8:0:1::`); `unknown` when the socket is gone. Only
   * characters a plugin key name takes (hex, digits, `.` and `:`).
   */
  of(req: ClientRequest): string {
    const client = this.client(req);
    if (!client) return 'unknown';
    return client.family === 'ipv4' ? client.address : `${prefix64(client.address)}::`;
  }

  /** Whether the request carries `X-Forwarded-For` from a peer that is not a trusted proxy (so it was not believed). */
  ignoresForwarding(req: ClientRequest): boolean {
    if (req.headers['x-forwarded-for'] === undefined) return false;
    const peer = bareAddress(req.remoteAddress);
    return peer !== undefined && !this.trusts(peer);
  }

  /** The client: the peer, or walking `X-Forwarded-For` right to left past trusted proxies. */
  private client(req: ClientRequest): { address: string; family: Family } | undefined {
    let client = bareAddress(req.remoteAddress);
    if (!client || !this.trusts(client)) return client;
    const header = req.headers['x-forwarded-for'];
    const hops = (Array.isArray(header) ? header.join(',') : (header ?? '')).split(',');
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = bareAddress(hops[i]);
      // A malformed entry: the last proxy we trust is all we know.
      if (!hop) break;
      client = hop;
      if (!this.trusts(hop)) break;
    }
    return client;
  }

  private trusts(a: { address: string; family: Family }): boolean {
    return this.any && this.trusted.check(a.address, a.family);
  }
}
