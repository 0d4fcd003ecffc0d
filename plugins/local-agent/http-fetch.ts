/**
 * The built-in `http_fetch` tool: HTTP GET with bounded size and time, that
 * refuses loopback, private, link-local, metadata and other non-public
 * addresses unless allow-listed. The address is checked after DNS
 * resolution, at connect time (the checked address is the one connected to,
 * so a rebinding DNS answer cannot slip through), and again on every
 * redirect, each of which is a new, checked request.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { z } from 'zod';
import { ToolFailure } from './tool-errors.js';
import type { AgentTool } from './tools.js';

/** Options of the HTTP fetch tool. */
export interface HttpFetchToolOptions {
  /** Largest response body returned to the model, in characters. Default 20000. */
  maxChars?: number;
  /** Largest response body read, in bytes (the rest is not downloaded). Default 1 MiB. */
  maxBytes?: number;
  /** Time limit of the whole fetch (redirects included), in ms. Default 15000. */
  timeoutMs?: number;
  /** Most redirects followed. Default 5. */
  maxRedirects?: number;
  /**
   * Hosts and addresses allowed even when they are not public: host names
   * (`intranet.example.com`), IP addresses, or CIDR ranges (`10.1.0.0/16`).
   * Default none.
   */
  allow?: string[];
  /** DNS lookup (injectable for tests). Default `node:dns` lookup. */
  lookup?: typeof dnsLookup;
}

/** Ranges no fetch may reach unless allow-listed: loopback, private, link-local (cloud metadata), CGNAT, multicast, reserved. */
const BLOCKED = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  BLOCKED.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const)
  BLOCKED.addSubnet(net, bits, 'ipv6');

/** An allow-list of hosts and address ranges. */
class Allowed {
  private readonly hosts = new Set<string>();
  private readonly ranges = new BlockList();
  constructor(entries: readonly string[]) {
    for (const raw of entries) {
      const e = raw.trim().toLowerCase();
      const [addr, bits] = e.split('/');
      const family = isIP(addr ?? '');
      if (family && bits !== undefined) this.ranges.addSubnet(addr!, Number(bits), family === 4 ? 'ipv4' : 'ipv6');
      else if (family) this.ranges.addAddress(addr!, family === 4 ? 'ipv4' : 'ipv6');
      else this.hosts.add(e);
    }
  }
  host(name: string): boolean {
    return this.hosts.has(name.toLowerCase());
  }
  address(ip: string): boolean {
    return this.ranges.check(ip, isIP(ip) === 4 ? 'ipv4' : 'ipv6');
  }
}

/**
 * IPv4-mapped IPv6 (`::ffff:127.0.0.1`, `::ffff:7f00:1`) is checked as the
 * IPv4 address it is. (A BlockList rule for `::ffff:0:0/96` would match every
 * IPv4 address, so mapped addresses are unmapped instead.)
 */
function unmapped(ip: string): string {
  const dotted = /^(?:0{0,4}:){0,5}:?ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (dotted) return dotted[1]!;
  const hex = /^(?:0{0,4}:){0,5}:?ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(ip);
  if (!hex) return ip;
  const hi = Number.parseInt(hex[1]!, 16);
  const lo = Number.parseInt(hex[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** True when `ip` may be fetched. */
export function isPublicAddress(ip: string): boolean {
  const a = unmapped(ip);
  const family = isIP(a);
  if (!family) return false;
  return !BLOCKED.check(a, family === 4 ? 'ipv4' : 'ipv6');
}

/** A `lookup` for http(s).request that resolves, refuses a non-public answer, and connects to exactly the address it checked. */
function checkedLookup(host: string, allowed: Allowed, lookup: typeof dnsLookup): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as unknown as LookupAddress[];
      const bad = list.find((a) => !isPublicAddress(a.address) && !allowed.address(unmapped(a.address)) && !allowed.host(host));
      if (bad || list.length === 0) return callback(new ToolFailure('forbidden', `${host} resolves to a non-public address`), '', 0);
      const first = list[0]!;
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, [first]);
      callback(null, first.address, first.family);
    });
  };
}

/** One GET, not following redirects. */
function get(url: URL, allowed: Allowed, o: Required<Pick<HttpFetchToolOptions, 'lookup'>>, signal: AbortSignal): Promise<IncomingMessage> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) && !isPublicAddress(host) && !allowed.address(unmapped(host)) && !allowed.host(host)) {
    return Promise.reject(new ToolFailure('forbidden', `${host} is not a public address`));
  }
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'GET', signal, lookup: checkedLookup(host, allowed, o.lookup), headers: { 'user-agent': 'steerbot-http-fetch', accept: '*/*' } },
      resolve,
    );
    req.on('error', reject);
    req.end();
  });
}

/** Reads at most `maxBytes` of a body. */
async function readBody(res: IncomingMessage, maxBytes: number): Promise<{ text: string; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    const room = maxBytes - size;
    if (chunk.length >= room) {
      chunks.push(chunk.subarray(0, room));
      truncated = true;
      res.destroy();
      break;
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return { text: Buffer.concat(chunks).toString('utf8'), truncated };
}

const inputSchema = z.object({
  url: z
    .string()
    .url()
    .refine((u) => /^https?:\/\//i.test(u), 'http(s) URLs only'),
});

/** Fetches a URL with GET (built in, off by default: it lets the model reach the network). */
export function httpFetchTool(o: HttpFetchToolOptions = {}): AgentTool<{ url: string }> {
  const maxChars = o.maxChars ?? 20_000;
  const maxBytes = o.maxBytes ?? 1_048_576;
  const maxRedirects = o.maxRedirects ?? 5;
  const allowed = new Allowed(o.allow ?? []);
  const lookup = o.lookup ?? dnsLookup;
  return {
    name: 'http_fetch',
    description: 'Fetches a web page or API with HTTP GET and returns status and body text (truncated). Only public addresses.',
    inputSchema,
    idempotent: true,
    async execute({ url }, { signal }) {
      let target = new URL(url);
      for (let hop = 0; ; hop++) {
        const res = await get(target, allowed, { lookup }, signal);
        const location = res.headers.location;
        if (res.statusCode && res.statusCode >= 300 && res.statusCode < 400 && location) {
          res.resume();
          if (hop >= maxRedirects) throw new ToolFailure('too_many_redirects', `more than ${maxRedirects} redirects`);
          const next = new URL(location, target);
          if (next.protocol !== 'http:' && next.protocol !== 'https:') throw new ToolFailure('forbidden', 'redirect to a non-http(s) URL');
          target = next;
          continue;
        }
        const { text, truncated } = await readBody(res, maxBytes);
        const body = text.length > maxChars ? `${text.slice(0, maxChars)}…[truncated]` : truncated ? `${text}…[truncated]` : text;
        return { status: res.statusCode ?? 0, ...(hop > 0 && { url: target.href }), body };
      }
    },
    timeoutMs: o.timeoutMs ?? 15_000,
  };
}
