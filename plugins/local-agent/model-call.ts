/**
 * One model call, as an outcome rather than flags. When its deltas reach
 * the user (the agent streams, the channel shows them, the call is not a
 * quiet retry) the stream is read, deltas go to the delivery sink and the
 * watchdog guards the silences between parts; otherwise the whole answer is
 * asked for (`generateText`: no web streams to run), and the watchdog's
 * idle budget is the whole call's (nothing is said before the answer). The
 * call's span and metrics are ended here. What to do about a failed call is
 * the recovery step's business (plugins/local-agent/recovery.ts).
 */
import { generateText, type LanguageModelUsage, type ModelMessage, streamText } from 'ai';
import { type ModelCallTrace, requestsReached, type StepRecord, traceModelCall } from 'steerbot/runner';
import { type CallSpend, unansweredSpend } from './call-spend.js';
import type { LoopState } from './loop-state.js';
import { withCitations } from './native-search.js';
import { declaredTools } from './tool-batch.js';
import { StreamWatchdog } from './watchdog.js';

/**
 * How one call ended. `answered`: a step to record; `aborted`: the run's
 * signal (stop, shutdown, lost lease); `stalled`: the watchdog gave up on a
 * silent stream (or, for a call not streamed, on an answer that did not come
 * within the idle budget); `failed`: the provider or the SDK reported an
 * error. `text`: what the model said before it ended; `usage`: the estimate
 * of what the provider may bill for a call that ended so (call-spend.ts),
 * absent when nothing can have been billed.
 */
export type ModelOutcome =
  | { kind: 'answered'; step: StepRecord; text: string }
  | { kind: 'aborted'; text: string; usage?: CallSpend }
  | { kind: 'stalled'; text: string; usage?: CallSpend }
  | { kind: 'failed'; error: unknown; text: string; usage?: CallSpend };

/**
 * Calls the model with the state's prompt. `quiet`: deltas are not streamed
 * (a retried call whose first try already showed some; its final text
 * replaces them). Never throws for a model failure: it is an outcome.
 */
export function callModel(state: LoopState, step: number, quiet: boolean): Promise<ModelOutcome> {
  const { ctx, o } = state;
  const streamed = o.streaming === true && !quiet && ctx.delivery.streams?.() !== false;
  return streamed ? streamedCall(state, step) : wholeCall(state, step);
}

/** What every call of the state sends, with the signal that aborts it. */
function request(state: LoopState, abortSignal: AbortSignal) {
  const { cache, o } = state;
  return {
    model: state.model,
    tools: declaredTools(cache.tools()),
    messages: cache.messages(state.messages),
    ...(cache.system !== undefined && { system: cache.system }),
    ...(cache.providerOptions && { providerOptions: cache.providerOptions }),
    abortSignal,
    maxRetries: o.maxRetries ?? 2,
  };
}

/** The call, streamed: deltas go to the delivery sink as they come; every part feeds the watchdog. */
async function streamedCall(state: LoopState, step: number): Promise<ModelOutcome> {
  const { ctx } = state;
  const sent = [...state.messages];
  // Stopped already (during a compaction before the call): the SDK sends no request.
  const stoppedBefore = ctx.stop.signal.aborted;
  // One slot for every report of a failure (`onError`, an `error` part, a throw), in the order they come.
  const failure: { error?: unknown } = {};
  const call = traceModelCall(state.modelName, step);
  const watchdog = new StreamWatchdog(state.idleMs, ctx.stop.signal);
  const result = streamText({
    ...request(state, watchdog.signal),
    onError: ({ error }: { error: unknown }) => {
      failure.error = error;
    },
  });
  const { text, urls } = await readStream(result.fullStream, { watchdog, call, failure, onDelta: (t: string) => ctx.delivery.delta(t) });
  const ended = notAnswered(state, call, watchdog, { error: failure.error, text, sent, stoppedBefore });
  if (ended) return ended;
  return answered(state, call, sent, {
    messages: (await result.responseMessages) as ModelMessage[],
    text,
    urls,
    finishReason: await result.finishReason,
    usage: await result.usage,
  });
}

/** The call, not streamed: one request for the whole answer; the watchdog's idle budget bounds the whole call. */
async function wholeCall(state: LoopState, step: number): Promise<ModelOutcome> {
  const { ctx } = state;
  const sent = [...state.messages];
  const stoppedBefore = ctx.stop.signal.aborted;
  const call = traceModelCall(state.modelName, step);
  const watchdog = new StreamWatchdog(state.idleMs, ctx.stop.signal);
  let result: Awaited<ReturnType<typeof generateText>>;
  try {
    result = await generateText(request(state, watchdog.signal));
  } catch (error) {
    return notAnswered(state, call, watchdog, { error, text: '', sent, stoppedBefore }) ?? { kind: 'failed', error, text: '' };
  } finally {
    watchdog.stop();
  }
  // The first token the client gets arrives with the whole answer.
  call.part();
  // A stop that came as the answer arrived ends the call as a streamed one's would: cut off, with what was said.
  const ended = notAnswered(state, call, watchdog, { error: undefined, text: result.text, sent, stoppedBefore });
  if (ended) return ended;
  return answered(state, call, sent, {
    messages: result.responseMessages as ModelMessage[],
    text: result.text,
    urls: result.sources.flatMap((s) => (s.sourceType === 'url' ? [s.url] : [])),
    finishReason: result.finishReason,
    usage: result.usage,
  });
}

