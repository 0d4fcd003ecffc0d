/** Summarizer models for compaction tests (AI SDK mock models: no network). */
import { MockLanguageModelV4 } from 'ai/test';

const usage = {
  inputTokens: { total: 100, noCache: 100, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 20, text: 20, reasoning: undefined },
};

/** A model that answers `text` (a function of the prompt it got) and counts its calls. */
export function textModel(text: string | ((prompt: string) => string)) {
  const model = new MockLanguageModelV4({
    doGenerate: async (options) => ({
      content: [{ type: 'text', text: typeof text === 'string' ? text : text(JSON.stringify(options.prompt)) }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage,
      warnings: [],
    }),
  });
  return model;
}

/** A model whose every call fails with `error`. */
export function failingModel(error: Error = new Error('summarizer down')) {
  return new MockLanguageModelV4({
    doGenerate: async () => {
      throw error;
    },
  });
}

/** A model that never answers until its call is aborted. */
export function hangingModel() {
  return new MockLanguageModelV4({
    doGenerate: (options) =>
      new Promise((_, reject) => {
        const signal = options.abortSignal;
        if (signal?.aborted) reject(signal.reason);
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
      }),
  });
}
