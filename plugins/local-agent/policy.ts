/**
 * Tool policy of the local agent: per tool `allow`, `deny` or
 * `require_approval`, with defaults per channel and overrides per
 * conversation. An explicit entry for a tool beats any default; the more
 * specific scope wins among entries (conversation > channel > global) and
 * among defaults. A tool may bring a default of its own (MCP tools: from
 * their annotations or their server's `defaultPolicy`); a scope's default
 * can make it stricter, never looser, so a catch-all `allow` does not open
 * an MCP server's write tools. A denied tool is not offered to the model.
 */

import { channelResolver } from 'steerbot/channel';
import { redactSecrets } from 'steerbot/plugin';
import type { RunInfo, ToolMode } from 'steerbot/runner';
import { z } from 'zod';

/** What may happen when the model calls a tool. */
export const toolModeSchema: z.ZodType<ToolMode> = z.enum(['allow', 'deny', 'require_approval'], { error: 'expected allow, deny or require_approval' });
export type { ToolMode } from 'steerbot/runner';

/** Strictness order of the modes: a tool's own default is combined with a scope default by taking the stricter. */
const STRICTNESS: Record<ToolMode, number> = { allow: 0, require_approval: 1, deny: 2 };

const scope = z.strictObject({
  default: toolModeSchema.optional().describe("Mode of tools not named in `tools`; for an MCP tool only when stricter than the tool's own (docs/tools.md)."),
  tools: z.record(z.string().min(1).max(129), toolModeSchema).optional().describe('Mode per tool name; a name ending in `*` matches a prefix (`crm__*`).'),
});

/** `agents.local-agent.toolPolicy`. */
export const toolPolicySchema = z
  .strictObject({
    ...scope.shape,
    channels: z
      .record(z.string().min(1), scope)
      .optional()
      .describe('Deprecated: use `profiles.<name>.toolPolicy` bound to the channel (translated at load).')
      .meta({ deprecated: true }),
    conversations: z
      .record(z.string().min(1), scope)
      .optional()
      .describe(
        "Per conversation id (`telegram:42`): `default` and `tools`; a chat's entry covers its topics and threads (ids it prefixes followed by `:`, `/` or `;`).",
      ),
    approvers: z
      .array(z.string().min(1).max(128))
      .max(64)
      .optional()
      .describe('Platform user ids who may approve besides the user who started the run. Default none.'),
    approvalTimeoutMs: z
      .number()
      .int()
      .min(1000)
      .max(86_400_000)
      .optional()
      .describe('No decision within this time denies the call (the model is told), in ms. Default 300 000.'),
    redactArguments: z
      .string()
      .min(1)
      .max(500)
      .optional()
      .describe(
        'Regular expression (case-insensitive) of argument names whose values are shown as `[redacted]` in approval requests. Default `pass|secret|token|key|auth|card|cvv|iban`.',
      ),
  })
  .describe(
    'Which tools the model may call freely, only with a person\'s approval in the chat, or not at all: `{ "default": "allow", "tools": { "pay": "require_approval", "shell": "deny" }, "conversations": { "telegram:42": { "tools": { "pay": "allow" } } } }`. Default: everything allowed, except MCP tools not annotated read-only, which need approval (docs/tools.md).',
  );

export type ToolPolicySettings = z.input<typeof toolPolicySchema>;

/** Default of `approvalTimeoutMs`: five minutes. */
export const DEFAULT_APPROVAL_TIMEOUT_MS = 300_000;
const DEFAULT_REDACT = 'pass|secret|token|key|auth|card|cvv|iban';

/** Line added to the approval request of a tool marked destructive. */
const DESTRUCTIVE_NOTE = '⚠️ This tool is marked destructive: it may delete or overwrite data.';

/** The channel id of a conversation id (`webhook:<name>:…` keeps its name). */
export function channelOf(conversationId: string): string {
  const parts = conversationId.split(':');
  return parts[0] === 'webhook' ? parts.slice(0, 2).join(':') : (parts[0] ?? '');
}

/** The conversation whose policy scopes apply to a run: the one it works for (a subagent's parent's), else its own. */
export function policyConversation(run: Pick<RunInfo, 'conversationId' | 'parentConversationId'>): string {
  return run.parentConversationId ?? run.conversationId;
}

type Scope = z.infer<typeof scope>;

/** The entry for `tool` in a scope's `tools`: exact name first, then the longest matching `prefix*`. */
function entry(s: Scope | undefined, tool: string): ToolMode | undefined {
  const tools = s?.tools;
  if (!tools) return undefined;
  if (tools[tool]) return tools[tool];
  let best: [number, ToolMode] | undefined;
  for (const [pattern, mode] of Object.entries(tools)) {
    if (pattern.endsWith('*') && tool.startsWith(pattern.slice(0, -1)) && (!best || pattern.length > best[0])) best = [pattern.length, mode];
  }
  return best?.[1];
}

