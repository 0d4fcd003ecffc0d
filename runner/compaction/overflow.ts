/**
 * Recognizing a provider's "the prompt is longer than the context window"
 * refusal, which triggers overflow compaction. Providers signal it only in
 * the status and body text, so this one check reads provider message text
 * (never our own errors').
 */
import { APICallError } from 'ai';

const OVERFLOW_PATTERNS = [
  /context[_ ]length[_ ]exceeded/i, // OpenAI, OpenAI-compatible servers
  /maximum context length/i, // OpenAI, vLLM
  /prompt is too long/i, // Anthropic
  /input is too long/i, // Bedrock
  /exceeds? (the )?(model'?s? )?context (window|length|size)/i, // Gemini, Ollama, llama.cpp
  /too many (input )?tokens/i,
  /input token count .* exceeds/i, // Gemini
  /context window/i,
];

/** Whether `err` (or an error it wraps) is a provider refusing a request for being longer than the model's context window. */
export function isContextOverflowError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    if (APICallError.isInstance(e)) {
      if (e.statusCode === 413) return true;
      const text = `${e.message}\n${e.responseBody ?? ''}`;
      if ((e.statusCode === undefined || e.statusCode === 400 || e.statusCode === 422) && OVERFLOW_PATTERNS.some((p) => p.test(text))) return true;
    }
    const wrapper = e as { lastError?: unknown; cause?: unknown };
    e = wrapper.lastError ?? wrapper.cause; // RetryError keeps the last attempt's error
  }
  return false;
}
