/**
 * The runner's model factory: an AI SDK language model from the `model`
 * settings, through the provider packages. Runner plugins and the compaction
 * summarizer get their model here.
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogle } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { ImageModel, LanguageModel, LanguageModelMiddleware, SpeechModel, TranscriptionModel } from 'ai';
import { embedMany, wrapLanguageModel } from 'ai';
import { MODEL_PROVIDER_KEY_ENV } from '../src/config/defaults.js';
import { apiProblem } from '../src/config/model-catalogue.js';
import { ConfigError } from '../src/errors.js';
import { jsonNestedDeeper, MAX_JSON_DEPTH } from '../src/json.js';
import type { MemoryEmbedder } from '../src/people/memory.js';
import type { ModelSettings } from './plugin.js';

/**
 * The model for `settings`:
 * - `openai`: OpenAI's chat completions API (or with `api: 'responses'` its
 *   Responses API) at its default base URL (or `baseURL`);
 * - `anthropic`, `google`: their own APIs;
 * - `openai-compatible`: any OpenAI-style endpoint by `baseURL` (Ollama, vLLM, LM Studio, …).
 * @throws ConfigError when a required setting is missing (the key, or `baseURL` for `openai-compatible`), or the API is not the provider's.
 */
export function createModel(settings: ModelSettings, fetchImpl?: typeof fetch): LanguageModel {
  return wrapLanguageModel({ model: providerModel(settings, fetchImpl), middleware: shallowToolInput });
}

/**
 * What a tool call whose input nests deeper than `MAX_JSON_DEPTH` gets as its input instead: text that is not
 * JSON, so the AI SDK refuses the call as invalid input (the model is told why and may try again) and no code
 * walks the deep value (cloning the prompt, validating, hashing the call, recording the step).
 */
const DEEP_TOOL_INPUT = `refused: the tool input is nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`;

/** A tool call part of the provider's answer with its input kept within the nesting limit; other parts as they are. */
function shallow<P extends { type: string }>(part: P): P {
  if (part.type !== 'tool-call') return part;
  const call = part as P & { input: string };
  return jsonNestedDeeper(call.input) ? { ...call, input: DEEP_TOOL_INPUT } : part;
}

/** The nesting limit applied to the tool calls a provider answers with (the JSON text the model wrote). */
const shallowToolInput: LanguageModelMiddleware = {
  specificationVersion: 'v4',
  wrapGenerate: async ({ doGenerate }) => {
    const result = await doGenerate();
    return { ...result, content: result.content.map(shallow) };
  },
  wrapStream: async ({ doStream }) => {
    const result = await doStream();
    return { ...result, stream: result.stream.pipeThrough(new TransformStream({ transform: (part, out) => out.enqueue(shallow(part)) })) };
  },
};

function providerModel(settings: ModelSettings, fetchImpl: typeof fetch | undefined) {
  const api = apiProblem(settings);
  if (api) throw new ConfigError([{ path: 'model.api', message: api }]);
  const common = {
    ...(settings.apiKey && { apiKey: settings.apiKey }),
    ...(settings.baseURL && { baseURL: settings.baseURL }),
    ...(fetchImpl && { fetch: fetchImpl }),
  };
  if (settings.provider === 'openai-compatible') {
    if (!settings.baseURL) {
      throw new ConfigError([
        { path: 'model.baseURL', message: 'required for the openai-compatible provider (OPENAI_BASE_URL, e.g. http://localhost:11434/v1 for Ollama)' },
      ]);
    }
    return createOpenAICompatible({ name: 'steerbot', baseURL: settings.baseURL, includeUsage: true, ...common }).chatModel(settings.name);
  }
  if (!settings.apiKey) {
    const variable = MODEL_PROVIDER_KEY_ENV[settings.provider];
    throw new ConfigError([{ path: 'model.apiKey', message: `required for the ${settings.provider} provider: set ${variable}` }]);
  }
  switch (settings.provider) {
    case 'openai':
      return settings.api === 'responses' ? createOpenAI(common).responses(settings.name) : createOpenAI(common).chat(settings.name);
    case 'anthropic':
      return createAnthropic(common)(settings.name);
    case 'google':
      return createGoogle(common)(settings.name);
  }
}

/**
 * A speech-to-text model named `name` (`whisper-1`, `gpt-4o-mini-transcribe`)
 * on the configured provider: OpenAI's transcription API, at `baseURL` when
 * set (an OpenAI-compatible server with that API).
 * @throws ConfigError for a provider without a transcription API here, or a missing key.
 */
export function createTranscriptionModel(settings: ModelSettings, name: string, fetchImpl?: typeof fetch): TranscriptionModel {
  return openaiApi(settings, 'transcription', 'model.provider', fetchImpl).transcription(name);
}

