/**
 * A small catalogue of common models: their context window and output limit,
 * so `model.contextWindow` / `model.outputReserve` need setting only for other
 * models (local models, new releases) or to override. Lives in the core
 * because the configuration schema fills the settings from it at load.
 *
 * Numbers are the providers' published limits. The output limit is what a run
 * keeps free for the answer: the providers count prompt + answer against the
 * window.
 */
import { DEFAULTS, type ModelApi, type ModelProvider } from './defaults.js';

/** Limits of one model, in tokens. */
export interface ModelLimits {
  /** Prompt + answer. */
  contextWindow: number;
  /** Most tokens of one answer. */
  outputLimit: number;
}

const l = (contextWindow: number, outputLimit: number): ModelLimits => ({ contextWindow, outputLimit });

/** Known models by name (the provider's id without a date suffix). */
export const MODEL_CATALOGUE: Readonly<Record<string, ModelLimits>> = {
  // OpenAI
  'gpt-4o': l(128_000, 16_384),
  'gpt-4o-mini': l(128_000, 16_384),
  'gpt-4.1': l(1_047_576, 32_768),
  'gpt-4.1-mini': l(1_047_576, 32_768),
  'gpt-4.1-nano': l(1_047_576, 32_768),
  'gpt-5': l(400_000, 128_000),
  'gpt-5-mini': l(400_000, 128_000),
  'gpt-5-nano': l(400_000, 128_000),
  o3: l(200_000, 100_000),
  'o3-mini': l(200_000, 100_000),
  'o4-mini': l(200_000, 100_000),
  // Anthropic
  'claude-opus-4-1': l(200_000, 32_000),
  'claude-opus-4': l(200_000, 32_000),
  'claude-sonnet-4-5': l(200_000, 64_000),
  'claude-sonnet-4': l(200_000, 64_000),
  'claude-haiku-4-5': l(200_000, 64_000),
  'claude-3-7-sonnet': l(200_000, 64_000),
  'claude-3-5-haiku': l(200_000, 8_192),
  // Google
  'gemini-2.5-pro': l(1_048_576, 65_536),
  'gemini-2.5-flash': l(1_048_576, 65_536),
  'gemini-2.5-flash-lite': l(1_048_576, 65_536),
  'gemini-2.0-flash': l(1_048_576, 8_192),
};

// A dated or aliased release of a catalogued model: `gpt-4o-2024-08-06`, `claude-sonnet-4-20250514`, `claude-3-5-haiku-latest`.
const RELEASE_SUFFIX = /^(-\d{4}-\d{2}-\d{2}|-\d{8}|-latest|-preview(-[\w-]+)?|-\d{3})?$/;

/**
 * The limits of `name`: the catalogue entry of the name itself, or of the
 * longest catalogued name it extends by a release suffix (a date, `-latest`,
 * `-preview…`, a version number). Undefined for other models.
 */
export function modelLimits(name: string): ModelLimits | undefined {
  const bare = name.includes('/') ? name.slice(name.lastIndexOf('/') + 1) : name; // `models/gemini-2.5-pro`
  if (MODEL_CATALOGUE[bare]) return MODEL_CATALOGUE[bare];
  let best: string | undefined;
  for (const known of Object.keys(MODEL_CATALOGUE)) {
    if (bare.startsWith(known) && RELEASE_SUFFIX.test(bare.slice(known.length)) && known.length > (best?.length ?? 0)) best = known;
  }
  return best === undefined ? undefined : MODEL_CATALOGUE[best];
}

/** Output reserve of a model the catalogue does not know, in tokens. */
export const DEFAULT_OUTPUT_RESERVE: number = DEFAULTS.model.outputReserve;

/**
 * The window and reserve a run uses: the settings when given, else the
 * catalogue's; a catalogued reserve is capped at a quarter of a window the
 * settings made smaller. Undefined when the model is unknown and no window is set.
 */
export function resolveModelLimits(m: {
  name: string;
  contextWindow?: number | undefined;
  outputReserve?: number | undefined;
}): { contextWindow: number; outputReserve: number } | undefined {
  const known = modelLimits(m.name);
  const contextWindow = m.contextWindow ?? known?.contextWindow;
  if (contextWindow === undefined) return undefined;
  const catalogued = known
    ? m.contextWindow === undefined
      ? known.outputLimit
      : Math.min(known.outputLimit, Math.floor(contextWindow / 4))
    : DEFAULT_OUTPUT_RESERVE;
  return { contextWindow, outputReserve: m.outputReserve ?? catalogued };
}

