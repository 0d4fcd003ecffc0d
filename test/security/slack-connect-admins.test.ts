/**
 * Attacks on who counts as an admin of a Slack channel. In a Slack Connect
 * channel, shared with another organization, `users.info` answers for that
 * organization's members with their own workspace's `team_id` and role
 * flags: the owner of any workspace connected to the channel is `is_owner`
 * there. The group-wide commands (`/stop`, `/new`, `/purge`, …) are for the
 * admins of the bot's own workspace and the configured admins only. Driven
 * end to end: signed Events API requests to the real plugin, the real
 * `@slack/web-api` client against the fake Slack, the real host over Redis.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { conversationKeys } from '../../src/redis/keys.js';
import { eventCallback, SLACK_BOT_USER } from '../../testing/fakes/slack-server.js';
import { type SlackHarness, startSlackHarness } from '../channels/slack-harness.js';

/** A channel shared over Slack Connect with the attacker's organization. */
const SHARED = 'C0000SHR';
const ROOT = '1700000100.000100';
const CONVERSATION = `slack:${SHARED}:${ROOT}`;
/** A member of the bot's workspace who starts the conversation. */
const ANN = 'U0000ANN';
/** An admin of the bot's workspace. */
const ADMIN = 'U0000ADM';
/** The owner of the other organization's workspace, as `users.info` shows an external member. */
const EVE = 'U0000EVE';
const EVE_AS_SLACK_SHOWS_HER = {
  team_id: 'T0000EVE',
  name: 'eve',
  is_admin: true,
  is_owner: true,
  is_primary_owner: true,
  is_restricted: false,
  is_stranger: true,
  profile: { team: 'T0000EVE', real_name: 'Eve' },
};

let h: SlackHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const inThread = (user: string, ts: string, text: string) =>
  eventCallback({ type: 'app_mention', channel: SHARED, ts, threadTs: ROOT, user, text: `<@${SLACK_BOT_USER}> ${text}` });

/** Every key of the conversation but the per-update dedupe keys, with what it holds. */
async function conversationState(hh: SlackHarness): Promise<Record<string, string>> {
  const keys = conversationKeys(hh.prefix, CONVERSATION);
  const own = (await hh.keys()).filter((k) => k.includes(`{c:${CONVERSATION}}`) && !k.includes(':dedupe:'));
  const state: Record<string, string> = {};
  for (const k of own) {
    const type = await hh.redis.type(k);
    const value =
      type === 'stream'
        ? await hh.redis.xrange(k, '-', '+')
        : type === 'hash'
          ? await hh.redis.hgetall(k)
          : type === 'list'
            ? await hh.redis.lrange(k, 0, -1)
            : type === 'string'
              ? await hh.redis.get(k)
              : type;
    state[k] = JSON.stringify(value);
  }
  expect(state[keys.log], 'the conversation has a record').toBeDefined();
  return state;
}

describe('slack admins in a Slack Connect channel', () => {
  it("refuses /purge to the owner of another organization's workspace, writing nothing, and takes it from an admin of the bot's workspace", async () => {
    const hh = await startSlackHarness({}, { fake: { admins: [ADMIN], users: { [EVE]: EVE_AS_SLACK_SHOWS_HER } } });
    await hh.post(eventCallback({ type: 'app_mention', channel: SHARED, ts: ROOT, user: ANN, text: `<@${SLACK_BOT_USER}> plan the launch` }));
    const before = await conversationState(hh);

    for (const [ts, command] of [
      ['1700000100.000200', '/purge stop'],
      ['1700000100.000300', '/new'],
      ['1700000100.000400', '/stop'],
    ] as const) {
      const refused = await hh.post(inThread(EVE, ts, command));
      expect(refused.status).toBe(200);
    }
    expect(hh.host.results.slice(1)).toMatchObject([
      { kind: 'command', command: 'purge', reply: 'Only admins can use /purge here.', duplicate: false },
      { kind: 'command', command: 'new', reply: 'Only admins can use /new here.', duplicate: false },
      { kind: 'command', command: 'stop', reply: 'Only admins can use /stop here.', duplicate: false },
    ]);
    // Slack was asked, and said what it says of an external owner: the refusal is the plugin's, not a missing answer.
    expect(hh.fake.callsOf('users.info').map((c) => [c.payload.user, c.outcome])).toEqual([[EVE, 'ok']]);
    expect(await conversationState(hh)).toEqual(before);

    await hh.post(inThread(ADMIN, '1700000100.000500', '/purge stop'));
    expect(hh.host.results.at(-1)).toMatchObject({ kind: 'command', command: 'purge', reply: expect.stringContaining('Deleted this conversation') });
    expect(await hh.redis.exists(conversationKeys(hh.prefix, CONVERSATION).log)).toBe(0);
  });

  it('counts no one whose workspace is not surely the bot’s: another team not marked a stranger, no team id, another Enterprise Grid org', async () => {
    const admin = { is_admin: true, is_owner: true, is_primary_owner: true };
    const hh = await startSlackHarness(
      {},
      {
        fake: {
          enterpriseId: 'E0000OWN',
          admins: [ADMIN],
          users: {
            U0000OTH: { ...admin, team_id: 'T0000OTH', is_stranger: false },
            U0000NOT: { ...admin },
            U0000ORG: { ...admin, team_id: 'T0001', is_stranger: false, enterprise_user: { enterprise_id: 'E0000EVE', is_admin: true, is_owner: true } },
            U0000NOE: { ...admin, team_id: 'T0001', is_stranger: false },
            U0000STR: { ...admin, team_id: 'T0001', is_stranger: true, enterprise_user: { enterprise_id: 'E0000OWN' } },
          },
        },
      },
    );
    const isAdmin = (user: string) => hh.plugin.outbound.isAdmin!(CONVERSATION, user);
    for (const user of ['U0000OTH', 'U0000NOT', 'U0000ORG', 'U0000NOE', 'U0000STR']) expect(await isAdmin(user), user).toBe(false);
    expect(await isAdmin(ADMIN)).toBe(true);
  });
});