/** Resolves modes for one conversation. */
export class ToolPolicy {
  private readonly p: z.infer<typeof toolPolicySchema>;
  private readonly redact: RegExp;
  /** The `conversations` key of a conversation: its own, else its chat's (a topic or thread is its chat's too). */
  private readonly conversationKeyOf: (conversationId: string) => string | undefined;

  constructor(settings: ToolPolicySettings = {}) {
    this.p = toolPolicySchema.parse(settings);
    this.redact = new RegExp(this.p.redactArguments ?? DEFAULT_REDACT, 'i');
    this.conversationKeyOf = channelResolver(Object.keys(this.p.conversations ?? {}));
  }

  /**
   * The mode of `tool` in `conversationId`. `toolDefault` is the tool's own
   * default (an MCP tool's, from its annotations or server); an entry naming
   * the tool beats it, a scope default only when stricter. `profile`: the
   * run's agent profile's scope, between the conversation's and the channel's.
   * Default `allow`.
   */
  mode(tool: string, conversationId: string, toolDefault: ToolMode = 'allow', profile?: Scope): ToolMode {
    const key = this.conversationKeyOf(conversationId);
    const conv = key === undefined ? undefined : this.p.conversations?.[key];
    const chan = this.p.channels?.[channelOf(conversationId)];
    const named = entry(conv, tool) ?? entry(profile, tool) ?? entry(chan, tool) ?? entry(this.p, tool);
    if (named) return named;
    const scoped = conv?.default ?? profile?.default ?? chan?.default ?? this.p.default ?? 'allow';
    return STRICTNESS[scoped] >= STRICTNESS[toolDefault] ? scoped : toolDefault;
  }

  /** Who may approve besides the run's starter. */
  get approvers(): string[] {
    return this.p.approvers ?? [];
  }

  get approvalTimeoutMs(): number {
    return this.p.approvalTimeoutMs ?? DEFAULT_APPROVAL_TIMEOUT_MS;
  }

  /**
   * The approval message: the tool and its arguments, bounded, values of
   * secret-looking names and secret-looking text redacted; a `destructive`
   * tool (MCP `destructiveHint`) is named as such first. The arguments are
   * one code span (and the names a cut hides another) that nothing in them
   * can close: the chat shows them as they are, never as Markdown (a link
   * showing only its text, a spoiler).
   */
  approvalText(tool: string, input: unknown, opts: { destructive?: boolean; maxChars?: number } = {}): string {
    const maxChars = opts.maxChars ?? 600;
    const parts = this.shownArguments(input ?? {});
    const args = parts.length === 1 && parts[0]!.name === undefined ? parts[0]!.text : `{${parts.map((p) => p.text).join(',')}}`;
    const text = `Approval needed: the assistant wants to run \`${tool}\` with ${args.length > maxChars ? cutArguments(args, parts, maxChars) : `\`${args}\``}`;
    return opts.destructive ? `${text}\n${DESTRUCTIVE_NOTE}` : text;
  }

  /** The input's top-level arguments as shown (`"name":value`, redacted, invisible characters and backticks escaped), or the whole input when it is no object. */
  private shownArguments(input: unknown): ShownArgument[] {
    const show = (v: unknown) => escapeShown(redactSecrets(JSON.stringify(v, (k, x) => (k && this.redact.test(k) ? '[redacted]' : x)) ?? 'null'));
    if (typeof input !== 'object' || input === null || Array.isArray(input)) return [{ text: show(input) }];
    return Object.entries(input)
      .filter(([, v]) => v !== undefined)
      .map(([name, v]) => ({ name: show(name), text: `${show(name)}:${this.redact.test(name) ? '"[redacted]"' : show(v)}` }));
  }
}

/** One top-level argument in an approval request. */
interface ShownArgument {
  /** Its name as shown (quoted); none for an input that is not an object. */
  name?: string;
  /** `"name":value` as shown. */
  text: string;
}

/**
 * Characters that render as nothing, move the text around them or start a line (direction marks and overrides,
 * zero-width and tag characters, C1 controls, line and paragraph separators), and the backtick, which would close
 * the code span the arguments are shown in, as JSON escapes: the arguments are shown as they are, not as the
 * model's text would have them look. (`JSON.stringify` escapes only C0 controls.)
 */
const ESCAPED = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}`]/gu;

function escapeShown(text: string): string {
  return text.replace(ESCAPED, (c) => Array.from({ length: c.length }, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''));
}

/** The first `maxChars` of `args`, saying how much is cut and naming the arguments whose name is not shown whole. */
function cutArguments(args: string, parts: readonly ShownArgument[], maxChars: number): string {
  const hidden: string[] = [];
  let start = 1;
  for (const p of parts) {
    if (p.name !== undefined && start + p.name.length > maxChars) hidden.push(p.name);
    start += p.text.length + 1;
  }
  const list = hidden.join(', ');
  const names = hidden.length > 0 ? `; not shown: \`${list.length > maxChars ? `${list.slice(0, maxChars)}…` : list}\`` : '';
  return `\`${args.slice(0, maxChars)}…\` [${args.length - maxChars} more characters not shown${names}]`;
}
