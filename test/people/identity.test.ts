/** Identities: an account is its own identity until linked; linking merges whole identities; unlink and purge undo links, atomically in one slot. */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../src/errors.js';
import { accountId, IdentityStore } from '../../src/people/identity.js';
import { peopleKeys } from '../../src/redis/keys.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const redis = new Redis(redisUrl());
let prefix: string;
let store: IdentityStore;

beforeEach(() => {
  prefix = testPrefix();
  store = new IdentityStore({ redis, prefix });
});
afterEach(() => cleanupPrefix(redis, prefix));
afterAll(() => redis.quit());

/** Every key under the test prefix. */
const keysNow = async () => (await redis.keys(`${prefix}:*`)).sort();

describe('identity resolve', () => {
  it('is the account itself, `<channel>:<user id>`, and writes nothing', async () => {
    expect(await store.resolve('telegram', '42')).toBe('telegram:42');
    expect(await store.resolve('webhook:crm', 'u-1')).toBe('webhook:crm:u-1');
    expect(await store.resolveMany('discord', ['7', '8'])).toEqual(['discord:7', 'discord:8']);
    expect(await store.accounts('telegram:42')).toEqual(['telegram:42']);
    expect(await keysNow()).toEqual([]);
  });

  it.each([
    ['an empty user id', 'telegram', ''],
    ['a user id with a brace', 'telegram', 'a{b'],
    ['a user id with whitespace', 'telegram', 'a b'],
    ['a 129-character user id', 'telegram', 'x'.repeat(129)],
    ['an empty channel', '', '1'],
  ])('refuses %s', async (_what, channel, user) => {
    await expect(store.resolve(channel, user)).rejects.toBeInstanceOf(InvalidInputError);
    expect(() => accountId(channel, user)).toThrow(InvalidInputError);
    // What a run or a message goes on with instead of failing: no identity.
    expect(await store.tryResolve(channel, user)).toBeUndefined();
    expect(await keysNow()).toEqual([]);
  });

  it('tryResolve follows a link like resolve', async () => {
    await store.link('discord:7', 'telegram:42');
    expect(await store.tryResolve('discord', '7')).toBe('telegram:42');
    expect(await store.tryResolve('telegram', '43')).toBe('telegram:43');
  });
});

describe('identity link', () => {
  it('makes the joining account resolve to the target identity, on every channel', async () => {
    const r = await store.link('discord:9', 'telegram:42');
    expect(r).toEqual({ kind: 'linked', identity: 'telegram:42', from: 'discord:9' });
    expect(await store.resolve('discord', '9')).toBe('telegram:42');
    expect(await store.resolve('telegram', '42')).toBe('telegram:42');
    expect(await store.accounts('telegram:42')).toEqual(['discord:9', 'telegram:42']);
  });

  it('is idempotent: linking again reports the same identity', async () => {
    await store.link('discord:9', 'telegram:42');
    expect(await store.link('discord:9', 'telegram:42')).toEqual({ kind: 'same', identity: 'telegram:42' });
    expect(await store.link('telegram:42', 'discord:9')).toEqual({ kind: 'same', identity: 'telegram:42' });
  });

  it('merges whole identities: every account of the joining identity moves', async () => {
    await store.link('discord:9', 'telegram:42');
    await store.link('webhook:crm:alice', 'slack:U1');
    const r = await store.link('discord:9', 'slack:U1');
    expect(r).toEqual({ kind: 'linked', identity: 'slack:U1', from: 'telegram:42' });
    expect(await store.resolveMany('telegram', ['42'])).toEqual(['slack:U1']);
    expect(await store.accounts('slack:U1')).toEqual(['discord:9', 'slack:U1', 'telegram:42', 'webhook:crm:alice']);
    // The merged identity keeps no members of its own.
    expect(await redis.exists(peopleKeys(prefix).members('telegram:42'))).toBe(0);
  });

  it('tells hooks which identity moved into which', async () => {
    const seen: unknown[] = [];
    const off = store.onChange({ linked: (c) => void seen.push(c) });
    await store.link('discord:9', 'telegram:42');
    await store.link('discord:9', 'telegram:42');
    off();
    await store.link('discord:10', 'telegram:42');
    expect(seen).toEqual([{ from: 'discord:9', into: 'telegram:42' }]);
  });

  it('keeps every key in the one {people} slot (Cluster-safe scripts)', async () => {
    await store.link('discord:9', 'telegram:42');
    const keys = await keysNow();
    expect(keys.length).toBeGreaterThan(0);
    for (const k of keys) expect(k.startsWith(`${prefix}:{people}:`)).toBe(true);
  });

  it('refuses a bad account and writes nothing', async () => {
    await expect(store.link('discord:{9}', 'telegram:42')).rejects.toBeInstanceOf(InvalidInputError);
    await expect(store.link('discord:9', 'tele gram:42')).rejects.toBeInstanceOf(InvalidInputError);
    expect(await keysNow()).toEqual([]);
  });

  it('resolves consistently under concurrent links of the same accounts', async () => {
    const targets = ['telegram:1', 'discord:2', 'slack:3', 'webhook:x:4'];
    await Promise.all(targets.flatMap((t) => targets.map((a) => (a === t ? undefined : store.link(a, t)))));
    const ids = await Promise.all(targets.map((t) => store.resolve(t.slice(0, t.lastIndexOf(':')), t.slice(t.lastIndexOf(':') + 1))));
    expect(new Set(ids).size).toBe(1);
    expect(await store.accounts(ids[0]!)).toEqual([...targets].sort());
  });
});

