/**
 * The channel plugin contract: a vitest suite every channel plugin must pass.
 *
 *   channelPluginContract({ name: 'telegram', makeHarness: async (env) => harness, capabilities: { typing: true, edit: true } });
 *
 * The suite owns the host side: a real HTTP server (`env.host.http`), and the
 * real channel host (`createChannelHost`: allow-lists, control commands,
 * ingest through the real `Dispatch` on a random Redis key prefix — new runs
 * are recorded, never executed). `makeHarness(env)` starts the platform fake
 * and creates the plugin (not started); the suite then starts it with
 * `env.host`, starts listening, and runs the cases. It needs a real Redis
 * (`redisUrl`, default `REDIS_URL` or `redis://127.0.0.1:6379`). The harness turns the
 * suite's neutral messages into platform updates (`inject`) and reports
 * what the platform received from the bot (`received`).
 *
 * Cases: one text message → one `receive` with the right update key,
 * conversation id, sender and text, and one record entry; the same update
 * three times → one record entry; a sender outside the allow-list → ignored,
 * nothing written; `/status` answered through the outbound side, once even
 * when redelivered; `send` returns a message id and the platform gets the
 * text; a reply over `maxMessageChars` arrives through delivery split into
 * messages within the limit, nothing lost; and one case for each capability
 * the plugin declares (`ChannelCapabilities`): typing, edit, status
 * reactions, buttons.
 */
import { Redis } from 'ioredis';
import type { ChannelHost, ChannelPlugin, ChannelSettings, InboundMessage, MessageButton, ReceiveResult } from 'steerbot/channel';
import type { ReactionStatus } from 'steerbot/plugin';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen } from '../host/http.js';
import { RunDelivery } from '../runner/delivery/sink.js';
import { createLogger, type Logger } from '../src/logger.js';
import { readRange } from '../src/record/read.js';
import { conversationKeys } from '../src/redis/keys.js';
import { ingestOnlyHost } from './channel-host.js';
import { cleanupPrefix, defaultRedisUrl, testPrefix } from './redis.js';
import { waitFor } from './wait.js';

/** What `makeHarness` gets. */
export interface ChannelContractEnv {
  /** The channel host the suite starts the plugin with (its `receive` calls are recorded). */
  host: ChannelHost;
  /** This test's Redis connection and key prefix (pass them to the plugin as `ChannelDeps`). */
  redis: Redis;
  prefix: string;
  logger: Logger;
  /** Base URL of the host's HTTP server, e.g. `http://127.0.0.1:43121`; valid once the suite listens (after `makeHarness`). */
  baseUrl(): string;
}

/** A neutral text message the harness turns into a platform update. Ids are digits, valid on every platform. */
export interface ContractMessage {
  /** Platform update identity (Telegram `update_id`, Discord message id, webhook `id`). */
  updateId: string;
  /** Platform chat id (a Telegram chat, a Discord DM channel, a webhook conversation). */
  chatId: string;
  sender: { id: string; name: string };
  text: string;
}

/** What a channel's test harness provides. */
export interface ChannelHarness {
  /** The plugin under test, created with `env`'s Redis, prefix and logger; not started (the suite starts it). */
  plugin: ChannelPlugin;
  /** Delivers `m` the way the platform does (webhook POST, poll answer, gateway event). May resolve before `receive` is called. */
  inject(m: ContractMessage): Promise<void>;
  /**
   * The update key and conversation id the plugin must produce for `m`, and
   * the sender id when the platform's differs from `m.sender.id` (an email
   * address for the sender the harness mails from).
   */
  expected(m: ContractMessage): { updateKey: string; conversationId: string; senderId?: string };
  /** Current texts (edits applied) of the messages the bot sent to chat `chatId`, in order. */
  received(chatId: string): Promise<string[]>;
  /** How many typing indications the platform saw for chat `chatId`. Required when the plugin has `outbound.typing`. */
  typingCount?(chatId: string): Promise<number>;
  /**
   * The bot's current reactions on message `messageId` of chat `chatId`, as the
   * platform shows them (emoji, or Slack's names), replaced ones gone. Required
   * with the `reactions` capability.
   */
  reactions?(chatId: string, messageId: string): Promise<string[]>;
  /** The files the bot sent to chat `chatId`, in order: their names and bytes as the platform keeps them. Required with the `files` capability. */
  files?(chatId: string): Promise<Array<{ name: string; bytes: Uint8Array }>>;
  /** The buttons under the last message the bot sent to chat `chatId` ([] without any). Required with the `buttons` capability. */
  buttons?(chatId: string): Promise<MessageButton[]>;
  /**
   * Clicks the button with `command` under the bot's last message in chat
   * `chatId` as `sender`, the way the platform delivers it (a Telegram callback
   * query, a Discord component interaction, Slack `block_actions`, …). May
   * resolve before `receive` is called. Required with the `buttons` capability.
   */
  click?(chatId: string, command: string, sender: ContractMessage['sender']): Promise<void>;
  /** Stops the platform fake (the suite stops the plugin). */
  close(): Promise<void>;
}

