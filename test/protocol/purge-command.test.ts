/** `/purge` through the real channel host: replies, dedupe, and what the chat sees afterwards. */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { PURGED_NOTICE, parseCommand } from '../../host/commands.js';
import type { ChannelOutbound, InboundMessage } from '../../src/channel.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';

const fx = useProtocolFixture();

function setup() {
  const sent: string[] = [];
  const outbound: ChannelOutbound = {
    channelId: 'telegram',
    maxMessageChars: 4096,
    async send(_conversationId, text) {
      sent.push(text);
      return { messageId: String(sent.length) };
    },
  };
  const { host } = ingestOnlyHost({ redis: fx.redis, prefix: fx.prefix, logger: pino({ level: 'silent' }), outbound: () => outbound });
  const message = (n: number, text: string): InboundMessage => ({
    conversationId: CID,
    updateKey: `telegram:${n}`,
    chatId: '42',
    sender: { id: 'u1' },
    text,
    messageId: String(n),
  });
  return { host, sent, message };
}

describe('/purge', () => {
  it('parses as a control command, with an optional "stop"', () => {
    expect(parseCommand('/purge')).toEqual({ name: 'purge', args: '' });
    expect(parseCommand('/purge@SteerBot stop')).toEqual({ name: 'purge', args: 'stop' });
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
});
