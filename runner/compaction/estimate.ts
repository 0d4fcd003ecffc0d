/**
 * Token estimates for compaction decisions, without a tokenizer at run time.
 *
 * Text is scanned once and each run of characters is weighted by its class,
 * set against o200k_base (GPT-4o / GPT-4.1 / GPT-5 / o-series) to lean high:
 * on the corpus of test/compaction/estimate.test.ts (chat in English, CJK,
 * European, Indic, Thai and Middle Eastern scripts; code, JSON, logs, emoji,
 * hashes and tokens, numbers, symbols) the estimate is never below the
 * tokenizer's count and at most `ESTIMATE_MAX_OVERCOUNT` times it. Text unlike
 * that corpus can still be undercounted: the bound is measured, not proven.
 * Tokenizers that are more expensive (cl100k_base on CJK, other vendors) are
 * caught by the per-conversation `Calibrator`, which learns the provider's own
 * ratio from the usage it reports.
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
  /** Accented Latin (Vietnamese included) and Cyrillic letters, per character. */
  otherLetter: 0.35,
  /** Greek and Hebrew letters, Indic scripts and Thai, per character. */
  smallAlphabet: 0.5,
  /** Arabic letters, per character. */
  arabic: 0.45,
  /** Box-drawing characters (runs of them merge), per character. */
  boxDrawing: 0.7,
  /** Emoji and other astral-plane symbols, per code point (rare ones cost 2 byte tokens or more). */
  astral: 2.25,
  /** Anything else outside ASCII (math, arrows, symbols: often 2 byte tokens), per character. */
  other: 1.6,
  /** Characters per token of a machine-made letter-and-digit run (hash, base64, key). */
  opaqueCharsPerToken: 1.5,
  /** ASCII digits per token (tokenizers split numbers in groups of three). */
  digitsPerToken: 3,
  /** First ASCII punctuation character of a run. */
  punctFirst: 1,
  /** Each further punctuation character of the same run (`");` merges). */
  punctNext: 0.3,
  /** A whitespace run other than one plain space before a word (a single space merges into the next word, not into a number). */
  whitespaceRun: 1,
} as const;

/**
 * Largest ratio of estimate to o200k_base count on the test corpus (the
 * estimate leans high): dividing an estimate by it gives a count the
 * tokenizer's does not fall below there.
 */
export const ESTIMATE_MAX_OVERCOUNT = 1.5;

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

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a flat table of Unicode ranges, one return per script; a lookup structure would be slower in the per-character hot path
function wideWeight(c: number): number {
  if ((c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0xf900 && c <= 0xfaff) || (c >= 0x20000 && c <= 0x3ffff)) return W.han;
  if (c >= 0x3040 && c <= 0x30ff) return W.kana;
  if ((c >= 0xac00 && c <= 0xd7af) || (c >= 0x1100 && c <= 0x11ff) || (c >= 0x3130 && c <= 0x318f)) return W.hangul;
  if ((c >= 0x3000 && c <= 0x303f) || (c >= 0xff00 && c <= 0xffef) || (c >= 0x2000 && c <= 0x206f)) return W.cjkPunct;
  if (c >= 0x10000) return W.astral;
  if ((c >= 0x00c0 && c <= 0x024f && c !== 0xd7 && c !== 0xf7) || (c >= 0x0400 && c <= 0x04ff) || (c >= 0x1e00 && c <= 0x1eff)) return W.otherLetter;
  if (c >= 0x0600 && c <= 0x06ff) return W.arabic;
  if ((c >= 0x0370 && c <= 0x03ff) || (c >= 0x0590 && c <= 0x05ff) || (c >= 0x0900 && c <= 0x0e7f)) return W.smallAlphabet;
  if (c >= 0x2500 && c <= 0x257f) return W.boxDrawing;
  return W.other;
}

const VOWEL = /[aeiouy]/i;
/** An upper-case run going on into lower case (`RJSMe`): pieces of a base64 or hash string, not a word. */
const INNER_CAPS = /[A-Z]{2}[a-z]/;