/** Builds a harness for one test. */
export type MakeHarness = (env: ChannelContractEnv) => Promise<ChannelHarness>;

interface Recorded {
  channelId: string;
  message: InboundMessage;
  result?: ReceiveResult;
  error?: unknown;
}

/** `value`, or a failure naming what the declared capability needs. */
function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`the channel declares this capability, but it has no ${what}`);
  return value;
}

const words = (texts: string[]) => texts.join(' ').split(/\s+/).filter(Boolean);

/** Optional features a channel plugin declares; each adds its case to the suite. */
export interface ChannelCapabilities {
  /** `outbound.typing` shows a typing indicator (the harness's `typingCount` sees it). */
  typing?: boolean;
  /** `outbound.edit` replaces a sent message's text. */
  edit?: boolean;
  /**
   * `outbound.react` shows status reactions, one at a time, with these emoji
   * (the ones the harness configured, as the harness's `reactions` reports
   * them: Telegram `👍`, Slack `white_check_mark`).
   */
  reactions?: Record<ReactionStatus, string>;
  /**
   * `SendOptions.buttons` show under the message, and a click comes back as one
   * receive call whose text is the button's command, from the clicker.
   * `interaction`: marked `interaction: 'button'` (Telegram, Discord, Slack,
   * WhatsApp); `text`: the platform sends the command as the person's own
   * message (LINE quick replies, the webhook channel), so it is an ordinary one.
   */
  buttons?: 'interaction' | 'text';
  /** `outbound.sendFile` sends a file natively (the harness's `files` sees its name and bytes), within the `maxFileBytes` it declares. */
  files?: boolean;
}

/** Options of `channelPluginContract`. */
export interface ChannelContractOptions {
  /** Names the suite: `channel contract: <name>`. */
  name: string;
  /** Builds the harness of one test. */
  makeHarness: MakeHarness;
  /** Optional outbound features the plugin declares; each adds its case. Default: none. */
  capabilities?: ChannelCapabilities;
  /** The Redis the suite runs on. Default: `REDIS_URL`, else `redis://127.0.0.1:6379`. */
  redisUrl?: string;
  /** How long the suite waits for what the platform shows (a receive, a reply), in ms. Default 10 000; a slower platform (mail through real servers) sets more. */
  waitMs?: number;
}

