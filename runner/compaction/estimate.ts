/**
 * Token estimates for compaction decisions, without a tokenizer at run time.
 *
 * Text is scanned once and each run of characters is weighted by its class,
 * fitted against o200k_base (GPT-4o / GPT-4.1 / GPT-5 / o-series) on chat,
 * code, JSON and log text in English, Chinese, Japanese and Korean (see
 * test/compaction/estimate.test.ts): ASCII words cost about one token per
 * 7 letters, digits one per group of three, CJK about 0.8 per character.
 * `chars / 4` would undercount CJK text 3–4×; this does not. Tokenizers that
 * are more expensive on CJK (cl100k_base, other vendors) are caught by the
 * per-conversation `Calibrator`, which learns the provider's own ratio from
 * the usage it reports.
 */
import type { ModelMessage } from 'ai';
import type { SeqEntry } from '../../src/record/entries.js';

/** Weights per character class, in tokens. */
const W = {
  /** CJK unified ideographs (and extensions, compatibility ideographs), per character. */
  han: 0.8,
  /** Hiragana and katakana, per character. */
  kana: 0.75,
  /** Hangul syllables and jamo, per character. */
  hangul: 0.8,
  /** CJK and full-width punctuation, per character. */
  cjkPunct: 1,
  /** Other letters outside ASCII (accented Latin, Cyrillic, Greek, Arabic, …), per character. */
  otherLetter: 0.35,
  /** Emoji and other astral-plane symbols, per code point. */
  astral: 2,
  /** Anything else outside ASCII, per character. */
  other: 1,
  /** ASCII letters per token, within one word part (camelCase parts are split). */
  lettersPerToken: 7,
  /** ASCII digits per token (tokenizers split numbers in groups of three). */
  digitsPerToken: 3,
  /** First ASCII punctuation character of a run. */
  punctFirst: 1,
  /** Each further punctuation character of the same run (`");` merges). */
  punctNext: 0.3,
  /** A whitespace run other than one plain space (a single space merges into the next word). */
  whitespaceRun: 1,
} as const;

/** Fixed cost of one message (role and framing tokens). */
export const MESSAGE_OVERHEAD_TOKENS = 4;
/** Cost charged for an image or file part, whose size the estimator cannot see. */
export const BINARY_PART_TOKENS = 1000;

type Cls = 'letter' | 'digit' | 'space' | 'punct' | 'wide';

function asciiClass(c: number): Cls {
  if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122)) return 'letter';
  if (c >= 48 && c <= 57) return 'digit';
  if (c === 32 || (c >= 9 && c <= 13)) return 'space';
  return 'punct';
}

function wideWeight(c: number): number {
  if ((c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0xf900 && c <= 0xfaff) || (c >= 0x20000 && c <= 0x3ffff)) return W.han;
  if (c >= 0x3040 && c <= 0x30ff) return W.kana;
  if ((c >= 0xac00 && c <= 0xd7af) || (c >= 0x1100 && c <= 0x11ff) || (c >= 0x3130 && c <= 0x318f)) return W.hangul;
  if ((c >= 0x3000 && c <= 0x303f) || (c >= 0xff00 && c <= 0xffef) || (c >= 0x2000 && c <= 0x206f)) return W.cjkPunct;
  if (c >= 0x10000) return W.astral;
  if ((c >= 0x00c0 && c <= 0x024f) || (c >= 0x0370 && c <= 0x06ff)) return W.otherLetter;
  return W.other;
}

/** Tokens of one ASCII letter run: camelCase parts are tokens of their own. */
function wordTokens(word: string): number {
  let tokens = 0;
  let start = 0;
  for (let i = 1; i <= word.length; i++) {
    const boundary = i === word.length || (word.charCodeAt(i) <= 90 && word.charCodeAt(i - 1) >= 97);
    if (boundary) {
      tokens += Math.ceil((i - start) / W.lettersPerToken);
      start = i;
    }
  }
  return tokens;
}

/** Estimated tokens of `text` (an o200k_base-like count; never `chars / 4` on CJK). */
export function estimateTokens(text: string): number {
  let total = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.codePointAt(i)!;
    if (c >= 128) {
      total += wideWeight(c);
      i += c >= 0x10000 ? 2 : 1;
      continue;
    }
    const cls = asciiClass(c);
    let j = i + 1;
    while (j < n && text.charCodeAt(j) < 128 && asciiClass(text.charCodeAt(j)) === cls) j++;
    const len = j - i;
    switch (cls) {
      case 'letter':
        total += wordTokens(text.slice(i, j));
        break;
      case 'digit':
        total += Math.ceil(len / W.digitsPerToken);
        break;
      case 'space':
        if (!(len === 1 && c === 32)) total += W.whitespaceRun;
        break;
      default:
        total += W.punctFirst + (len - 1) * W.punctNext;
    }
    i = j;
  }
  return Math.ceil(total);
}

/** Estimated tokens of one content part of a model message. */
function partTokens(part: unknown): number {
  if (typeof part !== 'object' || part === null) return 0;
  const p = part as Record<string, unknown>;
  switch (p.type) {
    case 'text':
    case 'reasoning':
      return estimateTokens(String(p.text ?? ''));
    case 'tool-call':
      return estimateTokens(String(p.toolName ?? '')) + estimateTokens(jsonOf(p.input)) + 3;
    case 'tool-result':
      return estimateTokens(String(p.toolName ?? '')) + estimateTokens(jsonOf(p.output)) + 3;
    case 'image':
    case 'file':
      return BINARY_PART_TOKENS;
    default:
      return estimateTokens(jsonOf(p));
  }
}

