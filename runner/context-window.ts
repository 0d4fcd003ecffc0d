/**
 * Context windows discovered at runner start. A model the catalogue does not
 * know and whose window is not configured (`discoverWindow`) is looked up on
 * its own server, once per start, before the runner takes runs:
 * - an OpenAI-compatible server's `GET {baseURL}/models`, the entry of the
 *   model's id: `context_length` (OpenRouter), `max_model_len`
 *   (vLLM), `context_window`, `max_context_length` (LM Studio's `/api/v0`);
 * - when that names no length, Ollama's `POST {origin}/api/show`: `num_ctx`
 *   in its `parameters` (the window the server runs the model with), else
 *   `model_info["<arch>.context_length"]` (the model's own).
 * Each request has a short timeout; when nothing answers, the start fails
 * with one ConfigError naming each model, what was asked and the setting.
 */
import type { Logger } from 'pino';
import type { CoreConfig } from '../src/config/load.js';
import { deriveModel, type ResolvedModel } from '../src/config/model-catalogue.js';
import { ConfigError, type ConfigIssue, redactSecrets } from '../src/errors.js';

/** Time limit of one discovery request, in ms. */
const DISCOVERY_TIMEOUT_MS = 5000;

/** Fields of a `/models` entry that carry the window, most specific first. */
const WINDOW_FIELDS = ['context_length', 'max_model_len', 'context_window', 'max_context_length'] as const;

/** Options of `discoverContextWindows`. */
export interface DiscoveryOptions {
  /** `fetch` for the requests (proxies, tests). Default: the global `fetch`. */
  fetch?: typeof fetch;
  /** Time limit of one request, in ms. Default 5000. */
  timeoutMs?: number;
  /** Where each discovered window is logged (never a key). */
  logger?: Pick<Logger, 'info'>;
}

/** A model whose window is to be discovered, and the settings path it was configured at (`model`, `model.fallbacks.0`, `profiles.<name>.model`). */
export interface PendingWindow {
  path: string;
  model: ResolvedModel;
}

type ModelConfig = Pick<CoreConfig, 'model' | 'profiles'> & Partial<Pick<CoreConfig, 'models'>>;

/** The models of `config` whose window is discovered at runner start: `model`, its fallbacks, the profiles' models, the `/model` choices. */
export function pendingWindows(config: ModelConfig): PendingWindow[] {
  const { fallbacks, ...base } = config.model;
  const out: PendingWindow[] = [];
  if (base.discoverWindow) out.push({ path: 'model', model: base });
  (fallbacks ?? []).forEach((f, i) => {
    if (f.discoverWindow) out.push({ path: `model.fallbacks.${i}`, model: f });
  });
  for (const [name, p] of Object.entries(config.profiles)) {
    const model = p.model && deriveModel(base, p.model);
    if (model?.discoverWindow) out.push({ path: `profiles.${name}.model`, model });
  }
  for (const [name, m] of Object.entries(config.models ?? {})) {
    const model = deriveModel(base, m);
    if (model?.discoverWindow) out.push({ path: `models.${name}`, model });
  }
  return out;
}

/** What asking one model's server found: the window, or what was tried. */
type Discovery = { contextWindow: number; from: string } | { tried: string[] };

/**
 * `config` with every window still to be discovered filled in from the
 * models' servers (the same config when none is); a profile's model gets
 * it as its `contextWindow`. Checks what the config check could not: the
 * reserve fits the window, each fallback has at least the model's window.
 * @throws ConfigError naming every model whose window no server gave, and every check that failed.
 */