/** How a call ended: `error` (undefined when none was reported), what it said, what it sent, whether the run was stopped before it began. */
interface CallEnd {
  error: unknown;
  text: string;
  sent: ModelMessage[];
  stoppedBefore: boolean;
}

/** The outcome of a call that ended without an answer (aborted, stalled, failed: `error`), its span ended; undefined when it answered. */
function notAnswered(state: LoopState, call: ModelCallTrace, watchdog: StreamWatchdog, end: CallEnd): ModelOutcome | undefined {
  const { error, text, sent } = end;
  const aborted = state.ctx.stop.signal.aborted;
  if (!aborted && error === undefined && !watchdog.fired) return undefined;
  call.end(aborted ? 'aborted' : 'error', { error: watchdog.fired ? watchdog.signal.reason : error });
  // Providers report usage only with a whole answer, but bill the prompt of a request they got and what was said:
  // the call is charged their estimate, else a stop, a stall or a failure would spend what no budget counts.
  let requests = 1;
  if (aborted) requests = end.stoppedBefore ? 0 : 1;
  else if (!watchdog.fired) requests = requestsReached(error);
  const usage = unansweredSpend(state, sent, text, requests);
  const spent = usage && { usage };
  if (aborted) return { kind: 'aborted', text, ...spent };
  if (watchdog.fired) return { kind: 'stalled', text, ...spent };
  return { kind: 'failed', error, text, ...spent };
}

/** What an answered call returned, as the loop records it. */
interface Answer {
  messages: ModelMessage[];
  text: string;
  /** URLs the provider cited (native search). */
  urls: string[];
  finishReason: string;
  usage: LanguageModelUsage;
}

/** The `answered` outcome of a call: citations appended, the span ended, the usage observed for compaction. `sent`: the prompt it answered. */
function answered(state: LoopState, call: ModelCallTrace, sent: ModelMessage[], a: Answer): ModelOutcome {
  const { ctx } = state;
  const { finishReason, usage } = a;
  // URLs the provider cited (native search): appended before the step is recorded, so a takeover delivers the same text.
  const cited = withCitations(a.messages, a.text, a.urls);
  call.end('ok', {
    finishReason,
    usage: { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, cachedInputTokens: usage.inputTokenDetails?.cacheReadTokens },
  });
  if (usage.inputTokens !== undefined) ctx.compaction.observe(sent, usage.inputTokens, state.overhead);
  return {
    kind: 'answered',
    text: cited.text,
    step: {
      messages: cited.messages,
      finishReason,
      usage: {
        ...(usage.inputTokens !== undefined && { inputTokens: usage.inputTokens }),
        ...(usage.outputTokens !== undefined && { outputTokens: usage.outputTokens }),
        ...(usage.totalTokens !== undefined && { totalTokens: usage.totalTokens }),
        ...(usage.inputTokenDetails?.cacheReadTokens !== undefined && { cachedInputTokens: usage.inputTokenDetails.cacheReadTokens }),
      },
    },
  };
}

/**
 * Reads a call's stream to its end and returns the text said and the URLs
 * of its `source` parts (citations of a provider's own search); an error
 * reported by an `error` part or thrown by the stream goes to `failure`.
 * Every part feeds the watchdog and the call's time to first token;
 * `onDelta` gets the text deltas.
 */
async function readStream(
  stream: AsyncIterable<{ type: string; text?: string; error?: unknown; sourceType?: string; url?: string }>,
  r: { watchdog: StreamWatchdog; call: ModelCallTrace; failure: { error?: unknown }; onDelta: (text: string) => void },
): Promise<{ text: string; urls: string[] }> {
  const { watchdog, call, failure } = r;
  let text = '';
  const urls: string[] = [];
  try {
    for await (const part of stream) {
      watchdog.part(part as { type: string; toolCallId?: string });
      call.part();
      if (part.type === 'text-delta') {
        text += part.text;
        r.onDelta(part.text as string);
      } else if (part.type === 'source' && part.sourceType === 'url' && typeof part.url === 'string') {
        urls.push(part.url);
      } else if (part.type === 'error') {
        failure.error = part.error;
      }
    }
  } catch (err) {
    failure.error ??= err;
  } finally {
    watchdog.stop();
  }
  return { text, urls };
}
