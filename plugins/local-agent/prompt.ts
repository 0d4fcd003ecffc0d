/**
 * The local agent's system prompt: the base prompt (inline or from a file),
 * notes files (AGENTS.md-style) appended as bounded fragments within a total
 * budget in the configured order, and personas that replace the base prompt
 * for one channel or one conversation.
 *
 * Files are read once, at start: every request of a conversation then starts
 * with the same bytes (provider prompt caches), and a missing file is a
 * configuration error at start rather than a surprise in a run. Edit a file,
 * restart to use it. The prompt is not part of the compaction checkpoint, so
 * changing it (or a persona) never invalidates a checkpoint.
 */
import { readFile } from 'node:fs/promises';
import { basename, resolve } from 'node:path';
import { channelResolver } from 'steerbot/channel';
import { ConfigError, type ConfigIssue } from 'steerbot/plugin';

/** A persona: the system prompt for one channel or conversation. */
export interface PersonaSettings {
  /** The persona's system prompt. */
  systemPrompt?: string | undefined;
  /** Or a file holding it (resolved against the working directory). */
  systemPromptFile?: string | undefined;
  /** Append the notes files to this persona's prompt too. Default true. */
  notes?: boolean;
}

/** Where the prompt comes from (the `agents.local-agent` settings that shape it). */
export interface PromptSettings {
  systemPrompt?: string | undefined;
  systemPromptFile?: string | undefined;
  /** Notes files, appended in this order. */
  notesFiles?: string[];
  /** Most characters of one notes file. */
  notesFileMaxChars: number;
  /** Most characters of all notes fragments together. */
  notesBudgetChars: number;
  /** Personas keyed by conversation id (`telegram:42`) or channel id (`telegram`, `webhook:support`). */
  personas?: Record<string, PersonaSettings>;
}

/** Longest system prompt, in characters (inline or from a file). */
export const MAX_SYSTEM_PROMPT_CHARS = 100_000;

/** A fragment smaller than this is left out rather than cut to a stub. */
const MIN_FRAGMENT_CHARS = 200;

const SETTINGS_PATH = 'agents.local-agent';

/** The system prompt of each conversation, resolved once per start. */
export interface SystemPrompts {
  /** The prompt for a conversation: its own persona, else its channel's, else the default. */
  for(conversationId: string): string;
}

/**
 * Reads the files and builds the prompts.
 * @throws ConfigError naming every field whose file is missing, empty or too long, or that sets both a prompt and a prompt file.
 */
export async function loadSystemPrompts(s: PromptSettings, fallback: string): Promise<SystemPrompts> {
  const issues: ConfigIssue[] = [];
  const base = await basePrompt(s, `${SETTINGS_PATH}`, issues);
  const notes = await notesSection(s, issues);
  const personas = new Map<string, string>();
  for (const [key, p] of Object.entries(s.personas ?? {})) {
    const path = `${SETTINGS_PATH}.personas.${key}`;
    if (p.systemPrompt === undefined && p.systemPromptFile === undefined) {
      issues.push({ path, message: 'set systemPrompt or systemPromptFile' });
      continue;
    }
    const prompt = await basePrompt(p, path, issues);
    if (prompt !== undefined) personas.set(key, withNotes(prompt, p.notes === false ? '' : notes));
  }
  if (issues.length > 0) throw new ConfigError(issues);
  const defaultPrompt = withNotes(base ?? fallback, notes);
  // A persona's key is a conversation id or a channel id; the longest that is or prefixes the conversation wins.
  const personaOf = channelResolver(personas.keys());
  return {
    for: (conversationId) => personas.get(personaOf(conversationId) ?? '') ?? defaultPrompt,
  };
}

function withNotes(prompt: string, notes: string): string {
  return notes ? `${prompt}\n\n${notes}` : prompt;
}

/** The inline prompt or the file's text; undefined when neither is set (or on an issue). */
async function basePrompt(s: Pick<PersonaSettings, 'systemPrompt' | 'systemPromptFile'>, path: string, issues: ConfigIssue[]): Promise<string | undefined> {
  if (s.systemPromptFile === undefined) return s.systemPrompt;
  if (s.systemPrompt !== undefined) {
    issues.push({ path: `${path}.systemPromptFile`, message: 'set either systemPrompt or systemPromptFile, not both' });
    return undefined;
  }
  const text = await readText(s.systemPromptFile, `${path}.systemPromptFile`, issues);
  if (text === undefined) return undefined;
  if (text.trim() === '') issues.push({ path: `${path}.systemPromptFile`, message: `${s.systemPromptFile} is empty` });
  else if (text.length > MAX_SYSTEM_PROMPT_CHARS)
    issues.push({ path: `${path}.systemPromptFile`, message: `${s.systemPromptFile} has more than ${MAX_SYSTEM_PROMPT_CHARS} characters` });
  else return text.trim();
  return undefined;
}

/**
 * The notes fragments, in order: each file cut to `notesFileMaxChars`, all of
 * them together to `notesBudgetChars`; a file that would get less than a
 * useful fragment is left out, and the prompt says which files were cut or left out.
 */
async function notesSection(s: PromptSettings, issues: ConfigIssue[]): Promise<string> {
  const files = s.notesFiles ?? [];
  const texts = await Promise.all(files.map((f, i) => readText(f, `${SETTINGS_PATH}.notesFiles.${i}`, issues)));
  let left = s.notesBudgetChars;
  const fragments: string[] = [];
  const omitted: string[] = [];
  files.forEach((file, i) => {
    const text = texts[i]?.trim();
    if (!text) return;
    const room = Math.min(s.notesFileMaxChars, left);
    if (room < Math.min(MIN_FRAGMENT_CHARS, text.length)) {
      omitted.push(basename(file));
      return;
    }
    const body = text.length <= room ? text : `${text.slice(0, room)}\n[… cut: ${text.length - room} more characters]`;
    left -= Math.min(text.length, room);
    fragments.push(`<notes file="${basename(file)}">\n${body}\n</notes>`);
  });
  if (omitted.length > 0) fragments.push(`(Notes left out for lack of room: ${omitted.join(', ')}.)`);
  return fragments.join('\n\n');
}

async function readText(file: string, path: string, issues: ConfigIssue[]): Promise<string | undefined> {
  try {
    return await readFile(resolve(file), 'utf8');
  } catch (err) {
    issues.push({ path, message: `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` });
    return undefined;
  }
}
