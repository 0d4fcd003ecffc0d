/**
 * The channel host's `receive`: allow-lists, control commands (deduped,
 * answered through the channel's outbound side), ingest with the channel's
 * policy, and Redis failures surfacing as RedisUnavailableError.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type CommandSet, commandSet } from '../../host/commands/index.js';
import { createHttpServer } from '../../host/http.js';
import type { ChannelSettings } from '../../host/receive.js';
import type { ChannelHost, ChannelOutbound, InboundMessage } from '../../src/channel.js';
import { InvalidInputError, RedisUnavailableError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import type { Dispatch } from '../../src/protocol/dispatch.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { isRedisUnavailable } from '../../src/redis/connection.js';
import { freePort } from '../../src/redis/local.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { builtinCommands } from '../helpers/host-features.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const logger = createLogger({ level: 'silent' });
const CID = 'chan:42';

class RecordingOutbound implements ChannelOutbound {
  readonly channelId = 'chan';
  readonly maxMessageChars = 4096;
  readonly sent: Array<{ conversationId: string; text: string; replyTo?: string }> = [];
  async send(conversationId: string, text: string, opts?: { replyTo?: string }) {
    this.sent.push({ conversationId, text, ...(opts?.replyTo && { replyTo: opts.replyTo }) });
    return { messageId: String(this.sent.length) };
  }
}

let redis: Redis;
let prefix: string;
let dispatch: Dispatch;
let out: RecordingOutbound;
let settings: ChannelSettings;
let enqueued: Array<[string, string]>;
let host: ChannelHost;
let n = 0;

function hostOn(client: RedisClient): ChannelHost {
  const made = ingestOnlyHost({
    http: createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis: client, logger }),
    redis: client,
    prefix,
    logger,
    settings: (id) => (id === 'chan' ? settings : undefined),
    outbound: (id) => (id === 'chan' ? out : undefined),
  });
  dispatch = made.dispatch;
  enqueued = made.enqueued;
  return made.host;
}

const msg = (text: string, over: Partial<InboundMessage> = {}): InboundMessage => ({
  conversationId: CID,
  updateKey: `chan:${++n}`,
  chatId: '42',
  sender: { id: 'u1', name: 'Ann' },
  text,
  messageId: `pm${n}`,
  ...over,
});

const keys = async () => (await redis.keys(`${prefix}:*`)).sort();

beforeAll(() => {
  redis = new Redis(redisUrl());
});
afterAll(async () => {
  await redis.quit();
});
beforeEach(() => {
  prefix = testPrefix();
  out = new RecordingOutbound();
  settings = {};
  host = hostOn(redis);
});
afterEach(async () => {
  await cleanupPrefix(redis, prefix);
});

describe('the built-in commands', () => {
  let commands: CommandSet;
  const parseCommand = (text: string) => commands.parse(text);
  beforeAll(async () => {
    commands = await builtinCommands({ redis, prefix: testPrefix() });
  });

  it('finds the control commands, with or without a bot-name suffix, and their arguments', () => {
    expect(parseCommand('/stop')).toEqual({ name: 'stop', args: '' });
    expect(parseCommand('  /stop@MyBot  ')).toEqual({ name: 'stop', args: '' });
    expect(parseCommand('/queue@my_bot followup')).toEqual({ name: 'queue', args: 'followup' });
    expect(parseCommand('/QUEUE Collect')).toEqual({ name: 'queue', args: 'Collect' });
  });

  it('leaves other text and other slash commands to ingest', () => {
    for (const t of ['/start', 'stop', 'please /stop', '/stopnow', '/status-report', '']) expect(parseCommand(t)).toBeUndefined();
  });

  it("knows only the tables' own commands: an object's inherited names are ordinary messages", () => {
    for (const t of ['/constructor', '/toString', '/hasOwnProperty', '/valueOf', '/__proto__']) expect(parseCommand(t)).toBeUndefined();
  });

  it("reserves to a group's admins exactly the commands that change the conversation for everyone", () => {
    expect([...commands.admin].sort()).toEqual(['compact', 'model', 'new', 'purge', 'queue', 'stop', 'unschedule']);
    for (const name of ['status', 'approve', 'deny', 'schedules', 'memory', 'forget']) expect(parseCommand(`/${name}`)?.name).toBe(name);
  });

  it("refuses a feature's table that takes another's command, the access step's /pair or /link, or a name no message can reach", () => {
    const spec = { run: async () => ({ reply: 'mine', duplicate: false }) };
    for (const name of ['status', 'purge', 'approve', 'pair', 'link']) expect(() => commandSet([{ [name]: spec }])).toThrow(/two features define/);
    expect(() => commandSet([{ mine: spec }, { mine: spec }])).toThrow(/two features define the command \/mine/);
    for (const name of ['Mine', 'my-cmd', 'x1']) expect(() => commandSet([{ [name]: spec }])).toThrow(/lower-case letters only/);
    expect(commandSet([{ mine: spec }]).parse('/MINE now')).toEqual({ name: 'mine', args: 'now' });
  });
});

describe('receive', () => {
  describe('who may talk', () => {
    it('is left to the access gate: without one, anyone in any chat is ingested', async () => {
      expect((await host.receive('chan', msg('hi', { sender: { id: 'stranger' }, chatId: '99' }))).kind).toBe('ingested');
    });
  });

  it('ingests a message with the channel policy', async () => {
    // Default (steer): a message for a queued run joins it.
    await host.receive('chan', msg('one'));
    expect(await host.receive('chan', msg('two'))).toMatchObject({ kind: 'ingested', result: { kind: 'joined' } });
    // Channel policy followup: it waits for its own run.
    settings = { policy: 'followup' };
    const other = { conversationId: 'chan:43', chatId: '43' };
    await host.receive('chan', msg('one', other));
    expect(await host.receive('chan', msg('two', other))).toMatchObject({ kind: 'ingested', result: { kind: 'pending', reason: 'policy' } });
  });

  it('ignores an empty message', async () => {
    expect(await host.receive('chan', msg('   '))).toEqual({ kind: 'ignored', reason: 'empty' });
  });

  it('throws InvalidInputError for a bad message, writing nothing', async () => {
    await expect(host.receive('chan', msg('x'.repeat(16_001)))).rejects.toBeInstanceOf(InvalidInputError);
    expect(await keys()).toEqual([]);
  });

  describe('commands', () => {
    it('/stop asks the active run to stop and answers in the conversation, replying to the command', async () => {
      expect(await host.receive('chan', msg('/stop'))).toMatchObject({
        kind: 'command',
        command: 'stop',
        duplicate: false,
        reply: 'Nothing to stop: no run is active.',
      });
      await host.receive('chan', msg('work please'));
      const stop = msg('/stop@MyBot');
      expect(await host.receive('chan', stop)).toMatchObject({ kind: 'command', command: 'stop', reply: 'Cancelled the run before it started.' });
      expect((await dispatch.status(CID)).stop).toBe('stop');
      expect(out.sent.at(-1)).toEqual({ conversationId: CID, text: 'Cancelled the run before it started.', replyTo: stop.messageId });
    });

    it('answers a redelivered command once', async () => {
      const stop = msg('/stop');
      await host.receive('chan', stop);
      expect(await host.receive('chan', stop)).toMatchObject({ kind: 'command', duplicate: true, reply: '' });
      const status = msg('/status');
      await host.receive('chan', status);
      expect(await host.receive('chan', status)).toMatchObject({ kind: 'command', command: 'status', duplicate: true });
      expect(out.sent).toHaveLength(2);
    });

    it('/new resets the conversation', async () => {
      await host.receive('chan', msg('hello'));
      const r = await host.receive('chan', msg('/new'));
      expect(r).toMatchObject({ kind: 'command', command: 'new', reply: expect.stringMatching(/^Started a new conversation.*The current run was stopped\.$/) });
      expect((await dispatch.status(CID)).resetSeq).toBeGreaterThan(0);
    });

    it('/queue <mode> sets the conversation policy; /queue default clears it', async () => {
      expect(await host.receive('chan', msg('/queue collect'))).toMatchObject({ kind: 'command', reply: expect.stringMatching(/^Queue mode set to collect/) });
      expect((await dispatch.status(CID)).policyOverride).toBe('collect');
      await host.receive('chan', msg('/queue default'));
      expect((await dispatch.status(CID)).policyOverride).toBeUndefined();
    });

    it('/queue with a bad or no mode lists the modes and writes nothing', async () => {
      for (const text of ['/queue sideways', '/queue']) {
        const r = await host.receive('chan', msg(text));
        expect(r).toMatchObject({ kind: 'command', command: 'queue', duplicate: false });
        for (const mode of ['steer', 'followup', 'collect', 'interrupt', 'supersede']) expect((r as { reply: string }).reply).toContain(mode);
      }
      expect(await keys()).toEqual([]);
      expect(out.sent).toHaveLength(2);
    });

    it('/status shows the active run, its state, the queue depths and the policy', async () => {
      settings = { policy: 'followup' };
      expect((await host.receive('chan', msg('/status'))) as { reply: string }).toMatchObject({
        reply: 'No active run.\nSteering queue: 0 · Pending: 0\nQueue mode: followup (channel default)',
      });
      const first = await host.receive('chan', msg('do something'));
      const runId = (first as { result: { runId: string } }).result.runId;
      await host.receive('chan', msg('/queue steer'));
      const r = (await host.receive('chan', msg('/status'))) as { reply: string };
      expect(r.reply).toBe(`Active run: ${runId} (queued)\nSteering queue: 0 · Pending: 0\nQueue mode: steer (set with /queue; channel default followup)`);
    });

    it('/status shows a pending /compact and an open compaction breaker', async () => {
      await host.receive('chan', msg('do something'));
      await host.receive('chan', msg('/compact'));
      const pending = (await host.receive('chan', msg('/status'))) as { reply: string };
      expect(pending.reply).toContain('Compaction: /compact requested, applied at the next turn boundary');
      expect(pending.reply).not.toContain('paused');
      await redis.hset(
        `${prefix}:{c:${CID}}:state`,
        'runner.compaction.breaker',
        JSON.stringify({ schema_version: 1, open: true, ineffective: 3, updated_at: 1 }),
      );
      const open = (await host.receive('chan', msg('/status'))) as { reply: string };
      expect(open.reply).toContain('Compaction: paused after 3 ineffective compactions (/compact resumes it)');
    });

    it('/compact asks the active run to compact, or creates and enqueues a compaction run when idle', async () => {
      const idle = await host.receive('chan', msg('/compact'));
      expect(idle).toMatchObject({ kind: 'command', command: 'compact', reply: 'Compacting the conversation.' });
      expect(enqueued).toHaveLength(1);
      expect(enqueued[0]![0]).toBe(CID);
      const busy = await host.receive('chan', msg('/compact'));
      expect(busy).toMatchObject({ reply: expect.stringMatching(/next step/) });
      expect(enqueued).toHaveLength(1);
    });
  });

  describe('when Redis is unreachable', () => {
    it('throws RedisUnavailableError for messages and commands', async () => {
      const dead = new Redis(`redis://127.0.0.1:${await freePort()}`, { maxRetriesPerRequest: 0, retryStrategy: () => 50, lazyConnect: true });
      dead.on('error', () => undefined);
      try {
        const down = hostOn(dead);
        await expect(down.receive('chan', msg('hi'))).rejects.toBeInstanceOf(RedisUnavailableError);
        await expect(down.receive('chan', msg('/stop'))).rejects.toBeInstanceOf(RedisUnavailableError);
      } finally {
        dead.disconnect();
      }
    });

    it('recognises ioredis connection failures, not refused commands', () => {
      const maxRetries = Object.assign(new Error('Reached the max retries per request limit'), { name: 'MaxRetriesPerRequestError' });
      expect(isRedisUnavailable(maxRetries)).toBe(true);
      expect(isRedisUnavailable(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }))).toBe(true);
      expect(isRedisUnavailable(new Error('Connection is closed.'))).toBe(true);
      expect(isRedisUnavailable(new Error('ERR unknown command'))).toBe(false);
      expect(isRedisUnavailable(new InvalidInputError('bad'))).toBe(false);
    });
  });
});
