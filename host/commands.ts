/**
 * Control commands every channel understands: `/stop`, `/new`, `/compact`,
 * `/queue <mode>`, `/status`, `/purge` (admins), `/approve <id>` and
 * `/deny <id>` (a tool call waiting for approval: host/approval-commands.ts), `/schedules` and
 * `/unschedule <id>` (host/schedule-commands.ts), `/memory` and `/forget <id|all>`
 * (host/memory-commands.ts). Each is deduped by its update key (the
 * protocol scripts record it; `/status`, which writes nothing else, sets the
 * dedupe key itself), so a redelivered command gets no second reply. In a
 * conversation purged with `afterPurge: 'refuse'`, `/stop`, `/new`,
 * `/compact`, `/queue <mode>` and `/status` change nothing and answer what a
 * message gets there (`PURGED_NOTICE`).
 */
import { parseJsonOrUndefined } from '../src/json.js';
import type { CommandSource, Dispatch } from '../src/protocol/dispatch.js';
import { purgeConversation } from '../src/protocol/purge.js';
import { type ConversationStatus, INPUT_POLICIES, type InputPolicy } from '../src/protocol/types.js';
import { parseBreaker } from '../src/record/breaker.js';
import { readUnanswered, type UnansweredNote, unansweredStatusLine } from '../src/record/unanswered.js';
import type { Schedules } from '../src/schedules/schedules.js';
import { approvalCommand } from './approval-commands.js';
import { type MemoryCommandDeps, memoryCommand } from './memory-commands.js';
import { scheduleCommand } from './schedule-commands.js';

/** Names of the control commands, without the slash. */
export const COMMAND_NAMES = ['stop', 'new', 'compact', 'queue', 'status', 'purge', 'approve', 'deny', 'schedules', 'unschedule', 'memory', 'forget'] as const;
/** A control command name. */
export type CommandName = (typeof COMMAND_NAMES)[number];

/** A control command found in a message. */
export interface ParsedCommand {
  name: CommandName;
  /** Text after the command, trimmed (`/queue followup` → `followup`). */
  args: string;
}

// `/name`, an optional `@BotName` suffix (Telegram groups), then arguments.
const COMMAND_RE = /^\/([A-Za-z]+)(?:@[A-Za-z0-9_]+)?(?:\s+([\s\S]*))?$/;

/** The control command in `text`, or undefined (other slash commands, e.g. `/start`, are ordinary messages). */
export function parseCommand(text: string): ParsedCommand | undefined {
  const m = COMMAND_RE.exec(text.trim());
  if (!m) return undefined;
  const name = m[1]!.toLowerCase();
  if (!(COMMAND_NAMES as readonly string[]).includes(name)) return undefined;
  return { name: name as CommandName, args: (m[2] ?? '').trim() };
}

/** What running a command needs. */
export interface CommandDeps {
  dispatch: Dispatch;
  /** Enqueues a run a command created (`/compact` when the conversation is idle). */
  enqueue(conversationId: string, runId: string): Promise<void>;
  /** The schedules service (`/schedules`, `/unschedule`, and purge disarms a purged conversation's schedules). Default: none (schedules off). */
  schedules?: Schedules | undefined;
  /** The agent profile the sender's runs use here, named by `/status`. Default: not named (no profiles configured). */
  profileName?: string;
  /** The sender's memory (`/memory`, `/forget`). Default: memory off. */
  memory?: MemoryCommandDeps;
  /** What the conversation's channel reports as wrong in it (`ChannelPlugin.conversationProblems`), listed by `/status`. Default: none. */
  problems?(conversationId: string): Promise<string[]>;
}

/** The outcome of a command: the reply to send (empty for a duplicate). */
export interface CommandOutcome {
  reply: string;
  /** The command's update was seen before: nothing was done, nothing is sent. */
  duplicate: boolean;
  /** The conversation was purged and refuses updates: nothing was recorded; `reply` is `PURGED_NOTICE`. */
  purged?: boolean;
  /** For a button click: what the message with the buttons should now show. */
  edit?: string;
}

const POLICY_HELP: Record<InputPolicy, string> = {
  steer: 'new messages join the current run at its next step',
  followup: 'each new message gets its own run after the current one',
  collect: 'new messages are answered together after the current run',
  interrupt: 'a new message stops the current run (its partial answer is kept) and is answered next',
  supersede: 'a new message replaces the current run (its partial answer is dropped)',
};

