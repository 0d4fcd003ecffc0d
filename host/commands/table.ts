/**
 * The shape of a control command: the conversation and approvals tables
 * here, and each feature's (app/features/) contribute a table of them; the
 * host dispatches from their union (`commandSet`, host/commands/index.ts).
 * What every command gets, and what it answers.
 */
import type { CommandSource, Dispatch } from '../../src/protocol/dispatch.js';
import type { InputPolicy } from '../../src/protocol/types.js';
import type { Purge } from '../purge.js';

/** The message a command came in, beyond its source. */
export interface CommandMessage {
  channelId: string;
  /** Sent in a group chat. */
  group: boolean;
  /** Longest reply the channel takes, in characters. */
  maxChars: number;
}

/** What running a command needs. */
export interface CommandDeps {
  dispatch: Dispatch;
  /** Enqueues a run a command created (`/compact` when the conversation is idle). */
  enqueue(conversationId: string, runId: string): Promise<void>;
  /** Where the command was sent. Default: a group chat of the conversation's channel (the id up to its first `:`; nothing personal is listed), replies of 2000 characters. */
  message?: CommandMessage;
  /** The agent profile the sender's runs use here, named by `/status`. Default: not named (no profiles configured). */
  profileName?: string;
  /** The models of that profile: its own (`default`) and the names `/model` may switch to. Default: no `/model` choices. */
  models?: { default: string; choices: readonly string[] };
  /** The features' lines of `/status` (the channel's problems among them). Default: none. */
  statusLines?(conversationId: string): Promise<string[]>;
  /**
   * How `/purge` purges: the host's one purge (host/purge.ts), which runs every feature's purge hook
   * (schedules disarm its timers, subagents' children go with it).
   */
  purge: Purge;
}

/** Where `deps`' command was sent (`CommandDeps.message`, or its default for `source`). */
export function commandMessage(deps: CommandDeps, source: CommandSource): CommandMessage {
  return deps.message ?? { channelId: source.conversationId.split(':', 1)[0]!, group: true, maxChars: 2000 };
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

/** One command of a table. */
export interface CommandSpec {
  /** It changes the conversation for everyone in it: in a group, only the chat's admins may send it (host/admins.ts). */
  admin?: boolean;
  /**
   * Runs it for `source`: `args` is the text after the command, trimmed; `channelPolicy` the channel's configured
   * input policy (undefined: the deployment default). Throws what the protocol throws (InvalidInputError, Redis errors).
   */
  run(deps: CommandDeps, args: string, source: CommandSource, channelPolicy: InputPolicy | undefined): Promise<CommandOutcome>;
}

/** A feature's commands by name, without the slash (lower case). */
export type CommandTable = Readonly<Record<string, CommandSpec>>;

/** The outcome of a redelivered command: nothing done, nothing sent. */
export const DUPLICATE: CommandOutcome = { reply: '', duplicate: true };

/** The answer to a message for a conversation purged with `afterPurge: 'refuse'`, while its tombstone stands. */
export const PURGED_NOTICE = 'This conversation was deleted; new messages here are not accepted for now.';

/** A command is refused like a message (host/receive.ts), with the same notice. */
export const PURGED: CommandOutcome = { reply: PURGED_NOTICE, duplicate: false, purged: true };