export async function discoverContextWindows<C extends ModelConfig>(config: C, opts: DiscoveryOptions = {}): Promise<C> {
  const pending = pendingWindows(config);
  if (pending.length === 0) return config;
  const ask = askOnce(opts);
  const found = await Promise.all(pending.map((p) => ask(p.model)));
  const issues: ConfigIssue[] = [];
  const windows = new Map<string, number>();
  pending.forEach((p, i) => {
    const d = found[i]!;
    if ('tried' in d) issues.push({ path: `${p.path}.contextWindow`, message: failure(p, d.tried) });
    else windows.set(p.path, d.contextWindow);
  });
  if (issues.length > 0) throw new ConfigError(issues);
  const filled = <M extends ResolvedModel>(path: string, m: M): M => {
    const contextWindow = windows.get(path);
    if (contextWindow === undefined) return m;
    const { discoverWindow: _discovered, ...known } = m;
    return { ...known, contextWindow } as M;
  };
  const { fallbacks, ...base } = config.model;
  const model = { ...filled('model', base), ...(fallbacks && { fallbacks: fallbacks.map((f, i) => filled(`model.fallbacks.${i}`, f)) }) };
  const profiles = Object.fromEntries(
    Object.entries(config.profiles).map(([name, p]) => {
      const contextWindow = windows.get(`profiles.${name}.model`);
      return [name, contextWindow === undefined ? p : { ...p, model: { ...p.model, contextWindow } }];
    }),
  );
  const models =
    config.models &&
    Object.fromEntries(
      Object.entries(config.models).map(([name, m]) => {
        const contextWindow = windows.get(`models.${name}`);
        return [name, contextWindow === undefined ? m : { ...m, contextWindow }];
      }),
    );
  issues.push(...limitProblems(model, pending, windows));
  if (issues.length > 0) throw new ConfigError(issues);
  return { ...config, model, profiles, ...(models && { models }) };
}

/** What the config check left to the runner: reserves below the discovered windows, fallbacks at least as wide as the model. */
function limitProblems(model: CoreConfig['model'], pending: readonly PendingWindow[], windows: ReadonlyMap<string, number>): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  for (const { path, model: m } of pending) {
    const contextWindow = windows.get(path)!;
    if (m.outputReserve >= contextWindow) {
      issues.push({ path: `${path}.outputReserve`, message: `must be less than the discovered context window of "${m.name}" (${contextWindow})` });
    }
  }
  model.fallbacks?.forEach((f, i) => {
    if (f.contextWindow < model.contextWindow && (windows.has('model') || windows.has(`model.fallbacks.${i}`))) {
      issues.push({
        path: `model.fallbacks.${i}.contextWindow`,
        message: `a fallback needs at least the context window of model (${model.contextWindow}); "${f.name}" has ${f.contextWindow}: a prompt that fits the model must fit it`,
      });
    }
  });
  return issues;
}

/** The one error line of a model no server gave a window for. */
function failure(p: PendingWindow, tried: readonly string[]): string {
  const setting = p.path === 'model' ? 'STEERBOT_MODEL_CONTEXT_WINDOW or model.contextWindow' : `${p.path}.contextWindow`;
  return `unknown model "${p.model.name}": its context window could not be discovered (${tried.join('; ')}): set it in tokens (${setting})`;
}

/** Asks a model's server at most once per start: models that share provider, endpoint, name and key share the answer. */
function askOnce(opts: DiscoveryOptions): (m: ResolvedModel) => Promise<Discovery> {
  const asked = new Map<string, Promise<Discovery>>();
  return (m) => {
    const key = JSON.stringify([m.provider, m.baseURL, m.name, m.apiKey]);
    let answer = asked.get(key);
    if (!answer) {
      answer = discover(m, opts);
      asked.set(key, answer);
    }
    return answer;
  };
}