describe('identity unlink', () => {
  it('makes an account its own identity again; one account left alone is no link', async () => {
    await store.link('discord:9', 'telegram:42');
    expect(await store.unlink('discord:9')).toBe('telegram:42');
    expect(await store.resolve('discord', '9')).toBe('discord:9');
    expect(await store.resolve('telegram', '42')).toBe('telegram:42');
    expect(await keysNow()).toEqual([]);
    expect(await store.unlink('discord:9')).toBeUndefined();
  });

  it('when the identity was named after the leaving account, the rest move to one of theirs', async () => {
    await store.link('discord:9', 'telegram:42');
    await store.link('slack:U1', 'telegram:42');
    await store.unlink('telegram:42');
    expect(await store.resolve('telegram', '42')).toBe('telegram:42');
    const rest = await store.resolveMany('discord', ['9']);
    expect(rest).toEqual(['discord:9']);
    expect(await store.resolve('slack', 'U1')).toBe('discord:9');
    expect(await store.accounts('discord:9')).toEqual(['discord:9', 'slack:U1']);
  });
});

describe('identity purge', () => {
  it('removes every link of the identity and tells the hooks', async () => {
    const purged: string[] = [];
    store.onChange({ purged: (id) => void purged.push(id) });
    await store.link('discord:9', 'telegram:42');
    await store.link('slack:U1', 'telegram:42');
    expect((await store.purge('telegram:42')).sort()).toEqual(['discord:9', 'slack:U1', 'telegram:42']);
    expect(await store.resolve('discord', '9')).toBe('discord:9');
    expect(await store.resolve('slack', 'U1')).toBe('slack:U1');
    expect(await keysNow()).toEqual([]);
    expect(purged).toEqual(['telegram:42']);
  });

  it('of an identity never linked still tells the hooks', async () => {
    const purged: string[] = [];
    store.onChange({ purged: (id) => void purged.push(id) });
    expect(await store.purge('telegram:7')).toEqual([]);
    expect(purged).toEqual(['telegram:7']);
  });

  it('reports a failing hook after the others ran; the links are gone', async () => {
    const purged: string[] = [];
    store.onChange({
      purged: () => {
        throw new Error('memory store down');
      },
    });
    store.onChange({ purged: (id) => void purged.push(id) });
    await store.link('discord:9', 'telegram:42');
    await expect(store.purge('telegram:42')).rejects.toThrow('memory store down');
    expect(purged).toEqual(['telegram:42']);
    expect(await store.resolve('discord', '9')).toBe('discord:9');
  });
});
