/**
 * What one invocation of the agent loop works on: the prompt it grows step
 * by step, the messages it answers, and the request settings every model
 * call of the invocation shares. Declared in one place so the loop's steps
 * (model call, recovery, turn boundary) share state without closures.
 */

import type { LanguageModel, ModelMessage, ToolSet, TranscriptionModel } from 'ai';
import type { SteeringMode } from 'steerbot/plugin';
import { compaction, type RunContext, type RunResult } from 'steerbot/runner';
import type { AttachmentParts } from './attachments.js';
import { type CachePlan, cachePlan } from './caching.js';
import { RUN_REASON } from './outcomes.js';
import type { VoiceReplyOptions } from './voice-replies.js';

/** Settings of one loop. */
export interface LoopOptions {
  model: LanguageModel;
  /** Models a call fails over to, in order, when `model` fails with a rate limit, overload, 5xx, network error or silent stream. Default: none. */
  fallbacks?: LanguageModel[];
  tools: ToolSet;
  /** System prompt. */
  system?: string;
  /** Steering taken per boundary. Default `all`. */
  steeringMode?: SteeringMode;
  /** Most model steps in one invocation (guards against tool loops). Default 24. */
  maxSteps?: number;
  /** Provider retries of a failed call before the run fails. Default 2. */
  maxRetries?: number;
  /** Stream deltas to the delivery sink (and so the model calls, when the sink's channel streams). Default false. */
  streaming?: boolean;
  /** Text sent when the model fails (the runtime sends it, with any steered message left unanswered). */
  modelFailureMessage?: string;
  /** Puts attachments of the messages a run answers into its requests as image / file parts. Default: placeholders only. */
  attachments?: AttachmentParts;
  /** Transcribes voice notes and audio files of the messages a run answers. Default: none (placeholders). */
  transcriber?: TranscriptionModel;
  /** Spoken replies (voice-replies.ts). Default: none. */
  voice?: VoiceReplyOptions;
  /** A model stream silent this long (no part, response headers included; tool execution excluded) is aborted and retried once, in ms; a call asked whole must answer within it. 0: never. Default 120 000. */
  streamIdleTimeoutMs?: number;
  /** Token estimates kept across runs (the plugin's: its system prompts and tool descriptions are estimated once). Default: one for this invocation. */
  estimates?: SharedEstimates;
}

/** Most texts `SharedEstimates` keeps. */
const MAX_SHARED_TEXTS = 256;
/** Longest text `SharedEstimates` keeps, in characters (a longer one is estimated each time). */
const MAX_SHARED_CHARS = 64 * 1024;

/**
 * Token estimates of the texts many runs share (a profile's system prompt,
 * the tool descriptions), each made once: the estimate reads every
 * character with its rules, a lookup only hashes and compares. Bounded: at
 * most 256 texts of at most 64 KiB; the oldest is dropped first.
 */
export class SharedEstimates {
  private readonly known = new Map<string, number>();

  /** `estimateTokens(text)`, from the first time it was asked when it is still kept. */
  tokens(text: string): number {
    let n = this.known.get(text);
    if (n !== undefined) return n;
    n = compaction.estimateTokens(text);
    if (text.length <= MAX_SHARED_CHARS) {
      if (this.known.size >= MAX_SHARED_TEXTS) this.known.delete(this.known.keys().next().value as string);
      this.known.set(text, n);
    }
    return n;
  }

  /** How many texts are kept. */
  get size(): number {
    return this.known.size;
  }
}

/** Default of `streamIdleTimeoutMs`: generous, since reasoning models may think for a while before their first token. */
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 120_000;

type Answered = RunContext['inputs'];

/** The state of one invocation of the loop. */
export class LoopState {
  /** The prompt: history, then every step and steered message of this invocation. */
  readonly messages: ModelMessage[];
  /** The messages this invocation answers: their attachments go to the model as parts (again after a compaction rebuilt the prompt). */
  readonly answering: Answered;
  /** Request tokens outside the messages (system prompt, tool definitions), for the compaction estimate. */
  readonly overhead: number;
  /** Provider prompt caching: the same system, tools and cache key for every request of the conversation. */
  cache: CachePlan;
  /** The model calls go to: `o.model`, or the fallback the invocation failed over to (it stays for the invocation's later steps). */
  model: LanguageModel;
  modelName: string;
  /** The fallbacks not tried yet, in order. */
  private readonly untried: LanguageModel[];
  /** How long a silent model stream is tolerated, in ms. */
  readonly idleMs: number;

  constructor(
    readonly ctx: RunContext,
    readonly o: LoopOptions,
  ) {
    this.messages = [...ctx.history];
    this.answering = [...ctx.inputs];
    const estimates = o.estimates ?? new SharedEstimates();
    this.overhead =
      estimates.tokens(o.system ?? '') + Object.entries(o.tools).reduce((n, [name, t]) => n + 50 + estimates.tokens(name + (t.description ?? '')), 0);
    this.model = o.model;
    this.untried = [...(o.fallbacks ?? [])];
    this.cache = cachePlan(o.model, ctx.run.conversationId, o.system, o.tools);
    this.modelName = modelId(o.model);
    this.idleMs = o.streamIdleTimeoutMs ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS;
  }

  /** Puts the attachments of `entries` into the prompt; the result that ends the run when the attachment policy refuses one. */
  async attach(entries: Answered): Promise<RunResult | undefined> {
    const refused = await this.o.attachments?.expand(this.ctx, this.messages, entries, this.o.transcriber);
    return refused ? { outcome: 'failed', reason: RUN_REASON.attachmentUnsupported, notice: refused, final: true } : undefined;
  }

  /** Moves the invocation's calls to the next fallback; false when none is left. */
  failOver(): boolean {
    const next = this.untried.shift();
    if (!next) return false;
    this.model = next;
    this.modelName = modelId(next);
    this.cache = cachePlan(next, this.ctx.run.conversationId, this.o.system, this.o.tools);
    return true;
  }

  /** Replaces the prompt with a compacted one (the record holds everything it replaces). */
  replace(compacted: ModelMessage[]): void {
    this.messages.splice(0, this.messages.length, ...compacted);
  }

  /** Puts the answered messages' attachments back into a rebuilt prompt (a refusal was reported when they first arrived). */
  async reattach(): Promise<void> {
    await this.attach(this.answering);
  }
}

/** A model's id, as spans, metrics and logs name it. */
function modelId(model: LanguageModel): string {
  return typeof model === 'string' ? model : model.modelId;
}