function jsonOf(v: unknown): string {
  if (typeof v === 'string') return v;
  try {
    return JSON.stringify(v) ?? '';
  } catch {
    return '';
  }
}

/** Estimated tokens of `messages` as a request prompt: text, tool calls and results (as JSON), and per-message framing. */
export function estimateMessages(messages: readonly ModelMessage[]): number {
  let total = 0;
  for (const m of messages) {
    total += MESSAGE_OVERHEAD_TOKENS;
    if (typeof m.content === 'string') total += estimateTokens(m.content);
    else for (const part of m.content as unknown[]) total += partTokens(part);
  }
  return total;
}

/** Options of a `Calibrator`. */
export interface CalibratorOptions {
  /** Lowest ratio kept. Default 0.5. */
  min?: number;
  /** Highest ratio kept. Default 4. */
  max?: number;
  /** Weight of a new observation in the moving average (0–1]. Default 0.5. */
  alpha?: number;
  /** Conversations remembered (least recently used forgotten). Default 10000. */
  maxConversations?: number;
}

/**
 * Per-conversation ratio of provider-reported input tokens to our estimate of
 * the same request, as a clamped moving average. In memory: a new process
 * starts at 1 and learns from the first request it sees.
 */
export class Calibrator {
  private readonly ratios = new Map<string, number>();
  private readonly min: number;
  private readonly max: number;
  private readonly alpha: number;
  private readonly cap: number;

  constructor(o: CalibratorOptions = {}) {
    this.min = o.min ?? 0.5;
    this.max = o.max ?? 4;
    this.alpha = o.alpha ?? 0.5;
    this.cap = o.maxConversations ?? 10_000;
  }

  /** Records one request: the provider's `observed` input tokens against our `estimated` tokens of the same request. */
  observe(conversationId: string, observed: number, estimated: number): void {
    if (!(observed > 0) || !(estimated > 0)) return;
    const sample = this.clamp(observed / estimated);
    const prev = this.ratios.get(conversationId);
    const next = prev === undefined ? sample : this.clamp(prev + this.alpha * (sample - prev));
    this.ratios.delete(conversationId);
    this.ratios.set(conversationId, next);
    if (this.ratios.size > this.cap) this.ratios.delete(this.ratios.keys().next().value!);
  }

  /** The ratio for a conversation (1 until observed). */
  ratio(conversationId: string): number {
    return this.ratios.get(conversationId) ?? 1;
  }

  /** `estimated` scaled by the conversation's ratio, rounded up. */
  calibrate(conversationId: string, estimated: number): number {
    return Math.ceil(estimated * this.ratio(conversationId));
  }

  private clamp(r: number): number {
    return Math.min(this.max, Math.max(this.min, r));
  }
}

/** What a request estimate is based on. */
export interface RequestEstimate {
  /** Estimated input tokens of the next request. */
  tokens: number;
  /** `usage`: the provider's count of the last request plus an estimate of what was added since; `estimate`: our estimate alone. */
  basis: 'usage' | 'estimate';
}

/** Options of `estimateRequest`. */
export interface RequestEstimateOptions {
  /** The record entries the prompt was projected from (after the checkpoint), in seq order. */
  entries: readonly SeqEntry[];
  /** The prompt's messages (summary included). */
  messages: readonly ModelMessage[];
  /** Messages added to the prompt since `entries` (this invocation's steering, tool results), if any. */
  added?: readonly ModelMessage[];
  /** Tokens outside the messages: system prompt, tool definitions. Default 0. */
  overheadTokens?: number;
  /** Calibration ratio (observed / estimated) applied to estimated parts. Default 1. */
  ratio?: number;
  /** Projects entries to messages (the runtime's `projectHistory`); used to estimate what was added after the last usage. */
  project(entries: SeqEntry[]): ModelMessage[];
}

/**
 * Estimated input tokens of the next request. When the last `model.step` in
 * `entries` reported input tokens and no compaction followed it, the answer is
 * that count plus the calibrated estimate of what came after its request (its
 * own response, later entries and `added`); otherwise (no usage, or a
 * compaction or reset since) the calibrated estimate of the whole prompt plus
 * `overheadTokens`.
 */
export function estimateRequest(o: RequestEstimateOptions): RequestEstimate {
  const ratio = o.ratio ?? 1;
  const added = o.added ? estimateMessages(o.added) : 0;
  let usageAt = -1;
  for (let i = o.entries.length - 1; i >= 0; i--) {
    const e = o.entries[i]!;
    // A provider count from before a compaction or a reset includes what is no longer in the prompt.
    if (e.kind === 'compaction' || e.kind === 'conversation.reset') break;
    if (e.kind === 'model.step' && e.usage?.inputTokens !== undefined) {
      usageAt = i;
      break;
    }
  }
  if (usageAt >= 0) {
    const step = o.entries[usageAt] as SeqEntry & { kind: 'model.step' };
    const since = estimateMessages(o.project(o.entries.slice(usageAt)));
    return { tokens: step.usage!.inputTokens! + Math.ceil((since + added) * ratio), basis: 'usage' };
  }
  return { tokens: Math.ceil((estimateMessages(o.messages) + added) * ratio) + (o.overheadTokens ?? 0), basis: 'estimate' };
}