/**
 * The image model of the `generate_image` tool: `name` (`gpt-image-1`) on the
 * configured provider's OpenAI images API, at `baseURL` when set.
 * @throws ConfigError for a provider without that API here (naming `settingPath`), or a missing key.
 */
export function createImageModel(settings: ModelSettings, name: string, settingPath: string, fetchImpl?: typeof fetch): ImageModel {
  return openaiApi(settings, 'image generation', settingPath, fetchImpl).image(name);
}

/**
 * The speech model of spoken replies: `name` (`gpt-4o-mini-tts`) on the
 * configured provider's OpenAI speech API, at `baseURL` when set.
 * @throws ConfigError for a provider without that API here (naming `settingPath`), or a missing key.
 */
export function createSpeechModel(settings: ModelSettings, name: string, settingPath: string, fetchImpl?: typeof fetch): SpeechModel {
  return openaiApi(settings, 'speech', settingPath, fetchImpl).speech(name);
}

/** OpenAI's API for `what` on the configured provider (OpenAI, or an OpenAI-compatible server at `baseURL`). */
function openaiApi(settings: ModelSettings, what: string, path: string, fetchImpl: typeof fetch | undefined) {
  if (settings.provider !== 'openai' && settings.provider !== 'openai-compatible') {
    throw new ConfigError([{ path, message: `${what} needs model.provider openai or openai-compatible (it is ${settings.provider})` }]);
  }
  if (settings.provider === 'openai' && !settings.apiKey) {
    throw new ConfigError([{ path: 'model.apiKey', message: `required for ${what} with the openai provider: set ${MODEL_PROVIDER_KEY_ENV.openai}` }]);
  }
  return createOpenAI({
    // A local OpenAI-compatible server may need no key; the provider insists on one.
    apiKey: settings.apiKey ?? 'none',
    ...(settings.baseURL && { baseURL: settings.baseURL }),
    ...(fetchImpl && { fetch: fetchImpl }),
  });
}

/**
 * The memory embedder (`memory.embeddingModel`): an embedding model named
 * `name` (`text-embedding-3-small`) on the configured provider, OpenAI's
 * embeddings API, at `baseURL` when set (an OpenAI-compatible server with it).
 * @throws ConfigError for a provider without an embeddings API here, or a missing key.
 */
export function createEmbedder(settings: ModelSettings, name: string, fetchImpl?: typeof fetch): MemoryEmbedder {
  if (settings.provider !== 'openai' && settings.provider !== 'openai-compatible') {
    throw new ConfigError([
      { path: 'memory.embeddingModel', message: `embeddings need model.provider openai or openai-compatible (it is ${settings.provider})` },
    ]);
  }
  if (settings.provider === 'openai' && !settings.apiKey) {
    throw new ConfigError([{ path: 'model.apiKey', message: `required for embeddings with the openai provider: set ${MODEL_PROVIDER_KEY_ENV.openai}` }]);
  }
  const model = createOpenAI({
    // A local OpenAI-compatible server may need no key; the provider insists on one.
    apiKey: settings.apiKey ?? 'none',
    ...(settings.baseURL && { baseURL: settings.baseURL }),
    ...(fetchImpl && { fetch: fetchImpl }),
  }).embedding(name);
  return {
    async embed(texts, signal) {
      const r = await embedMany({ model, values: texts, maxRetries: 1, ...(signal && { abortSignal: signal }) });
      return r.embeddings;
    },
  };
}

/**
 * What the bot answers while no model is configured: one message naming the
 * variables to set (no secrets: it says which are missing, not their values).
 */
export function modelSetupNotice(settings: Pick<ModelSettings, 'provider'>): string {
  const now =
    settings.provider === 'openai-compatible'
      ? 'The model provider is openai-compatible but OPENAI_BASE_URL is not set.'
      : `The model provider is ${settings.provider} but ${MODEL_PROVIDER_KEY_ENV[settings.provider]} is not set.`;
  return [
    `I can't answer yet: no model is configured. ${now}`,
    'Set one of these and restart steerbot:',
    '• OPENAI_API_KEY (OpenAI), or',
    '• STEERBOT_MODEL_PROVIDER=anthropic with ANTHROPIC_API_KEY, or STEERBOT_MODEL_PROVIDER=google with GOOGLE_GENERATIVE_AI_API_KEY, or',
    '• STEERBOT_MODEL_PROVIDER=openai-compatible with OPENAI_BASE_URL for a local server (e.g. http://localhost:11434/v1 for Ollama) and STEERBOT_MODEL naming the model.',
  ].join('\n');
}
