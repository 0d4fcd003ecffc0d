/**
 * Provider prompt caching. Between compactions a conversation's requests
 * share a byte-stable prefix (system prompt, tools, checkpoint summary,
 * earlier turns); these options let the provider reuse it:
 * - Anthropic caches only at explicit breakpoints (at most 4): the system
 *   prompt, the last tool definition, the checkpoint summary, and the last
 *   message of each request (a moving breakpoint: the next request finds the
 *   previous one's prefix by looking back from its own);
 * - OpenAI caches automatically; a stable per-conversation `promptCacheKey`
 *   routes a conversation's requests to the same cache.
 * Summary requests (runner/compaction/summarize.ts) get none of this: a
 * one-off prompt is not worth a cache write.
 */
import { createHash } from 'node:crypto';
import type { LanguageModel, ModelMessage, SystemModelMessage, ToolSet } from 'ai';
import { compaction } from 'steerbot/runner';

/** Cache settings of one request. */
export interface CachePlan {
  /** The `system` to pass: a string, or a system message carrying a breakpoint. */
  system: string | SystemModelMessage | undefined;
  /** The tools to send, read at each request: the run's set can grow mid-run (`read_artifact` joins once there is an artifact). */
  tools(): ToolSet;
  /** Call-level provider options (OpenAI's cache key). */
  providerOptions: Record<string, Record<string, string>> | undefined;
  /** The messages to send: `messages` itself, or a copy with breakpoints (the caller's array is never changed). */
  messages(messages: ModelMessage[]): ModelMessage[];
}

const ANTHROPIC_BREAKPOINT = { anthropic: { cacheControl: { type: 'ephemeral' } } } as const;

/** Which caching a model gets, from its provider id (`anthropic.messages`, `openai.chat`, …). */
export function cacheKind(model: LanguageModel): 'anthropic' | 'openai' | 'none' {
  const provider = typeof model === 'string' ? model.split('/')[0] : model.provider;
  if (provider?.startsWith('anthropic')) return 'anthropic';
  if (provider?.startsWith('openai')) return 'openai';
  return 'none';
}

/**
 * The OpenAI prompt cache key of a conversation: stable, and not the
 * conversation id itself (chat ids stay out of provider logs).
 */
export function promptCacheKey(conversationId: string): string {
  return `sb-${createHash('sha256').update(conversationId).digest('hex').slice(0, 32)}`;
}

/** The cache settings for requests of `conversationId` to `model`. */
export function cachePlan(model: LanguageModel, conversationId: string, system: string | undefined, tools: ToolSet): CachePlan {
  const kind = cacheKind(model);
  if (kind === 'openai') {
    return { system, tools: () => tools, providerOptions: { openai: { promptCacheKey: promptCacheKey(conversationId) } }, messages: (m) => m };
  }
  if (kind === 'none') return { system, tools: () => tools, providerOptions: undefined, messages: (m) => m };
  return {
    system: system === undefined ? undefined : { role: 'system', content: system, providerOptions: ANTHROPIC_BREAKPOINT },
    tools: () => {
      const last = Object.keys(tools).at(-1);
      return last === undefined ? tools : { ...tools, [last]: { ...tools[last]!, providerOptions: ANTHROPIC_BREAKPOINT } };
    },
    providerOptions: undefined,
    messages: (messages) => {
      const out = [...messages];
      const mark = (i: number) => {
        out[i] = { ...out[i]!, providerOptions: { ...out[i]!.providerOptions, ...ANTHROPIC_BREAKPOINT } } as ModelMessage;
      };
      if (isSummary(out[0])) mark(0);
      if (out.length > 0) mark(out.length - 1);
      return out;
    },
  };
}

function isSummary(m: ModelMessage | undefined): boolean {
  if (m?.role !== 'user') return false;
  const text = typeof m.content === 'string' ? m.content : m.content.find((p) => p.type === 'text')?.text;
  return text?.startsWith(compaction.SUMMARY_HEADER) ?? false;
}
