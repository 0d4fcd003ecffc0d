/**
 * The address classifier every guarded fetch uses: what counts as public,
 * including the IPv6 forms that carry an IPv4 address a gateway would reach,
 * and what an operator's allow-list lets through.
 */
import { describe, expect, it } from 'vitest';
import { AddressPolicy, isAllowEntry, isPublicAddress } from '../src/http/address-policy.js';

describe('isPublicAddress', () => {
  it.each([
    ['127.0.0.1', 'IPv4 loopback'],
    ['10.1.2.3', 'private 10/8'],
    ['172.16.0.1', 'private 172.16/12'],
    ['192.168.1.1', 'private 192.168/16'],
    ['169.254.169.254', 'link-local (cloud metadata)'],
    ['100.64.0.1', 'CGNAT'],
    ['0.0.0.0', 'this network'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['::', 'unspecified'],
    ['::1', 'IPv6 loopback'],
    ['fe80::1', 'IPv6 link-local'],
    ['fd00::1', 'unique local'],
    ['ff02::1', 'IPv6 multicast'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback (dotted)'],
    ['::ffff:7f00:1', 'IPv4-mapped loopback (hex)'],
    ['0:0:0:0:0:ffff:a00:1', 'IPv4-mapped private, uncompressed'],
    ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
    ['::127.0.0.1', 'IPv4-compatible loopback (dotted)'],
    ['::7f00:1', 'IPv4-compatible loopback (hex)'],
    ['::a9fe:a9fe', 'IPv4-compatible metadata'],
    ['::808:808', 'IPv4-compatible, even of a public IPv4 address'],
    ['2002:7f00:1::', '6to4 of 127.0.0.1'],
    ['2002:808:808::1', '6to4, even of a public IPv4 address'],
    ['64:ff9b::7f00:1', 'NAT64 well-known prefix, loopback'],
    ['64:ff9b::127.0.0.1', 'NAT64 well-known prefix, dotted'],
    ['64:ff9b::808:808', 'NAT64 well-known prefix, even of a public IPv4 address'],
    ['64:ff9b:1::a00:1', 'NAT64 local-use prefix'],
    ['2001:0:4136:e378::1', 'Teredo'],
    ['2001:db8::1', 'documentation'],
    ['::ffff:0:7f00:1', 'IPv4-translated'],
    ['not-an-address', 'not an address'],
    ['', 'empty'],
  ])('%s is not public (%s)', (ip) => {
    expect(isPublicAddress(ip)).toBe(false);
  });

  it.each(['93.184.216.34', '1.1.1.1', '8.8.8.8', '2606:4700:4700::1111', '2001:4860:4860::8888', '::ffff:1.1.1.1', '::ffff:101:101'])('%s is public', (ip) => {
    expect(isPublicAddress(ip)).toBe(true);
  });
});

describe('AddressPolicy', () => {
  it('lets through public addresses, and non-public ones only by allowed host name, address or range', () => {
    const policy = new AddressPolicy(['intranet.example.com', '10.1.0.0/16', '192.168.5.5', 'fd00::/8']);
    expect(policy.allows('example.org', '93.184.216.34')).toBe(true);
    expect(policy.allows('INTRANET.example.com', '127.0.0.1')).toBe(true);
    expect(policy.allows('other.example.com', '127.0.0.1')).toBe(false);
    expect(policy.allows('x', '10.1.200.3')).toBe(true);
    expect(policy.allows('x', '::ffff:10.1.200.3')).toBe(true);
    expect(policy.allows('x', '10.2.0.1')).toBe(false);
    expect(policy.allows('x', '192.168.5.5')).toBe(true);
    expect(policy.allows('x', '192.168.5.6')).toBe(false);
    expect(policy.allows('x', 'fd12::1')).toBe(true);
    // An allowed IPv4 range does not open the IPv6 forms that embed it.
    expect(policy.allows('x', '64:ff9b::a01:1')).toBe(false);
  });

  it('refuses an entry that is not a host name, an address or a CIDR range', () => {
    for (const bad of ['10.0.0.0/33', 'fd00::/129', '10.0.0.0/x', 'host name', 'http://x/', 'a_b']) {
      expect(isAllowEntry(bad), bad).toBe(false);
      expect(() => new AddressPolicy([bad]), bad).toThrow(/not a host name/);
    }
    for (const good of ['intranet', 'files.example.com', '10.0.0.0/8', '::1', 'fd00::/8', ' 127.0.0.1 ']) expect(isAllowEntry(good), good).toBe(true);
  });
});
