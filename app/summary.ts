/**
 * What the configuration looks like to a person: a copy with every secret
 * replaced by `[set]` (for `check-config` and the start line), and the short
 * "what started, what to do next" text `npm start` prints once.
 */
import { MODEL_PROVIDER_KEY_ENV } from '../src/config/defaults.js';
import { isDeclaredSecret, MIN_SCRUBBED_SECRET_CHARS } from '../src/config/secrets.js';
import { redactSecrets } from '../src/errors.js';
import { isSecretKey, SECRET_MAP_KEYS } from '../src/logger.js';
import { type SteerbotConfig, secretSettingsOf } from './config.js';

// Settings declared secret (by their path, and any value declared secret), the same keys `secretValues` scrubs
// from log lines, and the maps whose every value is a secret (an MCP server's `env` and `headers`): what is
// hidden in logs is hidden here.
function redactValue(key: string, value: unknown, path: string, declared: ReadonlySet<string>): unknown {
  if (typeof value === 'string' && (declared.has(path) || isSecretKey(key) || (value.length >= MIN_SCRUBBED_SECRET_CHARS && isDeclaredSecret(value))))
    return '[set]';
  if (SECRET_MAP_KEYS.has(key) && typeof value === 'object' && value !== null && !Array.isArray(value)) {
    return Object.fromEntries(Object.keys(value).map((k) => [k, '[set]']));
  }
  if (typeof value === 'string') return key === 'url' || key.endsWith('Url') || key.endsWith('URL') ? redactSecrets(value) : value;
  if (Array.isArray(value)) return value.map((v, i) => redactValue('', v, `${path}.${i}`, declared));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactValue(k, v, path === '' ? k : `${path}.${k}`, declared)]));
  }
  return value;
}

/** A copy of the configuration safe to print or log: secrets (by name and by declaration) as `[set]`, credentials in URLs removed. */
export function redactConfig(config: SteerbotConfig): Record<string, unknown> {
  return redactValue('', config, '', new Set(secretSettingsOf(config))) as Record<string, unknown>;
}

/** Ids of the configured channel instances, e.g. `['telegram', 'webhook:crm']`. */
export function channelIds(config: SteerbotConfig): string[] {
  return Object.entries(config.channels).flatMap(([id, section]) => {
    if (section === undefined || (section as { enabled?: unknown }).enabled === false) return [];
    if (id === 'webhooks') return Object.keys(section as object).map((name) => `webhook:${name}`);
    return [id];
  });
}

/** What a process prints once it started. */
export interface StartedSummary {
  /** Where the HTTP server listens, when the host runs. */
  address: string | undefined;
  /** Channel ids that started. */
  channels: string[];
  /** The runner plugin, when the runner runs here. */
  runner: string | undefined;
}

/** The lines `npm start` prints: what runs, and what to do next. */
export function nextSteps(config: SteerbotConfig, started: StartedSummary): string[] {
  const lines = ['steerbot is running'];
  if (started.address) lines.push(`  http:     ${started.address} (health: ${started.address}/healthz)`);
  lines.push(`  channels: ${started.channels.length > 0 ? started.channels.join(', ') : 'none'}`);
  if (started.runner) lines.push(`  runner:   ${started.runner}`);
  const keyVar = MODEL_PROVIDER_KEY_ENV[config.model.provider];
  const modelReady = config.model.provider === 'openai-compatible' ? config.model.baseURL !== undefined : config.model.apiKey !== undefined;
  if (started.runner === 'local-agent') {
    lines.push(
      modelReady
        ? `  model:    ${config.model.provider} ${config.model.name}`
        : config.model.provider === 'openai-compatible'
          ? '  model:    not configured: set OPENAI_BASE_URL (e.g. http://localhost:11434/v1 for Ollama) and STEERBOT_MODEL'
          : `  model:    not configured: set ${keyVar} (provider ${config.model.provider}; STEERBOT_MODEL_PROVIDER picks another)`,
    );
  }
  if (started.address) lines.push(...pageLines(config, started.address, started.channels.includes('web')));
  if (started.channels.every((c) => c === 'web') && started.address) {
    const first = started.channels.includes('web') ? 'next: chat on the page above; for a platform, set' : 'next: set';
    lines.push(`${first} TELEGRAM_BOT_TOKEN (from @BotFather), DISCORD_BOT_TOKEN or SLACK_BOT_TOKEN and start again,`);
    lines.push('      or add a webhook channel to a config file (--config steerbot.json); see docs/channels.md');
  }
  return lines;
}

/** The address a person opens: a wildcard bind (`0.0.0.0`, `::`) is reached at 127.0.0.1 from this machine. */
export function browserAddress(address: string): string {
  return address.replace('://0.0.0.0:', '://127.0.0.1:').replace('://[::]:', '://127.0.0.1:');
}

/** Whether the web chat is served private to the operator (not `channels.web.public`). */
const chatIsPrivate = (config: SteerbotConfig): boolean => (config.channels.web as { public?: unknown } | undefined)?.public !== true;

/** Who may open the console, or the chat when it is private (never the token itself: these lines may be logged). */
function accessNote(config: SteerbotConfig, chatToken: boolean): string {
  const login =
    config.host.console.token === undefined ? 'log in with the link printed at start; it changes at every start' : 'open it once with ?token=<token>';
  const more = [chatToken ? 'or the chat token' : '', config.host.console.allowLoopback ? 'or from this machine (console.allowLoopback)' : ''].filter(Boolean);
  return [login, ...more].join(', ');
}

/** The chat page and the operator console: where they are and who may open them. */
function pageLines(config: SteerbotConfig, address: string, chat: boolean): string[] {
  const at = browserAddress(address);
  const lines: string[] = [];
  if (chat) {
    const web = config.channels.web as { token?: string } | undefined;
    const note = chatIsPrivate(config) ? `private: ${accessNote(config, web?.token !== undefined)}` : 'public: the access section decides who may talk';
    lines.push(`  chat:     ${at}/ (${note})`);
  }
  if (config.host.console.enabled) lines.push(`  console:  ${at}/console (${accessNote(config, false)})`);
  return lines;
}

/**
 * The one-time login link(s) a start prints when no console token is configured: the generated secret in
 * the URL of the console and, when the web chat is private, of the chat. Printed straight to the terminal
 * (`startApp`'s `printLogin`), never logged. Empty when no page is served.
 */
export function loginLines(config: SteerbotConfig, address: string, secret: string, chat: boolean): string[] {
  const at = browserAddress(address);
  const token = encodeURIComponent(secret);
  const links = [
    ...(config.host.console.enabled ? [`  console: ${at}/console?token=${token}`] : []),
    ...(chat && chatIsPrivate(config) ? [`  chat:    ${at}/?token=${token}`] : []),
  ];
  if (links.length === 0) return [];
  return ['steerbot: log in with this link (it holds a secret made at this start; set STEERBOT_CONSOLE_TOKEN for a lasting one):', ...links];
}
