/** The Teams channel's pieces on their own: the service URL allow-list, activity normalizing, and outbound errors against the fake. */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ServiceUrlPolicy } from '../../plugins/teams/auth.js';
import { createTeamsPlugin } from '../../plugins/teams/channel.js';
import { normalizeActivity } from '../../plugins/teams/normalize.js';
import { ChannelApiError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { type FakeTeams, startFakeTeams, TEAMS_ALICE } from '../../testing/fakes/teams-server.js';
import { cleanupPrefix, testPrefix } from '../../testing/redis.js';
import { redisUrl } from '../helpers/redis.js';
import { teamsTestConfig } from './teams-harness.js';

describe('teams service URL allow-list', () => {
  const policy = new ServiceUrlPolicy(['127.0.0.1'], true);
  it('takes Teams’ Bot Connector hosts over https only, configured hosts over http too, and nothing else', () => {
    expect(policy.allows('https://smba.trafficmanager.net/amer/')).toBe(true);
    expect(policy.allows('https://europe.smba.trafficmanager.net/emea/')).toBe(true);
    expect(policy.allows('https://smba.infra.gcc.teams.microsoft.com/teams/')).toBe(true);
    expect(policy.allows('https://smba.infra.gov.teams.microsoft.us/teams/')).toBe(true);
    expect(policy.allows('http://smba.trafficmanager.net/amer/')).toBe(false);
    expect(policy.allows('http://127.0.0.1:3978/teams/')).toBe(true);
    expect(policy.allows('https://smba.trafficmanager.net.evil.example/')).toBe(false);
    expect(policy.allows('https://user:pw@smba.trafficmanager.net/amer/')).toBe(false);
    expect(policy.allows('not a url')).toBe(false);
    expect(new ServiceUrlPolicy([], false).allows('https://smba.trafficmanager.net/amer/')).toBe(false);
  });

  it('refuses Microsoft hosts under which anyone can register a name (storage accounts, SharePoint tenants) and hosts that are no Bot Connector', () => {
    for (const url of [
      'https://attacker.blob.core.windows.net/teams/',
      'https://contoso.sharepoint.com/teams/',
      'https://attacker.svc.ms/teams/',
      'https://graph.microsoft.com/v1.0/',
      'https://webchat.botframework.com/',
    ]) {
      expect(policy.allows(url), url).toBe(false);
    }
  });
});

describe('teams activity normalizing', () => {
  const base = (over: Record<string, unknown>) => ({
    type: 'message',
    id: '1700000000001',
    serviceUrl: 'https://smba.trafficmanager.net/amer/',
    channelId: 'msteams',
    from: { id: TEAMS_ALICE.id, name: TEAMS_ALICE.name },
    recipient: { id: '28:bot', name: 'steerbot' },
    conversation: { id: '19:abc@thread.tacv2;messageid=1699999999999', conversationType: 'channel' },
    text: '<at>steerbot</at> what is up?',
    entities: [{ type: 'mention', text: '<at>steerbot</at>', mentioned: { id: '28:bot' } }],
    ...over,
  });

  it('makes a channel thread its own group conversation and takes the bot’s mention out of the text', () => {
    const n = normalizeActivity('teams', base({}));
    expect(n).toMatchObject({
      kind: 'message',
      message: {
        conversationId: 'teams:19:abc@thread.tacv2;messageid=1699999999999',
        updateKey: 'teams:19:abc@thread.tacv2;messageid=1699999999999:1700000000001',
        sender: { id: TEAMS_ALICE.id, name: TEAMS_ALICE.name },
        text: 'what is up?',
        group: true,
      },
    });
  });

  it('turns a click on our card into the command, and skips other cards’ submits, its own messages and other activities', () => {
    expect(normalizeActivity('teams', base({ text: undefined, value: { steerbot: '/approve ap_1' } }))).toMatchObject({
      kind: 'message',
      message: { text: '/approve ap_1', interaction: 'button' },
    });
    expect(normalizeActivity('teams', base({ text: undefined, value: { other: 'x' } }))).toEqual({ kind: 'skip', reason: 'not-our-button' });
    expect(normalizeActivity('teams', base({ from: { id: '28:bot' } }))).toEqual({ kind: 'skip', reason: 'own' });
    expect(normalizeActivity('teams', base({ type: 'conversationUpdate' }))).toEqual({ kind: 'skip', reason: 'not-a-message' });
  });

  it('skips a message from another channel of the same Azure Bot (Web Chat, Direct Line, none named), whose clients choose their own sender ids', () => {
    for (const channelId of ['webchat', 'directline', 'emulator', 'MSTEAMS', undefined]) {
      expect(normalizeActivity('teams', base({ channelId })), String(channelId)).toEqual({ kind: 'skip', reason: 'not-teams' });
    }
  });
});

describe('teams outbound errors', () => {
  let teams: FakeTeams;
  let redis: Redis;
  let prefix: string;
  beforeEach(async () => {
    teams = await startFakeTeams();
    redis = new Redis(redisUrl());
    prefix = testPrefix();
  });
  afterEach(async () => {
    await teams.close();
    await cleanupPrefix(redis, prefix);
    await redis.quit();
  });
  const plugin = (over: Record<string, unknown> = {}) =>
    createTeamsPlugin({ ...teamsTestConfig(teams), ...over }, { logger: createLogger({ level: 'silent' }), redis, prefix });

  it('turns a 429 into a ChannelApiError with the Retry-After wait, and a refused client secret into a 401 that does not name it', async () => {
    teams.failNext('send', { status: 429, retryAfterSeconds: 2 });
    const err = await plugin()
      .outbound.send('teams:a:1x', 'hi')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChannelApiError);
    expect(err).toMatchObject({ status: 429, retryAfterMs: 2000 });
    const secret = 'a-wrong-client-secret-0123456789';
    const refused = await plugin({ appPassword: secret })
      .outbound.send('teams:a:1x', 'hi')
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 401 });
    expect(String((refused as Error).message)).not.toContain(secret);
  });

  it('sends nothing to a configured service URL off the allow-list', async () => {
    const err = await plugin({ serviceUrl: 'https://collector.example.net/teams/' })
      .outbound.send('teams:a:1x', 'hi')
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 403 });
    expect(teams.calls).toEqual([]);
  });

  it('fetches the bot token once for many sends', async () => {
    const p = plugin();
    await Promise.all([p.outbound.send('teams:a:1x', 'one'), p.outbound.send('teams:a:1x', 'two'), p.outbound.typing!('teams:a:1x')]);
    await p.outbound.send('teams:a:1x', 'three');
    expect(teams.calls.filter((c) => c.kind === 'token')).toHaveLength(1);
  });
});