/**
 * Tokens of one word part (camelCase parts are parts of their own). Words of
 * up to 7 letters are one token, longer ones are charged more (rare long words
 * split into pieces of about 3 letters); a part with no vowel or with inner
 * capitals (hashes, base64, tokens) is charged a token per 2 letters, an
 * all-capitals part one per 4.
 */
function partCost(part: string): number {
  const len = part.length;
  if (len > 1 && (!VOWEL.test(part) || INNER_CAPS.test(part))) return Math.ceil(len / 2);
  if (len > 1 && part === part.toUpperCase()) return Math.ceil(len / 4);
  if (len <= 7) return 1;
  if (len <= 12) return 2;
  return Math.ceil(len / 3);
}

const isAlnum = (c: number) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
const isDigit = (c: number) => c >= 48 && c <= 57;

/**
 * Tokens of the ASCII letter-and-digit run `text[i, end)`: its letter runs
 * (as words) and digit runs (in groups of three). A run that looks
 * machine-made (a hash, base64, an API key: long, switching between
 * letters, digits and capitals every few characters) is charged at least a
 * token per 1.5 characters: tokenizers cut such runs into pieces of one or
 * two characters.
 */
function alnumTokens(text: string, i: number, end: number): number {
  let tokens = 0;
  let switches = 0;
  for (let k = i; k < end; ) {
    const digit = isDigit(text.charCodeAt(k));
    let j = k + 1;
    while (j < end && isDigit(text.charCodeAt(j)) === digit) j++;
    tokens += digit ? Math.ceil((j - k) / W.digitsPerToken) : wordTokens(text.slice(k, j));
    k = j;
  }
  for (let k = i + 1; k < end; k++) {
    const [a, b] = [charKind(text.charCodeAt(k - 1)), charKind(text.charCodeAt(k))];
    // Capital to lower case is how words start; any other change of kind is a cut.
    if (a !== b && !(a === 'u' && b === 'l')) switches++;
  }
  const len = end - i;
  const opaque = len >= OPAQUE_MIN_CHARS && switches * OPAQUE_CHARS_PER_SWITCH >= len;
  return opaque ? Math.max(tokens, len / W.opaqueCharsPerToken) : tokens;
}

const charKind = (c: number): 'd' | 'u' | 'l' => (isDigit(c) ? 'd' : c <= 90 ? 'u' : 'l');

/** Shortest letter-and-digit run that can count as machine-made. */
const OPAQUE_MIN_CHARS = 12;
/** A run that changes kind (letter, digit, capital) at least once per this many characters counts as machine-made. */
const OPAQUE_CHARS_PER_SWITCH = 6;

/** Tokens of one ASCII letter run: camelCase parts are charged one by one. */
function wordTokens(word: string): number {
  let tokens = 0;
  let start = 0;
  for (let i = 1; i <= word.length; i++) {
    const boundary = i === word.length || (word.charCodeAt(i) <= 90 && word.charCodeAt(i - 1) >= 97);
    if (boundary) {
      tokens += partCost(word.slice(start, i));
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
    if (cls === 'letter' || cls === 'digit') {
      let end = i + 1;
      while (end < n && isAlnum(text.charCodeAt(end))) end++;
      total += alnumTokens(text, i, end);
      i = end;
      continue;
    }
    let j = i + 1;
    while (j < n && text.charCodeAt(j) < 128 && asciiClass(text.charCodeAt(j)) === cls) j++;
    const len = j - i;
    switch (cls) {
      case 'space':
        // One plain space merges into a following word or punctuation, not into a number.
        if (!(len === 1 && c === 32) || (j < n && asciiClass(text.charCodeAt(j)) === 'digit')) total += W.whitespaceRun;
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
  /** Lowest ratio kept. Default 1: calibration only raises the estimate, so it stays on the high side for a provider that counts fewer tokens. */
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
    this.min = o.min ?? 1;
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
