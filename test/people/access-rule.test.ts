/** The access rule a schedule's fire asks for its owner in its conversation: the gate's rule, from the configuration and the store's approvals. */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { accessSchema } from '../../src/config/schema.js';
import { AccessRules, type AccessRulesOptions } from '../../src/people/access-rule.js';
import { IdentityStore } from '../../src/people/identity.js';
import { peopleKeys } from '../../src/redis/keys.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const redis = new Redis(redisUrl());
let prefix: string;
let identities: IdentityStore;

beforeEach(() => {
  prefix = testPrefix();
  identities = new IdentityStore({ redis, prefix });
});
afterEach(() => cleanupPrefix(redis, prefix));
afterAll(() => redis.quit());

const rules = (channels: Record<string, unknown>, o: Partial<AccessRulesOptions> = {}) =>
  new AccessRules({ access: accessSchema.parse({ channels }), identities, redis, prefix, ...o });
const approve = (identity: string) => redis.sadd(peopleKeys(prefix).paired, identity);

describe('AccessRules.decide', () => {
  it('allows anyone on a channel access does not list or leaves open, and no one else unlisted', async () => {
    const r = rules({ discord: { policy: 'open' }, telegram: { policy: 'allowlist', users: ['1'] } });
    expect(await r.decide({ conversationId: 'slack:C1', identity: 'slack:U1', group: false })).toEqual({ kind: 'allow' });
    expect(await r.decide({ conversationId: 'discord:9', identity: 'discord:5', group: true })).toEqual({ kind: 'allow' });
    expect(await r.decide({ conversationId: 'telegram:1', identity: 'telegram:1', group: false })).toEqual({ kind: 'allow' });
    expect(await r.decide({ conversationId: 'telegram:2', identity: 'telegram:2', group: false })).toEqual({ kind: 'refuse', reason: 'not-allowed' });
  });

  it('finds a listed account or an approval through links, on the conversation’s own channel', async () => {
    const r = rules({ telegram: { policy: 'allowlist', users: ['42'] }, discord: { policy: 'pairing' } });
    // The schedule names the Discord account; it was linked into the identity Telegram user 42 is.
    await identities.link('discord:7', 'telegram:42');
    expect(await r.decide({ conversationId: 'telegram:42', identity: 'discord:7', group: false })).toEqual({ kind: 'allow' });
    expect(await r.decide({ conversationId: 'discord:dm7', identity: 'discord:7', group: false })).toEqual({ kind: 'refuse', reason: 'not-paired' });
    await approve('telegram:42');
    expect(await r.decide({ conversationId: 'discord:dm7', identity: 'discord:7', group: false })).toEqual({ kind: 'allow' });
  });

  it('asks a group schedule for a listed group (its threads too), of its owner only with `members`, and of an admin nothing', async () => {
    const r = rules({
      telegram: { policy: 'pairing', groups: ['-100'], admins: ['9'], members: true },
      'webhook:crm': { policy: 'allowlist', groups: ['ops'] },
    });
    expect(await r.decide({ conversationId: 'telegram:-100:7', identity: 'telegram:1', group: true })).toEqual({ kind: 'refuse', reason: 'not-paired' });
    await approve('telegram:1');
    expect(await r.decide({ conversationId: 'telegram:-100:7', identity: 'telegram:1', group: true })).toEqual({ kind: 'allow' });
    // A look-alike chat id is not the listed group.
    expect(await r.decide({ conversationId: 'telegram:-1000', identity: 'telegram:1', group: true })).toEqual({ kind: 'refuse', reason: 'group-not-allowed' });
    expect(await r.decide({ conversationId: 'telegram:-1000', identity: 'telegram:9', group: true })).toEqual({ kind: 'allow' });
    // A named channel is found whole (`webhook:crm`, not `webhook`); without `members`, anyone in a listed group.
    expect(await r.decide({ conversationId: 'webhook:crm:ops', identity: 'webhook:crm:u1', group: true })).toEqual({ kind: 'allow' });
    expect(await r.decide({ conversationId: 'webhook:crm:sales', identity: 'webhook:crm:u1', group: true })).toEqual({
      kind: 'refuse',
      reason: 'group-not-allowed',
    });
  });

  it('lets an ownerless schedule (the operator’s) fire in a direct chat or a listed group, not in a group no longer listed', async () => {
    const r = rules({ telegram: { policy: 'pairing', groups: ['-100'], members: true } });
    expect(await r.decide({ conversationId: 'telegram:5', identity: undefined, group: false })).toEqual({ kind: 'allow' });
    expect(await r.decide({ conversationId: 'telegram:-100', identity: undefined, group: true })).toEqual({ kind: 'allow' });
    expect(await r.decide({ conversationId: 'telegram:-200', identity: undefined, group: true })).toEqual({ kind: 'refuse', reason: 'group-not-allowed' });
  });

  it('counts no listed id on a channel whose senders name themselves, and a plugin’s own admins elsewhere', async () => {
    const settings = { web: { unverifiedSenders: true }, telegram: { admins: ['8'] } } as const;
    const r = rules(
      { web: { policy: 'pairing' }, telegram: { policy: 'allowlist' } },
      { settingsOf: (cid) => (cid.startsWith('web:') ? settings.web : settings.telegram) },
    );
    // A public web chat's access config cannot list users (the host refuses to start); an approval still counts there.
    expect(await r.decide({ conversationId: 'web:v1', identity: 'web:v1', group: false })).toEqual({ kind: 'refuse', reason: 'not-paired' });
    await approve('web:v1');
    expect(await r.decide({ conversationId: 'web:v1', identity: 'web:v1', group: false })).toEqual({ kind: 'allow' });
    expect(await r.decide({ conversationId: 'telegram:8', identity: 'telegram:8', group: false })).toEqual({ kind: 'allow' });
  });
});
