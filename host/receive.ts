/**
 * The host side of the channel contract: `ChannelHost.receive` applies the
 * channel's allow-lists, runs control commands (answered through the
 * channel's outbound side) and ingests everything else with the channel's
 * policy. Redis connection failures become RedisUnavailableError so
 * ingress answers 503 and the platform retries.
 */
import type { Logger } from 'pino';
import type { ChannelHost, ChannelOutbound, InboundMessage, ReceiveResult } from '../src/channel.js';
import type { Dispatch } from '../src/protocol/dispatch.js';
import type { IncomingMessage, IngestResult, InputPolicy } from '../src/protocol/types.js';
import { asRedisUnavailable, type RedisClient } from '../src/redis.js';
import { parseCommand, runCommand } from './commands.js';
import type { HttpServer } from './http.js';

/** Per-channel settings the host applies. */
export interface ChannelSettings {
  /** Input policy of the channel's conversations. Default: the dispatch default. */
  policy?: InputPolicy;
  /** Sender ids allowed to talk to the bot; empty or absent allows everyone. */
  allowedUsers?: readonly string[];
  /** Chat ids the bot answers in; empty or absent allows every chat. */
  allowedChats?: readonly string[];
}

/** What `createChannelHost` needs. */
export interface ChannelHostDeps {
  http: HttpServer;
  redis: RedisClient;
  prefix: string;
  logger: Logger;
  dispatch: Dispatch;
  /** Ingest + enqueue of new runs (`IngestService`). */
  ingest: { ingest(message: IncomingMessage, opts?: { policy?: InputPolicy }): Promise<IngestResult> };
  /** Enqueues a run a command created (`/compact` when idle). */
  enqueue(conversationId: string, runId: string): Promise<void>;
  /** Settings of a channel by its id. Default: none (everyone allowed, dispatch default policy). */
  settings?(channelId: string): ChannelSettings | undefined;
  /** Outbound side of a channel by its id, for command replies. */
  outbound(channelId: string): ChannelOutbound | undefined;
}

const allowed = (list: readonly string[] | undefined, id: string) => !list || list.length === 0 || list.includes(id);

/** Builds the ChannelHost channel plugins start with. */
export function createChannelHost(deps: ChannelHostDeps): ChannelHost {
  const logger = deps.logger.child({ part: 'receive' });
  async function receive(channelId: string, message: InboundMessage): Promise<ReceiveResult> {
    const settings = deps.settings?.(channelId) ?? {};
    if (!allowed(settings.allowedUsers, message.sender.id) || !allowed(settings.allowedChats, message.chatId)) {
      logger.info({ channelId, sender: message.sender.id, chatId: message.chatId }, 'message from outside the allow-list ignored');
      return { kind: 'ignored', reason: 'not-allowed' };
    }
    if (message.text.trim() === '' && !message.attachments?.length) return { kind: 'ignored', reason: 'empty' };
    const command = parseCommand(message.text);
    try {
      if (command) {
        const source = { conversationId: message.conversationId, updateKey: message.updateKey, sender: message.sender };
        const outcome = await runCommand(deps, command, source, settings.policy);
        if (!outcome.duplicate) await replyTo(channelId, message.conversationId, outcome.reply, message.messageId);
        return { kind: 'command', command: command.name, reply: outcome.reply, duplicate: outcome.duplicate };
      }
      const { chatId: _chatId, ...incoming } = message;
      const result = await deps.ingest.ingest(incoming, settings.policy ? { policy: settings.policy } : {});
      return { kind: 'ingested', result };
    } catch (err) {
      throw asRedisUnavailable(err);
    }
  }

  /** Sends a command's reply; a failure is logged, not thrown (the command itself took effect). */
  async function replyTo(channelId: string, conversationId: string, text: string, replyTo: string | undefined): Promise<void> {
    const out = deps.outbound(channelId);
    if (!out) {
      logger.warn({ channelId }, 'no outbound side to answer a command on');
      return;
    }
    try {
      await out.send(conversationId, text, replyTo ? { replyTo } : {});
    } catch (err) {
      logger.warn({ err, channelId, conversationId }, 'could not send a command reply');
    }
  }

  return { receive, http: deps.http, redis: deps.redis, prefix: deps.prefix, logger: deps.logger };
}