const modesList = () => INPUT_POLICIES.map((p) => `• ${p}: ${POLICY_HELP[p]}`).join('\n');

const NO_MEMORY: MemoryCommandDeps = { store: undefined, identity: async () => undefined, group: false, maxChars: 2000 };

const DUPLICATE: CommandOutcome = { reply: '', duplicate: true };

/** The answer to a message for a conversation purged with `afterPurge: 'refuse'`, while its tombstone stands. */
export const PURGED_NOTICE = 'This conversation was deleted; new messages here are not accepted for now.';

// A command is refused like a message (host/receive.ts), with the same notice.
const PURGED: CommandOutcome = { reply: PURGED_NOTICE, duplicate: false, purged: true };

/**
 * Runs one command for `source`. `channelPolicy` is the channel's configured
 * policy (shown by `/status` and `/queue` when the conversation has no override).
 * Throws what the protocol throws (InvalidInputError, Redis errors).
 */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: one switch over the control commands, a few lines per case; the command table reads best in one place
export async function runCommand(
  deps: CommandDeps,
  command: ParsedCommand,
  source: CommandSource,
  channelPolicy: InputPolicy | undefined,
): Promise<CommandOutcome> {
  const { dispatch } = deps;
  switch (command.name) {
    case 'stop': {
      const r = await dispatch.requestStop(source, 'stop');
      if (r.kind === 'duplicate') return DUPLICATE;
      if (r.kind === 'purged') return PURGED;
      if (r.kind === 'idle') return { reply: 'Nothing to stop: no run is active.', duplicate: false };
      return { reply: r.runState === 'queued' ? 'Cancelled the run before it started.' : 'Stopping the current run.', duplicate: false };
    }
    case 'new': {
      const r = await dispatch.reset(source);
      if (r.kind === 'duplicate') return DUPLICATE;
      if (r.kind === 'purged') return PURGED;
      const stopped = r.stoppedRunId ? ' The current run was stopped.' : '';
      return { reply: `Started a new conversation: earlier messages are no longer part of the context.${stopped}`, duplicate: false };
    }
    case 'compact': {
      const r = await dispatch.requestCompaction(source);
      if (r.kind === 'duplicate') return DUPLICATE;
      if (r.kind === 'purged') return PURGED;
      if (r.kind === 'new-run') {
        await deps.enqueue(source.conversationId, r.runId);
        return { reply: 'Compacting the conversation.', duplicate: false };
      }
      return { reply: 'The conversation will be compacted at the next step of the current run.', duplicate: false };
    }
    case 'queue':
      return queueCommand(deps, command.args, source, channelPolicy);
    case 'status': {
      // Sent together on one connection: one round trip of waiting, not two.
      const [unanswered, r, problems] = await Promise.all([
        readUnanswered(dispatch.options.client, dispatch.options.prefix, source.conversationId),
        dispatch.statusCommand(source),
        // The channel's own report is extra: /status answers without it when it fails.
        deps.problems?.(source.conversationId).catch(() => []) ?? [],
      ]);
      if (r.kind === 'duplicate') return DUPLICATE;
      if (r.kind === 'purged') return PURGED;
      const lines = [
        formatStatus(r.status, channelPolicy ?? dispatch.options.defaultPolicy, unanswered),
        ...(deps.profileName ? [`Agent profile: ${deps.profileName}`] : []),
        ...problems.map((p) => `Problem: ${p}`),
      ];
      return { reply: lines.join('\n'), duplicate: false };
    }
    case 'purge':
      return purgeCommand(deps, command.args, source);
    case 'approve':
    case 'deny':
      return approvalCommand(deps, command.name === 'approve' ? 'approved' : 'denied', command.args, source);
    case 'schedules':
    case 'unschedule':
      return scheduleCommand(deps, command.name, command.args, source);
    case 'memory':
    case 'forget':
      return memoryCommand(dispatch, deps.memory ?? NO_MEMORY, command.name, command.args, source);
  }
}

