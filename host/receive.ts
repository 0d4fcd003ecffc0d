/**
 * The host side of the channel contract: `ChannelHost.receive` runs the
 * features' admission steps (the host's access policy first), runs control commands (answered through the
 * channel's outbound side; in group chats the ones that affect everyone only
 * for admins) and ingests everything else with the channel's policy; a
 * message over a rate limit gets a short notice. Redis connection failures
 * become RedisUnavailableError so ingress answers 503 and the platform retries.
 */
import type { Logger } from 'pino';
import type { ChannelHost, ChannelOutbound, ChannelSettings, InboundMessage, ReceiveResult } from '../src/channel.js';
import type { RouteRegistry } from '../src/http/routes.js';
import type { AgentProfile } from '../src/people/profiles.js';
import type { Dispatch } from '../src/protocol/dispatch.js';
import { typedOnlyCommand } from '../src/protocol/send.js';
import type { IncomingMessage, IngestResult, InputPolicy } from '../src/protocol/types.js';
import { asRedisUnavailable, type RedisClient } from '../src/redis/connection.js';
import { type AdminCheck, createAdminCheck } from './admins.js';
import { type CommandDeps, type CommandSet, commandSet, type ParsedCommand, PURGED_NOTICE } from './commands/index.js';
import type { HostFeature, RecordedInput } from './feature.js';
import { hostPurge, type Purge } from './purge.js';

export type { ChannelSettings } from '../src/channel.js';

/** What `createChannelHost` needs. */
export interface ChannelHostDeps {
  routes: RouteRegistry;
  redis: RedisClient;
  prefix: string;
  logger: Logger;
  dispatch: Dispatch;
  /** Ingest + enqueue of new runs (`IngestService`). */
  ingest: { ingest(message: IncomingMessage, opts?: { policy?: InputPolicy; channel?: string }): Promise<IngestResult> };
  /** Enqueues a run a command created (`/compact` when idle). */
  enqueue(conversationId: string, runId: string): Promise<void>;
  /** Settings of a channel by its id. Default: none (dispatch default policy, no configured admins). */
  settings?(channelId: string): ChannelSettings | undefined;
  /** Outbound side of a channel by its id, for command replies. */
  outbound(channelId: string): ChannelOutbound | undefined;
  /** Who is an admin of a group chat. Default: `createAdminCheck()` (platform answers cached 60 s). */
  admins?: AdminCheck;
  /** The features, in order: their commands, receive steps and hooks (host/feature.ts). */
  features: readonly HostFeature[];
  /** How `/purge` purges: the host's one purge (host/purge.ts). Default: the purge with the `features`' hooks. */
  purge?: Purge;
}

/** What the receive steps share: the deps, the admin check, and the two ways of answering. */
interface Receiver {
  deps: ChannelHostDeps;
  logger: Logger;
  admins: AdminCheck;
  commands: CommandSet;
  /** The host's purge, with every feature's hooks. */
  purge: Purge;
  /** Sets the update's dedupe key (for `ttlSeconds`, at most the dedupe window): true the first time this update is seen. */
  firstDelivery(message: InboundMessage, ttlSeconds?: number): Promise<boolean>;
  /** Keeps an update marked for less than the dedupe window marked for the whole of it. */
  keepDelivery(message: InboundMessage): Promise<void>;
  /** Sends a command's reply; a failure is logged, not thrown (the command itself took effect). */
  replyTo(channelId: string, conversationId: string, text: string, replyTo: string | undefined): Promise<void>;
}

/** Builds the ChannelHost channel plugins start with. */
export function createChannelHost(deps: ChannelHostDeps): ChannelHost {
  const logger = deps.logger.child({ part: 'receive' });
  const r: Receiver = {
    deps,
    logger,
    admins: deps.admins ?? createAdminCheck(),
    purge: deps.purge ?? hostPurge(deps.dispatch.options, deps.features),
    commands: commandSet(deps.features.flatMap((f) => (f.commands ? [f.commands] : []))),
    firstDelivery: (m, ttlSeconds) => deps.dispatch.claimUpdate(m.conversationId, m.updateKey, ttlSeconds),
    keepDelivery: (m) => deps.dispatch.keepClaim(m.conversationId, m.updateKey),
    replyTo: (channelId, conversationId, text, replyTo) => sendReply(deps, logger, channelId, conversationId, text, replyTo),
  };
  return {
    receive: (channelId, message) => receive(r, channelId, message),
    routes: deps.routes,
    redis: deps.redis,
    prefix: deps.prefix,
    logger: deps.logger,
    dedupeTtlSeconds: deps.dispatch.options.dedupeTtlSeconds,
  };
}

