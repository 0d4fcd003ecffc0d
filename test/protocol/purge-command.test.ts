/** `/purge` through the real channel host: replies, dedupe, and what the chat sees afterwards. */
import { describe, expect, it } from 'vitest';
import { commandSet, PURGED_NOTICE } from '../../host/commands/index.js';
import type { ChannelOutbound, InboundMessage } from '../../src/channel.js';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';

const fx = useProtocolFixture();

function setup() {
  const sent: string[] = [];
  /** Conversations the host told a feature of (`recorded`, fresh), and runs it enqueued. */
  const activity: string[] = [];
  const enqueued: string[] = [];
  const outbound: ChannelOutbound = {
    channelId: 'telegram',
    maxMessageChars: 4096,
    async send(_conversationId, text) {
      sent.push(text);
      return { messageId: String(sent.length) };
    },
  };
  const dispatch = fx.dispatch();
  const host = fx.channelHost(dispatch, outbound, {
    enqueue: async (_conversationId, runId) => void enqueued.push(runId),
    features: [{ name: 'activity', recorded: async (input) => void (input.fresh && activity.push(input.conversationId)) }],
  });
  const message = (n: number, text: string): InboundMessage => ({
    conversationId: CID,
    updateKey: `telegram:${n}`,
    chatId: '42',
    sender: { id: 'u1' },
    text,
    messageId: String(n),
  });
  return { host, sent, message, activity, enqueued };
}

/** Keys left under the test prefix that are not dedupe keys. */
async function nonDedupeKeys(): Promise<string[]> {
  return (await fx.allKeys()).filter((key) => !key.includes(':dedupe:'));
}

describe('/purge', () => {
  it('parses as a control command, with an optional "stop"', () => {
    const commands = commandSet([]);
    expect(commands.parse('/purge')).toEqual({ name: 'purge', args: '' });
    expect(commands.parse('/purge@SteerBot stop')).toEqual({ name: 'purge', args: 'stop' });
  });

  it('answers active while a run is active; /purge stop stops it and deletes the conversation', async () => {
    const { host, sent, message } = setup();
    await host.receive('telegram', message(1, 'hello'));
    const refused = await host.receive('telegram', message(2, '/purge'));
    expect(refused).toMatchObject({ kind: 'command', command: 'purge', duplicate: false });
    expect(sent.at(-1)).toMatch(/A run is active\. Send \/purge stop/);
    expect(await fx.redis.exists(fx.keys().log)).toBe(1);

    await host.receive('telegram', message(3, '/purge stop'));
    expect(sent.at(-1)).toMatch(/^Deleted this conversation.*The active run was stopped\. New messages here are not accepted/);
    expect((await fx.allKeys()).filter((k) => !k.includes(':dedupe:'))).toEqual([fx.keys().tombstone]);
  });

  it('a redelivered /purge gets no second reply', async () => {
    const { host, sent, message } = setup();
    await host.receive('telegram', message(1, 'hello'));
    await host.receive('telegram', message(2, '/purge stop'));
    const again = await host.receive('telegram', message(2, '/purge stop'));
    expect(again).toMatchObject({ kind: 'command', duplicate: true });
    expect(sent).toHaveLength(1);
  });

  it('a later message is refused with a notice, once per update', async () => {
    const { host, sent, message } = setup();
    await host.receive('telegram', message(1, 'hello'));
    await host.receive('telegram', message(2, '/purge stop'));
    const r = await host.receive('telegram', message(3, 'are you there?'));
    expect(r).toEqual({ kind: 'ingested', result: { kind: 'purged', seq: 0 } });
    expect(sent.at(-1)).toBe(PURGED_NOTICE);
    await host.receive('telegram', message(3, 'are you there?'));
    expect(sent.filter((t) => t === PURGED_NOTICE)).toHaveLength(1);
  });

  it('answers not_found and already_purged plainly', async () => {
    const { host, sent, message } = setup();
    await host.receive('telegram', message(1, '/purge'));
    expect(sent.at(-1)).toBe('Nothing is stored for this conversation.');
    await host.receive('telegram', message(2, 'hello'));
    await host.receive('telegram', message(3, '/purge stop'));
    await host.receive('telegram', message(4, '/purge'));
    expect(sent.at(-1)).toBe('This conversation was already deleted.');
  });

  describe('control commands after it (afterPurge refuse)', () => {
    /** A conversation with a message and a run, purged; what the chat saw so far. */
    async function purged() {
      const s = setup();
      await s.host.receive('telegram', s.message(1, 'hello'));
      await s.host.receive('telegram', s.message(2, '/purge stop'));
      expect(await nonDedupeKeys()).toEqual([fx.keys().tombstone]);
      return { ...s, sentBefore: s.sent.length, activityBefore: s.activity.length, enqueuedBefore: s.enqueued.length };
    }

    it.each([
      ['/stop', 'stop'],
      ['/new', 'new'],
      ['/queue collect', 'queue'],
      ['/queue default', 'queue'],
      ['/compact', 'compact'],
      ['/status', 'status'],
    ])('%s is answered once with the purged notice and writes nothing but its dedupe key', async (text, name) => {
      const { host, sent, message, activity, enqueued, sentBefore, activityBefore, enqueuedBefore } = await purged();

      const r = await host.receive('telegram', message(3, text));
      expect(r).toEqual({ kind: 'command', command: name, reply: PURGED_NOTICE, duplicate: false });
      expect(sent.slice(sentBefore)).toEqual([PURGED_NOTICE]);
      // Nothing recorded: no record, no meta, no run (and none enqueued), no activity.
      expect(await nonDedupeKeys()).toEqual([fx.keys().tombstone]);
      expect(await fx.redis.exists(fx.keys().log, fx.keys().meta, fx.keys().active)).toBe(0);
      expect(await fx.redis.get(fx.keys().dedupe('telegram:3'))).toBe('0');
      expect(enqueued).toHaveLength(enqueuedBefore);
      expect(activity).toHaveLength(activityBefore);

      const before = await fx.snapshot();
      const again = await host.receive('telegram', message(3, text));
      expect(again).toEqual({ kind: 'command', command: name, reply: '', duplicate: true });
      expect(sent.slice(sentBefore)).toEqual([PURGED_NOTICE]);
      expect(await fx.snapshot()).toEqual(before);
    });

    it('/approve and /purge get their own answers once (no request; already deleted) and write nothing', async () => {
      const { host, sent, message, sentBefore } = await purged();
      const id = `ap_${'0'.repeat(24)}`;
      await host.receive('telegram', message(3, `/approve ${id}`));
      await host.receive('telegram', message(4, '/purge'));
      expect(sent.slice(sentBefore)).toEqual([`No approval request ${id} in this conversation.`, 'This conversation was already deleted.']);
      expect(await nonDedupeKeys()).toEqual([fx.keys().tombstone]);

      expect(await host.receive('telegram', message(3, `/approve ${id}`))).toMatchObject({ duplicate: true });
      expect(await host.receive('telegram', message(4, '/purge'))).toMatchObject({ duplicate: true });
      expect(sent).toHaveLength(sentBefore + 2);
    });
  });
});
