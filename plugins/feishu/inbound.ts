/**
 * The Feishu / Lark channel's inbound side: the SDK's `EventDispatcher`
 * hands it `im.message.receive_v1` and `card.action.trigger` (from the long
 * connection, or from the callback route once checked); messages and clicks
 * are normalized and handed to the host, one at a time in arrival order. A
 * click is answered with a toast of the command's reply for the clicker,
 * and the card replaced when the command changed something. A click names
 * its chat but not the chat's kind: it counts as a one-to-one chat's only
 * when a message of that conversation said so (`p2pKey`), else as a
 * group's, so the group's access and its admin-only commands apply. Its
 * state (the bot's open id, the tail of the queue) is declared as fields.
 */
import { type Client, EventDispatcher, LoggerLevel } from '@larksuiteoapi/node-sdk';
import type { ChannelHost } from 'steerbot/channel';
import { InvalidInputError, type Logger, type RedisClient, storage } from 'steerbot/plugin';
import { clickAnswer } from './card.js';
import { FeishuApiError } from './errors.js';
import { cardActionSchema, messageEventSchema } from './event-schema.js';
import { p2pKey } from './keys.js';
import { normalizeClick, normalizeMessage } from './normalize.js';

/** The SDK's logger on ours: warnings and errors only (its debug lines name the long connection's ticket). */
export function sdkLogger(logger: Logger) {
  const line = (msg: unknown[]) => msg.map((m) => (m instanceof Error ? m.message : typeof m === 'string' ? m : JSON.stringify(m))).join(' ');
  return {
    error: (...msg: unknown[]) => logger.error(`feishu sdk: ${line(msg)}`),
    warn: (...msg: unknown[]) => logger.warn(`feishu sdk: ${line(msg)}`),
    info: (...msg: unknown[]) => logger.debug(`feishu sdk: ${line(msg)}`),
    debug: () => undefined,
    trace: () => undefined,
  };
}

/** Reads a zod result, or throws InvalidInputError naming the first problem (answered 400, nothing written). */
function parsed<T>(r: { success: true; data: T } | { success: false; error: { issues: Array<{ path: PropertyKey[]; message: string }> } }, what: string): T {
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new InvalidInputError(`bad ${what}: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`);
}

/** The inbound side of one Feishu / Lark channel. */
export class FeishuInbound {
  /** The bot's open id (`GET /open-apis/bot/v3/info`), once `identify` ran: a group message must mention it. */
  botOpenId: string | undefined;
  /** The event being handled: events are handed over one at a time, in the order they arrived. */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly channelId: string,
    private readonly logger: Logger,
    private readonly store: { redis: RedisClient; prefix: string },
  ) {}

  /** Reads the bot's open id. Throws FeishuApiError when the platform refuses the app's credentials. */
  async identify(client: Client): Promise<string> {
    const info = (await client.request({ method: 'GET', url: '/open-apis/bot/v3/info' })) as { code?: number; msg?: string; bot?: { open_id?: unknown } };
    const openId = info.bot?.open_id;
    if (info.code !== 0 || typeof openId !== 'string')
      throw new FeishuApiError(`feishu bot info failed: ${info.code ?? ''} ${info.msg ?? 'no open_id'}`.trim());
    this.botOpenId = openId;
    return openId;
  }

  /**
   * The dispatcher a transport hands its events to. `ackBadInput`: a bad
   * event is answered (and logged) rather than thrown, for the long
   * connection, where a thrown error is acknowledged as a failure and the
   * event sent again, unchanged; the callback route answers it 400 instead.
   */
  dispatcher(host: ChannelHost, ackBadInput: boolean): EventDispatcher {
    const handler = (fn: (data: unknown) => Promise<Record<string, unknown>>) => (data: unknown) =>
      this.serially(() => fn(data)).catch((err: unknown) => {
        if (!ackBadInput || !(err instanceof InvalidInputError)) throw err;
        this.logger.warn({ err }, 'feishu event rejected');
        return { ok: false, error: err.message };
      });
    return new EventDispatcher({ logger: sdkLogger(this.logger), loggerLevel: LoggerLevel.warn }).register({
      'im.message.receive_v1': handler((data) => this.handleMessage(host, data)),
      'card.action.trigger': handler((data) => this.handleClick(host, data)),
    } as Record<string, (data: unknown) => Promise<unknown>>);
  }

  private serially<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn, fn);
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** One message event: `{ ok, result | ignored }`. Throws InvalidInputError (bad event) or RedisUnavailableError (store down). */
  async handleMessage(host: ChannelHost, data: unknown): Promise<Record<string, unknown>> {
    const n = normalizeMessage(this.channelId, parsed(messageEventSchema.safeParse(data), 'message event'), this.botOpenId);
    if (n.kind === 'skip') {
      // A content off its type's shape is worth an operator's look (acknowledged all the same: sent again, it would be the same).
      if (n.problem !== undefined) this.logger.warn({ reason: n.reason, problem: n.problem }, 'feishu message content unreadable; ignored');
      else this.logger.debug({ reason: n.reason }, 'feishu message ignored');
      return { ok: true, ignored: n.reason };
    }
    const result = await host.receive(this.channelId, n.message);
    // Noted once the host took it (the answer, and any buttons in it, come later): what the clicks in the chat read.
    // Not for a purged conversation, which keeps nothing until its tombstone lapses.
    const taken = result.kind === 'command' || (result.kind === 'ingested' && result.result.kind !== 'purged');
    if (!n.message.group && taken) await storage.redisCall(() => this.store.redis.set(p2pKey(this.store.prefix, n.message.conversationId), '1'));
    return result.kind === 'ignored' ? { ok: true, ignored: result.reason } : { ok: true, result: result.kind };
  }

  /** One card click: the answer the platform shows (a toast, maybe a new card). */
  async handleClick(host: ChannelHost, data: unknown): Promise<Record<string, unknown>> {
    const message = normalizeClick(this.channelId, parsed(cardActionSchema.safeParse(data), 'card action'));
    if (!message) return {};
    if (!(await storage.redisCall(() => this.store.redis.exists(p2pKey(this.store.prefix, message.conversationId))))) message.group = true;
    const result = await host.receive(this.channelId, message);
    if (result.kind === 'command') return clickAnswer(result.reply, result.edit);
    return clickAnswer(result.kind === 'ignored' ? 'Not allowed here.' : undefined, undefined);
  }
}
