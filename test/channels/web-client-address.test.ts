/**
 * Who the web chat counts a request against: the TCP peer, or the client a
 * listed proxy's `X-Forwarded-For` names; IPv6 clients by their /64.
 */
import { describe, expect, it } from 'vitest';
import { ClientAddresses, type ClientRequest } from '../../plugins/web/client-address.js';
import { isAddressOrRange } from '../../src/http/address-policy.js';

const req = (remoteAddress: string | undefined, xff?: string | string[]): ClientRequest => ({
  ...(remoteAddress !== undefined && { remoteAddress }),
  headers: xff === undefined ? {} : { 'x-forwarded-for': xff },
});

describe('ClientAddresses', () => {
  describe('with no trusted proxy', () => {
    const a = new ClientAddresses([]);

    it('counts the TCP peer and ignores a forwarded address', () => {
      expect(a.of(req('203.0.113.5', '198.51.100.1'))).toBe('203.0.113.5');
      expect(a.of(req('::ffff:203.0.113.5'))).toBe('203.0.113.5');
      // The same address written in hex is the same client, not the shared /64 of every mapped address.
      expect(a.of(req('::ffff:cb00:7105'))).toBe('203.0.113.5');
      expect(a.of(req('0:0:0:0:0:ffff:cb00:7105'))).toBe('203.0.113.5');
      expect(a.ignoresForwarding(req('127.0.0.1', '198.51.100.1'))).toBe(true);
      expect(a.ignoresForwarding(req('127.0.0.1'))).toBe(false);
    });

    it('counts an IPv6 peer by its /64', () => {
      expect(a.of(req('2001:db8:0:1::5'))).toBe('2001:db8:0:1::');
      expect(a.of(req('2001:0db8:0000:0001:ffff:1:2:3'))).toBe('2001:db8:0:1::');
      expect(a.of(req('::1'))).toBe('0:0:0:0::');
      expect(a.of(req('64:ff9b::192.0.2.1'))).toBe('64:ff9b:0:0::');
    });

    it('counts a request whose socket is gone as unknown', () => {
      expect(a.of(req(undefined))).toBe('unknown');
    });
  });

  describe('behind listed proxies', () => {
    const a = new ClientAddresses(['127.0.0.1', '10.0.0.0/8']);

    it('takes the right-most address that is not a listed proxy', () => {
      expect(a.of(req('127.0.0.1', '198.51.100.1, 203.0.113.9'))).toBe('203.0.113.9');
      expect(a.of(req('127.0.0.1', '198.51.100.1, 203.0.113.9, 10.1.2.3'))).toBe('203.0.113.9');
      expect(a.of(req('127.0.0.1', ['198.51.100.1', '203.0.113.9']))).toBe('203.0.113.9');
      expect(a.of(req('127.0.0.1', '[2001:db8:5:6::1]:443'))).toBe('2001:db8:5:6::');
      expect(a.of(req('127.0.0.1', '203.0.113.9:5678'))).toBe('203.0.113.9');
      expect(a.ignoresForwarding(req('127.0.0.1', '203.0.113.9'))).toBe(false);
    });

    it('stops at a malformed entry: the last listed proxy is all it knows', () => {
      expect(a.of(req('127.0.0.1', '203.0.113.9, not-an-address'))).toBe('127.0.0.1');
      expect(a.of(req('127.0.0.1', 'junk, 10.0.0.7'))).toBe('10.0.0.7');
      expect(a.of(req('127.0.0.1'))).toBe('127.0.0.1');
    });

    it('knows a listed proxy whose socket address is IPv4-mapped in hex', () => {
      expect(a.of(req('::ffff:7f00:1', '203.0.113.9'))).toBe('203.0.113.9');
      expect(a.of(req('::ffff:a01:203', '198.51.100.1, ::ffff:cb00:7109'))).toBe('203.0.113.9');
    });

    it('ignores the header from a peer that is not listed', () => {
      expect(a.of(req('198.51.100.2', '203.0.113.9'))).toBe('198.51.100.2');
    });
  });

  it('accepts addresses and CIDR ranges only', () => {
    expect(['10.0.0.1', '10.0.0.0/8', 'fd00::/8', '::1'].every(isAddressOrRange)).toBe(true);
    expect(['proxy.local', '10.0.0.0/33', '10.0.0.0/8/1', 'fd00::/129', ''].some(isAddressOrRange)).toBe(false);
  });
});