/** A model's settings, resolved (`model`, a profile's model, a fallback). */
export interface ResolvedModel {
  provider: 'openai' | 'anthropic' | 'google' | 'openai-compatible';
  name: string;
  baseURL?: string | undefined;
  apiKey?: string | undefined;
  /** The `openai` provider's API: `chat` (chat completions) or `responses`. Absent: `chat`. */
  api?: 'chat' | 'responses' | undefined;
  /** In tokens; 0 while `discoverWindow` (the runner fills it in at start, before it takes runs). */
  contextWindow: number;
  outputReserve: number;
  /** The window is neither configured nor catalogued: the runner asks the model's server at start (`runner/context-window.ts`). */
  discoverWindow?: true | undefined;
}

/**
 * Whether the runner can ask the server of a model on `provider` for its
 * window: an OpenAI-compatible server's `/models` (and Ollama's `/api/show`
 * behind it). OpenAI's own API names no window, nor do Anthropic's.
 */
export function canDiscoverWindow(m: { provider: ModelProvider; baseURL?: string | undefined }): boolean {
  return m.provider === 'openai-compatible' || (m.provider === 'openai' && m.baseURL !== undefined);
}

/**
 * `resolveModelLimits`, or for an unknown model whose window the runner can
 * discover, a window to be discovered (0 until then) with the reserve of an
 * unknown model. Undefined when neither applies.
 */
export function resolveOrDiscover(m: {
  provider: ModelProvider;
  name: string;
  baseURL?: string | undefined;
  contextWindow?: number | undefined;
  outputReserve?: number | undefined;
}): { contextWindow: number; outputReserve: number; discoverWindow?: true } | undefined {
  const limits = resolveModelLimits(m);
  if (limits || !canDiscoverWindow(m)) return limits;
  return { contextWindow: 0, outputReserve: m.outputReserve ?? DEFAULT_OUTPUT_RESERVE, discoverWindow: true };
}

/** Changes to a model's settings (a profile's `model`, an entry of `model.fallbacks`). */
export interface ModelChanges {
  provider?: ModelProvider | undefined;
  name?: string | undefined;
  baseURL?: string | undefined;
  apiKey?: string | undefined;
  api?: 'chat' | 'responses' | undefined;
  contextWindow?: number | undefined;
  outputReserve?: number | undefined;
}

/**
 * `base` with `changes`: a model of another name takes its limits from the
 * catalogue unless given; another provider inherits neither the base's
 * endpoint, key nor API. An unknown model without a window gets one to be
 * discovered where the runner can (`resolveOrDiscover`); undefined where it cannot.
 */
export function deriveModel(base: ResolvedModel, changes: ModelChanges): ResolvedModel | undefined {
  const provider = changes.provider ?? base.provider;
  const name = changes.name ?? base.name;
  const sameModel = provider === base.provider && name === base.name;
  const sameProvider = provider === base.provider;
  const baseURL = changes.baseURL ?? (sameProvider ? base.baseURL : undefined);
  const apiKey = changes.apiKey ?? (sameProvider ? base.apiKey : undefined);
  const api = changes.api ?? (sameProvider ? base.api : undefined);
  const limits = resolveOrDiscover({
    provider,
    name,
    baseURL,
    // A base window still to be discovered is no window to inherit.
    contextWindow: changes.contextWindow ?? (sameModel && !base.discoverWindow ? base.contextWindow : undefined),
    outputReserve: changes.outputReserve ?? (sameModel ? base.outputReserve : undefined),
  });
  if (!limits) return undefined;
  return { provider, name, ...limits, ...(baseURL !== undefined && { baseURL }), ...(apiKey !== undefined && { apiKey }), ...(api !== undefined && { api }) };
}

/** Why `m` cannot call its `api`, or undefined: the Responses API is OpenAI's own (`model.api`). */
export function apiProblem(m: { provider: ModelProvider; api?: ModelApi | undefined }): string | undefined {
  return m.api === 'responses' && m.provider !== 'openai' ? `the responses API is OpenAI's: it needs provider openai (it is ${m.provider})` : undefined;
}
