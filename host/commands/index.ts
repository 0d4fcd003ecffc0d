/**
 * Control commands every channel understands, one table per feature:
 * `/stop`, `/new`, `/compact`, `/queue <mode>`, `/status`, `/purge`
 * (conversation.ts); `/approve <id>`, `/deny <id>` (approvals.ts);
 * `/schedules`, `/unschedule <id>` (schedules.ts); `/memory`, `/forget
 * <id|all>` (memory.ts). The host parses a message against their union and
 * runs the entry; an entry marked `admin` is refused in a group to anyone the
 * chat does not call an admin (host/receive.ts). Each command is deduped by
 * its update key, so a redelivered command gets no second reply.
 */
import type { CommandSource } from '../../src/protocol/dispatch.js';
import type { InputPolicy } from '../../src/protocol/types.js';
import { approvalCommands } from './approvals.js';
import { conversationCommands } from './conversation.js';
import { memoryCommands } from './memory.js';
import { scheduleCommands } from './schedules.js';
import type { CommandDeps, CommandOutcome, CommandSpec } from './table.js';

export type { CommandDeps, CommandOutcome, MemoryCommandDeps } from './table.js';
export { PURGED_NOTICE } from './table.js';

const TABLES = { ...conversationCommands, ...approvalCommands, ...scheduleCommands, ...memoryCommands };

/** A control command name, without the slash. */
export type CommandName = keyof typeof TABLES;

const COMMANDS: Readonly<Record<CommandName, CommandSpec>> = TABLES;

/** Commands that change the conversation for everyone in it: admins only in a group (`/status` only reads). */
export const ADMIN_COMMANDS: ReadonlySet<CommandName> = new Set((Object.keys(COMMANDS) as CommandName[]).filter((n) => COMMANDS[n].admin === true));

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
  if (!Object.hasOwn(COMMANDS, name)) return undefined;
  return { name: name as CommandName, args: (m[2] ?? '').trim() };
}

/**
 * Runs one command for `source`. `channelPolicy` is the channel's configured
 * policy (shown by `/status` and `/queue` when the conversation has no override).
 * Throws what the protocol throws (InvalidInputError, Redis errors).
 */
export function runCommand(deps: CommandDeps, command: ParsedCommand, source: CommandSource, channelPolicy: InputPolicy | undefined): Promise<CommandOutcome> {
  return COMMANDS[command.name].run(deps, command.args, source, channelPolicy);
}
