/**
 * Control commands every channel understands: the conversation's own
 * (`/stop`, `/new`, `/compact`, `/queue <mode>`, `/status`, `/purge`:
 * conversation.ts), approvals (`/approve <id>`, `/deny <id>`: approvals.ts),
 * and each registered feature's table (`/memory`, `/schedules`, …). The host
 * parses a message against their union (`commandSet`) and runs the entry; an
 * entry marked `admin` is refused in a group to anyone the chat does not call
 * an admin (host/receive.ts). Each command is deduped by its update key, so a
 * redelivered command gets no second reply.
 */
import type { CommandSource } from '../../src/protocol/dispatch.js';
import type { InputPolicy } from '../../src/protocol/types.js';
import { approvalCommands } from './approvals.js';
import { conversationCommands } from './conversation.js';
import type { CommandDeps, CommandOutcome, CommandSpec, CommandTable } from './table.js';

export type { CommandDeps, CommandOutcome, CommandTable } from './table.js';
export { commandMessage, PURGED_NOTICE } from './table.js';

/** A control command found in a message. */
export interface ParsedCommand {
  /** Its name, without the slash, lower case. */
  name: string;
  /** Text after the command, trimmed (`/queue followup` → `followup`). */
  args: string;
}

/** The commands a host understands: the core tables and its features'. */
export interface CommandSet {
  /** Names of the commands that change the conversation for everyone in it: admins only in a group. */
  readonly admin: ReadonlySet<string>;
  /** The control command in `text`, or undefined (other slash commands, e.g. `/start`, are ordinary messages). */
  parse(text: string): ParsedCommand | undefined;
  /**
   * Runs one command for `source`. `channelPolicy` is the channel's configured policy (shown by `/status`
   * and `/queue` when the conversation has no override). Throws what the protocol throws (InvalidInputError, Redis errors).
   */
  run(deps: CommandDeps, command: ParsedCommand, source: CommandSource, channelPolicy: InputPolicy | undefined): Promise<CommandOutcome>;
}

// `/name`, an optional `@BotName` suffix (Telegram groups), then arguments.
const COMMAND_RE = /^\/([A-Za-z]+)(?:@[A-Za-z0-9_]+)?(?:\s+([\s\S]*))?$/;

/**
 * The command set of the core tables and `tables` (the features'). Throws
 * Error when two tables name the same command (or one names the access step's
 * `/pair` or `/link`), or a name is not lower-case letters.
 */
export function commandSet(tables: readonly CommandTable[]): CommandSet {
  const commands = new Map<string, CommandSpec>();
  for (const table of [conversationCommands, approvalCommands, ...tables]) {
    for (const [name, spec] of Object.entries(table)) {
      if (!/^[a-z]+$/.test(name)) throw new Error(`command /${name}: a command name is lower-case letters only`);
      if (commands.has(name) || name === 'pair' || name === 'link') throw new Error(`two features define the command /${name}`);
      commands.set(name, spec);
    }
  }
  return {
    admin: new Set([...commands].filter(([, spec]) => spec.admin === true).map(([name]) => name)),
    parse(text) {
      const m = COMMAND_RE.exec(text.trim());
      if (!m) return undefined;
      const name = m[1]!.toLowerCase();
      return commands.has(name) ? { name, args: (m[2] ?? '').trim() } : undefined;
    },
    run(deps, command, source, channelPolicy) {
      const spec = commands.get(command.name);
      if (!spec) throw new Error(`no command /${command.name}`);
      return spec.run(deps, command.args, source, channelPolicy);
    },
  };
}
