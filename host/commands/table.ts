/**
 * The shape of a control command: a feature contributes a table of them
 * (`conversationCommands`, `approvalCommands`, `scheduleCommands`,
 * `memoryCommands`) and the host dispatches from their union
 * (host/commands/index.ts). What every command gets, and what it answers.
 */
import type { MemoryStore } from '../../src/people/memory.js';
import type { CommandSource, Dispatch } from '../../src/protocol/dispatch.js';
import type { InputPolicy } from '../../src/protocol/types.js';
import type { Schedules } from '../../src/schedules/schedules.js';

/** What the memory commands need besides the dispatch. */
export interface MemoryCommandDeps {
  /** The memory store; undefined when memory is off. */
  store: MemoryStore | undefined;
  /** The sender's identity; undefined when no identity can be made of their id. */
  identity(): Promise<string | undefined>;
  /** The message is in a group chat. */
  group: boolean;
  /** Longest reply the channel takes, in characters. */
  maxChars: number;
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
