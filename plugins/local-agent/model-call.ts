/**
 * One model call, as an outcome rather than flags: the stream is read
 * (deltas streamed to the delivery sink unless told to stay quiet), the
 * watchdog guards it, and the call's span and metrics are ended here. What
 * to do about a failed call is the recovery step's business
 * (plugins/local-agent/recovery.ts).
 */
import { type ModelMessage, streamText } from 'ai';
import { type ModelCallTrace, type StepRecord, traceModelCall } from 'steerbot/runner';
import type { LoopState } from './loop-state.js';
import { withCitations } from './native-search.js';
import { declaredTools } from './tool-batch.js';
import { StreamWatchdog } from './watchdog.js';

/**
 * How one call ended. `answered`: a step to record; `aborted`: the run's
 * signal (stop, shutdown, lost lease); `stalled`: the watchdog gave up on a
 * silent stream; `failed`: the provider or the SDK reported `error`. `text`:
 * what the model said before it ended.
 */
export type ModelOutcome =
  | { kind: 'answered'; step: StepRecord; text: string }
  | { kind: 'aborted'; text: string }
  | { kind: 'stalled'; text: string }
  | { kind: 'failed'; error: unknown; text: string };

/**
 * Calls the model with the state's prompt. `quiet`: deltas are not streamed
 * (a retried call whose first try already showed some; its final text
 * replaces them). Never throws for a model failure: it is an outcome.
 */
export async function callModel(state: LoopState, step: number, quiet: boolean): Promise<ModelOutcome> {
  const { ctx, o, cache } = state;
  const sent = [...state.messages];
  // One slot for every report of a failure (`onError`, an `error` part, a throw), in the order they come.
  const failure: { error?: unknown } = {};
  const call = traceModelCall(state.modelName, step);
  const watchdog = new StreamWatchdog(state.idleMs, ctx.stop.signal);
  const result = streamText({
    model: state.model,
    tools: declaredTools(cache.tools()),
    messages: cache.messages(state.messages),
    ...(cache.system !== undefined && { system: cache.system }),
    ...(cache.providerOptions && { providerOptions: cache.providerOptions }),
    abortSignal: watchdog.signal,
    maxRetries: o.maxRetries ?? 2,
    onError: ({ error }: { error: unknown }) => {
      failure.error = error;
    },
  });
  const { text, urls } = await readStream(result.fullStream, {
    watchdog,
    call,
    failure,
    ...(o.streaming && !quiet && { onDelta: (t: string) => ctx.delivery.delta(t) }),
  });
  const streamError = failure.error;

  if (ctx.stop.signal.aborted || streamError !== undefined || watchdog.fired)
    call.end(ctx.stop.signal.aborted ? 'aborted' : 'error', { error: watchdog.fired ? watchdog.signal.reason : streamError });
  if (ctx.stop.signal.aborted) return { kind: 'aborted', text };
  if (watchdog.fired) return { kind: 'stalled', text };
  if (streamError !== undefined) return { kind: 'failed', error: streamError, text };

  // URLs the provider cited (native search): appended before the step is recorded, so a takeover delivers the same text.
  const cited = withCitations((await result.responseMessages) as ModelMessage[], text, urls);
  const finishReason = await result.finishReason;
  const usage = await result.usage;
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
  r: { watchdog: StreamWatchdog; call: ModelCallTrace; failure: { error?: unknown }; onDelta?: (text: string) => void },
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
        r.onDelta?.(part.text as string);
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
