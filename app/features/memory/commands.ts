/**
 * `/memory` lists what the bot remembers about the sender (their identity's
 * notes, docs/people.md#memory); `/forget <id>` deletes one note, `/forget
 * all` every one. Only in the sender's own name: the identity is the
 * sender's, never an argument. In a group chat `/memory` does not list the
 * notes (everyone would read them). Deduped by the command's update key (set
 * first, as for `/status`), so a redelivered command gets no second reply.
 */
import { type CommandDeps, type CommandTable, commandMessage } from '../../../host/commands/index.js';
import type { IdentityStore } from '../../../src/people/identity.js';
import type { MemoryNote, MemoryStore } from '../../../src/people/memory.js';
import type { CommandSource } from '../../../src/protocol/dispatch.js';

const OFF = 'Memory is turned off on this bot.';

/** Whose notes the commands touch: the sender's identity's, in `store`; no store while memory is off. */
interface MemoryCommandParts {
  store: MemoryStore | undefined;
  identities: Pick<IdentityStore, 'tryResolve'>;
}

/** `/memory` and `/forget <id|all>`: in the sender's own name, so anyone may send them. */
export function memoryCommands(parts: MemoryCommandParts): CommandTable {
  return {
    memory: { run: (deps, args, source) => memoryCommand(parts, deps, 'memory', args, source) },
    forget: { run: (deps, args, source) => memoryCommand(parts, deps, 'forget', args, source) },
  };
}
/** Longest text of one note in the list, in characters. */
const NOTE_CHARS = 200;

/** One line per note: id and text (cut). */
function noteLine(n: MemoryNote): string {
  const text = n.text.replace(/\s+/g, ' ');
  return `• ${n.id}: ${text.length > NOTE_CHARS ? `${text.slice(0, NOTE_CHARS - 1)}…` : text}`;
}

/** The list, as many notes as fit in `maxChars`, newest last; says how many were left out. */
export function memoryList(notes: readonly MemoryNote[], maxChars: number): string {
  const head = `What I remember about you (${notes.length} note${notes.length === 1 ? '' : 's'}):`;
  const foot = 'Delete one with /forget <id>, or all with /forget all.';
  const lines: string[] = [];
  let used = head.length + foot.length + 80;
  // Newest first while they fit, shown oldest first.
  for (let i = notes.length - 1; i >= 0; i--) {
    const line = noteLine(notes[i]!);
    if (used + line.length + 1 > maxChars) break;
    used += line.length + 1;
    lines.unshift(line);
  }
  const left = notes.length - lines.length;
  const more = left > 0 ? [`(${left} older note${left === 1 ? '' : 's'} not shown.)`] : [];
  return [head, ...more, ...lines, foot].join('\n');
}

/** Runs `/memory` or `/forget <id|all>` for `source`. */
async function memoryCommand(
  { store, identities }: MemoryCommandParts,
  deps: CommandDeps,
  name: 'memory' | 'forget',
  args: string,
  source: CommandSource,
): Promise<{ reply: string; duplicate: boolean }> {
  if (!(await deps.dispatch.claimUpdate(source.conversationId, source.updateKey))) return { reply: '', duplicate: true };
  if (!store) return { reply: OFF, duplicate: false };
  const message = commandMessage(deps, source);
  const identity = await identities.tryResolve(message.channelId, source.sender.id);
  if (identity === undefined) return { reply: 'There is no memory for your account here.', duplicate: false };
  if (name === 'memory') {
    if (message.group) return { reply: 'Send /memory in a private chat with me: here everyone would read it.', duplicate: false };
    const notes = await store.list(identity);
    if (notes.length === 0) return { reply: 'I remember nothing about you.', duplicate: false };
    return { reply: memoryList(notes, message.maxChars), duplicate: false };
  }
  const what = args.split(/\s+/)[0] ?? '';
  if (what.toLowerCase() === 'all') {
    const n = await store.deleteAll(identity);
    return {
      reply: n === 0 ? 'I remembered nothing about you.' : `Forgot everything I remembered about you (${n} note${n === 1 ? '' : 's'}).`,
      duplicate: false,
    };
  }
  if (!/^[1-9][0-9]{0,15}$/.test(what)) return { reply: 'Usage: /forget <id> (the ids are in /memory), or /forget all.', duplicate: false };
  const deleted = await store.delete(identity, what);
  return { reply: deleted ? `Forgot note ${what}.` : `No note ${what} (see /memory).`, duplicate: false };
}