/** The receive pipeline in order: empty, typed-only from a button, the features' admission, a command with its admin check, else ingest. */
async function receive(r: Receiver, channelId: string, message: InboundMessage): Promise<ReceiveResult> {
  const { deps } = r;
  // Who may talk is the access gate's alone (`access.channels.<id>`), in the access step below.
  const channelSettings = deps.settings?.(channelId) ?? {};
  if (message.text.trim() === '' && !message.attachments?.length) return { kind: 'ignored', reason: 'empty' };
  // A click sends its button's text as the clicker: never one that widens access or deletes (whoever made the button).
  const typedOnly = message.interaction === 'button' ? typedOnlyCommand(message.text) : undefined;
  if (typedOnly) return { kind: 'command', command: typedOnly, reply: `/${typedOnly} is not run from a button: type it.`, duplicate: false };
  // The profile (a Redis read when bindings name identities) only for a message that gets this far.
  const { settings, profile } = await settingsFor(deps, channelId, channelSettings, message);
  const command = r.commands.parse(message.text);
  try {
    for (const f of deps.features) {
      const early = await f.admit?.({ channelId, settings, message, reply: r.replyTo, firstDelivery: r.firstDelivery, keepDelivery: r.keepDelivery });
      if (early) return early;
    }
    if (command) return await commandStep(r, channelId, settings, message, command, profile);
    return await ingestMessage(r, channelId, settings, message);
  } catch (err) {
    throw asRedisUnavailable(err);
  }
}

/** A control command: refused to a non-admin in a group when it is an admin command, else run and answered (once). */
async function commandStep(
  r: Receiver,
  channelId: string,
  settings: ChannelSettings,
  message: InboundMessage,
  command: ParsedCommand,
  profile: AgentProfile | undefined,
): Promise<ReceiveResult> {
  const source = { conversationId: message.conversationId, updateKey: message.updateKey, sender: message.sender };
  if (message.group && r.commands.admin.has(command.name)) {
    const refusal = await adminRefusal(r, channelId, settings, message, command);
    if (refusal) return refusal;
  }
  const outcome = await r.commands.run(commandDeps(r, channelId, message, profile), command, source, settings.policy);
  // A command refused in a purged conversation records nothing, like a refused message.
  if (!outcome.duplicate && !outcome.purged) await recorded(r.deps, { ...sent(channelId, message), command: command.name, fresh: true });
  if (!outcome.duplicate) {
    // A button click is answered by the channel itself (a toast, the message edited), not by a chat message.
    if (message.interaction !== 'button') await r.replyTo(channelId, message.conversationId, outcome.reply, message.messageId);
  }
  return {
    kind: 'command',
    command: command.name,
    reply: outcome.reply,
    duplicate: outcome.duplicate,
    ...(outcome.edit !== undefined && { edit: outcome.edit }),
  };
}

/**
 * Undefined when the sender may run `command` in this group chat; else the
 * refusal, answered once per update (its dedupe key is set, so a redelivery
 * is a duplicate and gets no second answer).
 */
async function adminRefusal(
  r: Receiver,
  channelId: string,
  settings: ChannelSettings,
  message: InboundMessage,
  command: ParsedCommand,
): Promise<ReceiveResult | undefined> {
  const verdict = await r.admins.check(r.deps.outbound(channelId), settings.admins, message.conversationId, message.sender.id);
  if (verdict.kind === 'admin') return undefined;
  if (verdict.kind === 'unknown') {
    r.logger.warn({ err: verdict.error, channelId, conversationId: message.conversationId }, 'could not ask the platform whether the sender is a chat admin');
  }
  const reply =
    verdict.kind === 'not-admin'
      ? `Only admins can use /${command.name} here.`
      : `Could not check whether you are an admin of this chat; try /${command.name} again later.`;
  const fresh = await r.firstDelivery(message);
  if (fresh) await r.replyTo(channelId, message.conversationId, reply, message.messageId);
  return { kind: 'command', command: command.name, reply: fresh ? reply : '', duplicate: !fresh };
}