/** Registers the contract suite for a channel plugin (call it at the top level of a vitest test file). */
// biome-ignore lint/complexity/noExcessiveLinesPerFunction: a contract suite: one describe whose tests share the harness its hooks set up; its length is the list of tests
export function channelPluginContract({ name, makeHarness, capabilities = {}, redisUrl = defaultRedisUrl(), waitMs = 10_000 }: ChannelContractOptions): void {
  // biome-ignore lint/complexity/noExcessiveLinesPerFunction: a contract suite: one describe whose tests share the harness its hooks set up; its length is the list of tests
  describe(`channel contract: ${name}`, () => {
    let redis: Redis;
    let prefix: string;
    let http: HttpServer;
    let harness: ChannelHarness;
    let address: string;
    let settings: ChannelSettings = {};
    // The `access` config section the host applies (as written); undefined: every channel open.
    let access: unknown;
    const calls: Recorded[] = [];
    let n = 0;
    const msg = (text: string, over: Partial<ContractMessage> = {}): ContractMessage => ({
      updateId: String(900_000 + ++n),
      chatId: '4242',
      sender: { id: '777', name: 'Ann' },
      text,
      ...over,
    });
    const callsFor = (updateKey: string) => calls.filter((c) => c.message.updateKey === updateKey && (c.result || c.error));
    const waitForReceive = (m: ContractMessage) => waitFor(() => callsFor(harness.expected(m).updateKey)[0], waitMs, `receive of update ${m.updateId}`);
    const recordOf = async (conversationId: string) => readRange(redis, conversationKeys(prefix, conversationId).log);
    const keys = async () => (await redis.keys(`${prefix}:*`)).filter((k) => k.includes('{c:')).sort();

    beforeEach(async () => {
      redis = new Redis(redisUrl);
      prefix = testPrefix();
      calls.length = 0;
      settings = {};
      access = undefined;
      const logger = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
      http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
      let plugin: ChannelPlugin | undefined;
      const { host: inner } = ingestOnlyHost({
        http,
        redis,
        prefix,
        logger,
        settings: () => settings,
        outbound: (id) => (plugin?.id === id ? plugin.outbound : undefined),
        access: () => access,
      });
      const host: ChannelHost = {
        ...inner,
        async receive(channelId, message) {
          const call: Recorded = { channelId, message };
          calls.push(call);
          try {
            call.result = await inner.receive(channelId, message);
            return call.result;
          } catch (err) {
            call.error = err;
            throw err;
          }
        },
      };
      harness = await makeHarness({ host, redis, prefix, logger, baseUrl: () => address });
      plugin = harness.plugin;
      await harness.plugin.start(host);
      address = await listen(http, { host: '127.0.0.1', port: 0 });
    });

    afterEach(async () => {
      await harness?.plugin.stop();
      await harness?.close();
      await http?.close();
      await cleanupPrefix(redis, prefix);
      await redis.quit();
    });

    it('turns a text message into one receive call with its update key, conversation id, sender and text', async () => {
      const m = msg('hello there');
      await harness.inject(m);
      const call = await waitForReceive(m);
      const { updateKey, conversationId, senderId = m.sender.id } = harness.expected(m);

      expect(call.channelId).toBe(harness.plugin.id);
      expect(call.message).toMatchObject({ updateKey, conversationId, text: 'hello there', sender: { id: senderId } });
      expect(call.message.conversationId.startsWith(`${harness.plugin.id}:`)).toBe(true);
      expect(call.result).toMatchObject({ kind: 'ingested', result: { kind: 'new-run' } });
      const entries = (await recordOf(conversationId)).filter((e) => e.kind === 'message.received');
      expect(entries).toMatchObject([{ updateKey, text: 'hello there', sender: { id: senderId } }]);
    });

    it('ingests an update delivered three times once', async () => {
      const m = msg('only once please');
      for (let i = 0; i < 3; i++) await harness.inject(m);
      // A later message in the same chat: once it is received, the repeats before it were handled.
      const barrier = msg('after the repeats');
      await harness.inject(barrier);
      await waitForReceive(barrier);

      const { updateKey, conversationId } = harness.expected(m);
      const results = callsFor(updateKey).map((c) => (c.result?.kind === 'ingested' ? c.result.result.kind : c.result?.kind));
      expect(results[0]).toBe('new-run');
      expect(results.slice(1).every((k) => k === 'duplicate')).toBe(true);
      const entries = (await recordOf(conversationId)).filter((e) => e.kind === 'message.received' && e.updateKey === updateKey);
      expect(entries).toHaveLength(1);
    });

    it('refuses a sender outside the access allow-list and writes nothing to the conversation', async () => {
      access = { channels: { [harness.plugin.id]: { policy: 'allowlist', users: ['someone-else'] } } };
      // Sending the refusal notice may touch the channel's own outbound keys (`:p:…`, a reply stream); nothing else.
      const stateKeys = async () => (await keys()).filter((k) => !/:(p:|replies$)/.test(k));
      const before = await stateKeys();
      const m = msg('let me in');
      await harness.inject(m);
      const call = await waitForReceive(m);
      expect(call.result).toEqual({ kind: 'ignored', reason: 'refused' });
      expect(await stateKeys()).toEqual(before);
      expect(await recordOf(harness.expected(m).conversationId)).toEqual([]);
    });

    it('answers /status through its outbound side, once even when the command is redelivered', async () => {
      const m = msg('/status');
      await harness.inject(m);
      await harness.inject(m);
      const barrier = msg('after the command');
      await harness.inject(barrier);
      await waitForReceive(barrier);
      const replies = await waitFor(
        async () => {
          const texts = (await harness.received(m.chatId)).filter((t) => t.startsWith('No active run.'));
          return texts.length > 0 && texts;
        },
        waitMs,
        '/status reply',
      );
      expect(replies).toHaveLength(1);
      expect(callsFor(harness.expected(m).updateKey)[0]?.result).toMatchObject({ kind: 'command', command: 'status', duplicate: false });
    });

    it('sends a text and returns its platform message id', async () => {
      // A conversation the platform has seen (a thread to answer in, for email).
      const m = msg('hi');
      await harness.inject(m);
      await waitForReceive(m);
      const { conversationId } = harness.expected(m);
      const { messageId } = await harness.plugin.outbound.send(conversationId, 'hello from the bot');
      expect(typeof messageId).toBe('string');
      expect(messageId.length).toBeGreaterThan(0);
      expect(await waitFor(async () => (await harness.received(m.chatId)).includes('hello from the bot'), waitMs, 'sent text')).toBe(true);
    });

    it('gets a reply over maxMessageChars through delivery as messages within the limit, nothing lost', async () => {
      const max = harness.plugin.outbound.maxMessageChars;
      const paragraph = (i: number) => Array.from({ length: 40 }, (_, j) => `w${i}.${j}`).join(' ');
      const parts: string[] = [];
      for (let i = 0; parts.join('\n\n').length < max * 2.5; i++) parts.push(paragraph(i));
      const text = parts.join('\n\n');
      const m = msg('long one');
      await harness.inject(m);
      await waitForReceive(m);
      const { conversationId } = harness.expected(m);
      const delivery = new RunDelivery({
        client: redis,
        prefix,
        conversationId,
        runId: 'rcontract',
        resolve: () => harness.plugin.outbound,
        logger: createLogger({ level: 'silent' }),
      });
      await delivery.message(text);
      const got = await waitFor(
        async () => {
          const texts = await harness.received(m.chatId);
          return words(texts).length >= words([text]).length && texts;
        },
        waitMs,
        'split reply',
      );
      expect(got.length).toBeGreaterThanOrEqual(3);
      for (const t of got) expect(t.length).toBeLessThanOrEqual(max);
      expect(words(got)).toEqual(words([text]));
    });

    if (capabilities.typing) {
      it('shows typing', async () => {
        const m = msg('hi');
        expect(harness.plugin.outbound.typing).toBeTypeOf('function');
        await harness.plugin.outbound.typing!(harness.expected(m).conversationId);
        expect(await waitFor(async () => (await harness.typingCount!(m.chatId)) > 0, waitMs, 'typing')).toBe(true);
      });
    }

    if (capabilities.edit) {
      it('edits a sent message in place', async () => {
        const m = msg('hi');
        const { conversationId } = harness.expected(m);
        expect(harness.plugin.outbound.edit).toBeTypeOf('function');
        const { messageId } = await harness.plugin.outbound.send(conversationId, 'draft answer');
        await harness.plugin.outbound.edit!(conversationId, messageId, 'final answer');
        const texts = await waitFor(
          async () => {
            const t = await harness.received(m.chatId);
            return t.includes('final answer') && t;
          },
          waitMs,
          'edited text',
        );
        expect(texts).not.toContain('draft answer');
      });
    }

    if (capabilities.reactions) {
      const emoji = capabilities.reactions;
      it("shows a run's status as one reaction on the person's message, each replacing the last", async () => {
        const react = required(harness.plugin.outbound.react, 'outbound.react');
        const shown = required(harness.reactions, 'harness reactions()').bind(harness);
        // The two lives of a message: taken then answered, taken then failed (a takeover may repeat a status).
        for (const [text, end] of [
          ['react to this', 'answered'],
          ['and to this', 'failed'],
        ] as const) {
          const m = msg(text);
          await harness.inject(m);
          const messageId = required((await waitForReceive(m)).message.messageId, 'messageId in the receive call');
          const { conversationId } = harness.expected(m);
          // `react` resolves once the platform took it: what the fake shows then is final.
          await react(conversationId, messageId, 'taken');
          await react(conversationId, messageId, 'taken');
          expect(await shown(m.chatId, messageId)).toEqual([emoji.taken]);
          await react(conversationId, messageId, end);
          expect(await shown(m.chatId, messageId)).toEqual([emoji[end]]);
          await react(conversationId, messageId, end);
          expect(await shown(m.chatId, messageId)).toEqual([emoji[end]]);
        }
        // A failed message a follow-up run answers shows the answer alone.
        const m = msg('fail, then answer this');
        await harness.inject(m);
        const messageId = required((await waitForReceive(m)).message.messageId, 'messageId in the receive call');
        const { conversationId } = harness.expected(m);
        for (const status of ['taken', 'failed', 'taken', 'answered'] as const) await react(conversationId, messageId, status);
        expect(await shown(m.chatId, messageId)).toEqual([emoji.answered]);
      });
    }

    if (capabilities.files) {
      it('sends a file natively, with its name and bytes intact, and declares the largest it takes', async () => {
        const send = required(harness.plugin.outbound.sendFile, 'outbound.sendFile').bind(harness.plugin.outbound);
        const files = required(harness.files, 'harness files()').bind(harness);
        expect(harness.plugin.outbound.maxFileBytes).toBeGreaterThan(0);
        const m = msg('send me the notes');
        await harness.inject(m);
        await waitForReceive(m);
        const { conversationId } = harness.expected(m);
        const pdf = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.from([0, 1, 2, 255]), Buffer.from('\n%%EOF\n')]);
        await send(conversationId, { name: 'notes.pdf', mimeType: 'application/pdf', bytes: pdf, caption: 'the notes' });
        const sent = await files(m.chatId);
        expect(sent.map((f) => f.name)).toEqual(['notes.pdf']);
        expect(Buffer.from(sent[0]!.bytes).equals(pdf)).toBe(true);
      });
    }

    if (capabilities.buttons) {
      const marked = capabilities.buttons === 'interaction';
      it('shows buttons under a message and turns a click into one receive call with its command, from the clicker', async () => {
        const buttonsOf = required(harness.buttons, 'harness buttons()').bind(harness);
        const click = required(harness.click, 'harness click()').bind(harness);
        const m = msg('hi');
        const { conversationId } = harness.expected(m);
        // `/choose` of a question that does not exist: a control command the host answers without a run.
        const buttons = [
          { label: 'Small', command: '/choose qu_000000000000000000000000 1' },
          { label: 'Large', command: '/choose qu_000000000000000000000000 2' },
        ];
        await harness.plugin.outbound.send(conversationId, 'Which size?', { buttons });
        // Some channels hand the message to the platform after `send` resolves (the webhook channel's callback pump).
        const shown = await waitFor(
          async () => {
            const b = await buttonsOf(m.chatId);
            return b.length > 0 && b;
          },
          waitMs,
          'buttons on the platform',
        );
        expect(shown).toEqual(buttons);

        await click(m.chatId, buttons[1]!.command, m.sender);
        const ofClick = () => calls.filter((c) => c.message.text === buttons[1]!.command && (c.result || c.error));
        const call = await waitFor(() => ofClick()[0], waitMs, 'receive of the click');
        expect(call.channelId).toBe(harness.plugin.id);
        expect(call.message).toMatchObject({ conversationId, text: buttons[1]!.command, sender: { id: harness.expected(m).senderId ?? m.sender.id } });
        expect(call.message.interaction).toBe(marked ? 'button' : undefined);
        expect(call.result).toMatchObject({ kind: 'command', command: 'choose' });
        expect(ofClick()).toHaveLength(1);
      });
    }
  });
}