/** The window of one model: its `/models` entry, else Ollama's `/api/show`. */
async function discover(m: ResolvedModel, opts: DiscoveryOptions): Promise<Discovery> {
  // Checked by the config: only a model on an OpenAI-compatible endpoint, which has a base URL, is to be discovered.
  const base = (m.baseURL ?? '').replace(/\/+$/, '');
  const modelsUrl = `${base}/models`;
  const listed = await request(modelsUrl, m, opts);
  const fromList = 'body' in listed ? listedWindow(listed.body, m.name) : undefined;
  if (fromList) return discovered(m, fromList, `GET ${shown(modelsUrl)}`, opts);
  const showUrl = `${new URL(base).origin}/api/show`;
  const described = await request(showUrl, m, opts, { model: m.name });
  const fromShow = 'body' in described ? ollamaWindow(described.body) : undefined;
  if (fromShow) return discovered(m, fromShow, `POST ${shown(showUrl)}`, opts);
  return {
    tried: [
      `GET ${shown(modelsUrl)}: ${'body' in listed ? `no context length for "${m.name}"` : listed.problem}`,
      `POST ${shown(showUrl)}: ${'body' in described ? 'no context length' : described.problem}`,
    ],
  };
}

function discovered(m: ResolvedModel, contextWindow: number, from: string, opts: DiscoveryOptions): Discovery {
  opts.logger?.info({ model: m.name, contextWindow, from }, 'context window discovered');
  return { contextWindow, from };
}

/** One JSON request with the model's key and the time limit: the body, or what went wrong (never the key). */
async function request(url: string, m: ResolvedModel, opts: DiscoveryOptions, body?: unknown): Promise<{ body: unknown } | { problem: string }> {
  const timeoutMs = opts.timeoutMs ?? DISCOVERY_TIMEOUT_MS;
  try {
    const res = await (opts.fetch ?? fetch)(url, {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        accept: 'application/json',
        ...(body !== undefined && { 'content-type': 'application/json' }),
        ...(m.apiKey && { authorization: `Bearer ${m.apiKey}` }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!res.ok) {
      await res.body?.cancel();
      return { problem: `HTTP ${res.status}` };
    }
    return { body: await res.json() };
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') return { problem: `no answer within ${timeoutMs} ms` };
    if (err instanceof SyntaxError) return { problem: 'not JSON' };
    const cause = (err as { cause?: { code?: unknown } }).cause;
    // Node names the URL in some errors (one with credentials cannot be fetched): never the password or the key.
    return { problem: typeof cause?.code === 'string' ? cause.code : redactSecrets((err as Error).message, m.apiKey ?? '') };
  }
}

/** The window of `name` in a `/models` answer (`{ data: [...] }`, or a bare list), if it names one. */
function listedWindow(body: unknown, name: string): number | undefined {
  const list = Array.isArray(body) ? body : isRecord(body) && Array.isArray(body.data) ? body.data : [];
  const entry = list.find((e): e is Record<string, unknown> => isRecord(e) && e.id === name);
  if (!entry) return undefined;
  for (const field of WINDOW_FIELDS) {
    const n = tokens(entry[field]);
    if (n !== undefined) return n;
  }
  return undefined;
}

/** The window in an Ollama `/api/show` answer: `num_ctx` of its parameters, else the architecture's `context_length`. */
function ollamaWindow(body: unknown): number | undefined {
  if (!isRecord(body)) return undefined;
  const numCtx = typeof body.parameters === 'string' ? /^\s*num_ctx\s+(\d+)\s*$/m.exec(body.parameters)?.[1] : undefined;
  if (numCtx !== undefined) return tokens(Number(numCtx));
  const info = isRecord(body.model_info) ? body.model_info : {};
  const arch = info['general.architecture'];
  if (typeof arch === 'string' && tokens(info[`${arch}.context_length`]) !== undefined) return tokens(info[`${arch}.context_length`]);
  const key = Object.keys(info).find((k) => k.endsWith('.context_length'));
  return key === undefined ? undefined : tokens(info[key]);
}

/** A positive whole number of tokens, else undefined. */
function tokens(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A URL as an error may show it: without credentials or query. */
function shown(url: string): string {
  const u = new URL(url);
  u.username = '';
  u.password = '';
  u.search = '';
  return u.toString();
}