/** Sends a command's reply through the channel's outbound side; a failure is logged, not thrown. */
async function sendReply(
  deps: ChannelHostDeps,
  logger: Logger,
  channelId: string,
  conversationId: string,
  text: string,
  replyTo: string | undefined,
): Promise<void> {
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

/** A user's message into its conversation; a refused or purged one is answered here (once: a redelivery is a duplicate). */
async function ingestMessage(r: Receiver, channelId: string, settings: ChannelSettings, message: InboundMessage): Promise<ReceiveResult> {
  const { deps, replyTo } = r;
  // `origin` marks inputs that are not a user's (ingestEvent): a channel's message never carries one.
  // `group` is recorded: the prompt names each sender, and personal memory stays out of group runs.
  const { chatId: _chatId, origin: _origin, ...incoming } = message;
  const result = await deps.ingest.ingest(incoming, settings.policy ? { policy: settings.policy, channel: channelId } : { channel: channelId });
  // A duplicate too: the redelivery of a message whose note was lost (the host died after recording it).
  if (result.kind !== 'purged') await recorded(deps, { ...sent(channelId, message), fresh: result.kind !== 'duplicate' });
  if (result.kind === 'refused') await replyTo(channelId, message.conversationId, refusalNotice(result.limit, result.retryAfterMs), message.messageId);
  if (result.kind === 'purged') await replyTo(channelId, message.conversationId, PURGED_NOTICE, message.messageId);
  return { kind: 'ingested', result };
}

/** The channel's settings for a message, with its agent profile's input policy (which wins over the channel's). */
async function settingsFor(
  deps: ChannelHostDeps,
  channelId: string,
  channelSettings: ChannelSettings,
  message: InboundMessage,
): Promise<{ settings: ChannelSettings; profile: AgentProfile | undefined }> {
  let profile: AgentProfile | undefined;
  for (const f of deps.features) if (!profile && f.profile) profile = await f.profile(channelId, message.conversationId, message.sender.id);
  return { settings: profile?.inputPolicy ? { ...channelSettings, policy: profile.inputPolicy } : channelSettings, profile };
}

/** Who sent a message where: what `recorded` tells the features. */
function sent(channelId: string, message: InboundMessage): Omit<RecordedInput, 'fresh'> {
  return { channelId, conversationId: message.conversationId, senderId: message.sender.id };
}

/** Tells every feature a person's message or command was recorded; a throw fails the receive. */
async function recorded(deps: ChannelHostDeps, input: RecordedInput): Promise<void> {
  await Promise.all(deps.features.map((f) => f.recorded?.(input)));
}

/** What a command from this message runs with. */
function commandDeps(r: Receiver, channelId: string, message: InboundMessage, profile: AgentProfile | undefined): CommandDeps {
  const { deps } = r;
  return {
    dispatch: deps.dispatch,
    enqueue: deps.enqueue,
    message: { channelId, group: message.group === true, maxChars: deps.outbound(channelId)?.maxMessageChars ?? 2000 },
    ...(profile && { profileName: profile.name, models: { default: profile.model.name, choices: Object.keys(profile.models ?? {}) } }),
    statusLines: async (conversationId) => {
      const lines = await Promise.all(deps.features.map((f) => f.status?.(channelId, conversationId).catch(() => []) ?? []));
      return lines.flat();
    },
    purge: r.purge,
  };
}

/** The short answer to a message over a rate limit. */
function refusalNotice(limit: 'user' | 'conversation', retryAfterMs: number): string {
  const wait = Math.max(1, Math.ceil(retryAfterMs / 1000));
  const who =
    limit === 'user' ? 'You are sending messages faster than this bot answers them' : 'This chat is sending messages faster than this bot answers them';
  return `${who}; this one was not answered. Try again in ${wait} s.`;
}
