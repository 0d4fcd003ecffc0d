/**
 * The access step of `ChannelHost.receive`, before commands and ingest:
 * `/pair` and `/link` (answered once per update), then the access policy. A
 * refused message gets its notice (at most once per window) and goes no
 * further: nothing reaches the conversation's record.
 */
import type { ChannelSettings, InboundMessage, ReceiveResult } from '../../src/channel.js';
import type { HostFeature } from '../feature.js';
import { type AccessCommandName, parseAccessCommand, runAccessCommand } from './commands.js';
import type { AccessGate } from './gate.js';

/** What the step needs from the channel host. */
export interface AccessStepDeps {
  gate: AccessGate;
  /** Sends a text to a conversation; must not throw. */
  reply(channelId: string, conversationId: string, text: string, replyTo: string | undefined): Promise<void>;
  /** Marks the update seen for `ttlSeconds` (default and most: the dedupe window); false for a redelivery. */
  firstDelivery(message: InboundMessage, ttlSeconds?: number): Promise<boolean>;
  /** Keeps an update marked for less than the dedupe window marked for the whole of it, from now. */
  keepDelivery(message: InboundMessage): Promise<void>;
}

const REFUSED: ReceiveResult = { kind: 'ignored', reason: 'refused' };

/** Undefined: the message goes on to commands and ingest. Throws Redis errors. */
export async function accessStep(
  deps: AccessStepDeps,
  channelId: string,
  settings: ChannelSettings,
  message: InboundMessage,
): Promise<ReceiveResult | undefined> {
  const command = parseAccessCommand(message.text);
  if (command) return accessCommand(deps, channelId, settings, message, command.name, command.args);
  const verdict = await deps.gate.check(channelId, settings, message);
  if (verdict.kind === 'allow') return undefined;
  if (verdict.notice) await deps.reply(channelId, message.conversationId, verdict.notice, message.messageId);
  return REFUSED;
}

/**
 * `/pair` or `/link`, answered once per update. A sender who may not talk
 * here gets each of their answers at most once per notice window anyway, so
 * their update is remembered only that long, and unless the command brought
 * them in (`/link <code>`) the result is a refusal, so the channel keeps
 * nothing for the conversation either: a stranger scripting these commands
 * would otherwise leave keys per message for the whole dedupe window, or for ever.
 * A command that brought them in is remembered the whole dedupe window: a
 * platform's later redelivery must not run the spent code again (a wrong guess).
 */
async function accessCommand(
  deps: AccessStepDeps,
  channelId: string,
  settings: ChannelSettings,
  message: InboundMessage,
  name: AccessCommandName,
  args: string,
): Promise<ReceiveResult> {
  const hadAccess = await deps.gate.mayTalk(channelId, settings, message);
  if (!(await deps.firstDelivery(message, hadAccess ? undefined : deps.gate.store.limits.noticeWindowSeconds))) {
    return hadAccess ? { kind: 'command', command: name, reply: '', duplicate: true } : REFUSED;
  }
  const outcome = await runAccessCommand({ store: deps.gate.store, gate: deps.gate }, name, args, channelId, settings, message);
  // Before the replies go out: a slow platform must not let the short claim lapse, or a redelivery would run the spent code again.
  const letIn = !hadAccess && (await deps.gate.mayTalk(channelId, settings, message));
  if (letIn) await deps.keepDelivery(message);
  if (outcome.reply) await deps.reply(channelId, message.conversationId, outcome.reply, message.messageId);
  if (outcome.notify) await deps.reply(outcome.notify.channel, outcome.notify.conversationId, outcome.notify.text, undefined);
  if (!hadAccess && !letIn) return REFUSED;
  return { kind: 'command', command: name, reply: outcome.reply, duplicate: false };
}

/**
 * The access step as the host's first receive step: every host runs it (it is
 * not a registered feature that a composition could leave out).
 */
export function accessAdmission(gate: AccessGate): HostFeature {
  return {
    name: 'access',
    admit: (req) =>
      accessStep({ gate, reply: req.reply, firstDelivery: req.firstDelivery, keepDelivery: req.keepDelivery }, req.channelId, req.settings, req.message),
  };
}
