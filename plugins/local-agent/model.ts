/** Builds the AI SDK language model from config. */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModel } from 'ai';
import { ConfigError } from '../../src/errors.js';
import type { ModelSettings } from '../../runner/plugin.js';

/**
 * The model for `settings`: an OpenAI-compatible endpoint (OpenAI, Ollama,
 * vLLM, …) by `baseURL` + `apiKey` + model name. Anthropic and Google need
 * their provider packages installed (`@ai-sdk/anthropic`, `@ai-sdk/google`).
 */
export async function modelFromSettings(settings: ModelSettings, fetchImpl?: typeof fetch): Promise<LanguageModel> {
  if (settings.provider === 'openai-compatible') {
    if (!settings.baseURL) throw new ConfigError([{ path: 'model.baseURL', message: 'required for the openai-compatible provider (e.g. https://api.openai.com/v1 or http://localhost:11434/v1)' }]);
    const provider = createOpenAICompatible({
      name: 'steerbot',
      baseURL: settings.baseURL,
      ...(settings.apiKey && { apiKey: settings.apiKey }),
      includeUsage: true,
      ...(fetchImpl && { fetch: fetchImpl }),
    });
    return provider.chatModel(settings.name);
  }
  const pkg = settings.provider === 'anthropic' ? '@ai-sdk/anthropic' : '@ai-sdk/google';
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pkg)) as Record<string, unknown>;
  } catch {
    throw new ConfigError([{ path: 'model.provider', message: `${settings.provider} needs the ${pkg} package: npm install ${pkg}` }]);
  }
  const factoryName = settings.provider === 'anthropic' ? 'createAnthropic' : 'createGoogleGenerativeAI';
  const factory = mod[factoryName] as (o: Record<string, unknown>) => (name: string) => LanguageModel;
  return factory({ ...(settings.apiKey && { apiKey: settings.apiKey }), ...(settings.baseURL && { baseURL: settings.baseURL }) })(settings.name);
}