async function queueCommand(deps: CommandDeps, args: string, source: CommandSource, channelPolicy: InputPolicy | undefined): Promise<CommandOutcome> {
  const mode = args.toLowerCase();
  if (mode === 'default' || mode === 'reset') {
    const r = await deps.dispatch.setPolicy(source, undefined);
    if (r.kind === 'duplicate') return DUPLICATE;
    if (r.kind === 'purged') return PURGED;
    return { reply: `Queue mode reset to the channel default (${channelPolicy ?? deps.dispatch.options.defaultPolicy}).`, duplicate: false };
  }
  if ((INPUT_POLICIES as readonly string[]).includes(mode)) {
    const r = await deps.dispatch.setPolicy(source, mode as InputPolicy);
    if (r.kind === 'duplicate') return DUPLICATE;
    if (r.kind === 'purged') return PURGED;
    return { reply: `Queue mode set to ${mode}: ${POLICY_HELP[mode as InputPolicy]}.`, duplicate: false };
  }
  // No or unknown mode: explain, write nothing.
  const head = mode ? `Unknown queue mode "${args.slice(0, 40)}".` : 'Usage: /queue <mode>.';
  return { reply: `${head} Modes:\n${modesList()}\n• default: back to the channel default`, duplicate: false };
}

/**
 * `/purge` (`/purge stop`: stop an active run first): deletes everything
 * stored for the conversation, in one atomic step (`purgeConversation`).
 * Deduped by the command's update key like every command.
 */
async function purgeCommand(deps: CommandDeps, args: string, source: CommandSource): Promise<CommandOutcome> {
  const o = deps.dispatch.options;
  // Read before the purge deletes them: their BullMQ side goes after it (a fire of one missed here finds no record and removes itself).
  const schedules = (await deps.schedules?.list(source.conversationId, 0)) ?? [];
  const r = await purgeConversation(o.client, o.prefix, source.conversationId, {
    stopActive: args.toLowerCase() === 'stop',
    afterPurge: o.afterPurge,
    tombstoneTtlSeconds: o.retention.tombstoneTtlSeconds,
    dedupeTtlSeconds: o.dedupeTtlSeconds,
    updateKey: source.updateKey,
    pluginKeys: o.pluginKeys,
  });
  switch (r.kind) {
    case 'duplicate':
      return DUPLICATE;
    case 'active':
      return { reply: 'A run is active. Send /purge stop to stop it and delete this conversation.', duplicate: false };
    case 'not_found':
      return { reply: 'Nothing is stored for this conversation.', duplicate: false };
    case 'already_purged':
      return { reply: 'This conversation was already deleted.', duplicate: false };
    case 'purged': {
      await Promise.all(schedules.map((s) => deps.schedules?.disarm(s)));
      const next = o.afterPurge === 'restart' ? 'A new message starts a new, empty conversation.' : 'New messages here are not accepted for now.';
      return {
        reply: `Deleted this conversation: its messages, runs, state, schedules and delivery records.${r.stoppedRunId ? ' The active run was stopped.' : ''} ${next}`,
        duplicate: false,
      };
    }
  }
}

/** The `/status` reply; `unanswered`: steered messages the last failed or stopped run took and did not answer. */
function formatStatus(s: ConversationStatus, channelPolicy: InputPolicy, unanswered?: UnansweredNote): string {
  const lines: string[] = [];
  if (s.activeRunId) {
    lines.push(`Active run: ${s.activeRunId} (${s.runState ?? 'unknown'}${s.attempt > 1 ? `, attempt ${s.attempt}` : ''})`);
    if (s.stop) lines.push(`Stop requested: ${s.stop}`);
  } else {
    lines.push('No active run.');
  }
  lines.push(`Steering queue: ${s.steeringDepth} · Pending: ${s.pendingDepth}`);
  lines.push(
    s.policyOverride ? `Queue mode: ${s.policyOverride} (set with /queue; channel default ${channelPolicy})` : `Queue mode: ${channelPolicy} (channel default)`,
  );
  if (s.compactionRequestedSeq > 0) lines.push('Compaction: /compact requested, applied at the next turn boundary');
  const breaker = parseBreaker(parseJsonOrUndefined(s.compactionBreaker));
  if (breaker.open) lines.push(`Compaction: paused after ${breaker.ineffective} ineffective compactions (/compact resumes it)`);
  if (unanswered) lines.push(unansweredStatusLine(unanswered));
  return lines.join('\n');
}
