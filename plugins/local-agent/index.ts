/**
 * The default runner plugin: an agent on the Vercel AI SDK with a tool loop
 * that takes steering at every turn boundary.
 */

import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { LanguageModel, ToolSet, TranscriptionModel } from 'ai';
import { ConfigError, int, type SteeringMode } from 'steerbot/plugin';
import {
  createImageModel,
  createModel,
  createSpeechModel,
  createTranscriptionModel,
  DEFAULT_SYSTEM_PROMPT,
  DEFAULTS,
  defineRunnerPlugin,
  type ModelSettings,
  modelSetupNotice,
  offersTool,
  type RunContext,
  type RunnerPlugin,
} from 'steerbot/runner';
import { z } from 'zod';
import { askUserTools } from './ask-user.js';
import { ATTACHMENT_DEFAULTS, AttachmentParts, type AttachmentSettings } from './attachments.js';
import { MCP_CONTENT_RULES, WEB_CONTENT_RULES } from './external-content.js';
import { type ImageToolOptions, imageTools } from './generate-image.js';
import { type HttpFetchToolOptions, httpFetchTool } from './http-fetch.js';
import { DEFAULT_STREAM_IDLE_TIMEOUT_MS, runAgentLoop } from './loop.js';
import { SharedEstimates } from './loop-state.js';
import { memoryTools, withMemory } from './memory-tools.js';
import { NATIVE_SEARCH_RULES, NATIVE_SEARCH_TOOL, nativeSearchProblem, nativeSearchTool } from './native-search.js';
import { policyConversation } from './policy.js';
import { loadSystemPrompts } from './prompt.js';
import { scheduleTools } from './schedule-tools.js';
import { DEFAULT_SEND_FILE_MAX_BYTES, type SendFileToolOptions, sendFileTools } from './send-file.js';
import { checkSkillSelections, loadSkills, type Skill, skillsBlock, skillsFor, skillTools } from './skills.js';
import { subagentTools } from './subagent-tools.js';
import { Toolbox, type ToolboxOptions, toolSettingsShape } from './toolbox.js';
import { type AgentTool, currentTimeTool } from './tools.js';
import type { VoiceReplyOptions } from './voice-replies.js';
import { type WebSearchToolOptions, webSearchSchema, webSearchTool } from './web-search.js';

export type { Skill } from './skills.js';
export type { AgentTool } from './tools.js';

const bool = z.boolean({ error: 'expected true or false' });

const filePath = z.string().trim().min(1, { error: 'expected a file path' });

const prompt = z.string().trim().min(1, { error: 'expected a non-empty prompt' }).max(100_000, { error: 'expected at most 100 000 characters' });

/** One persona: the system prompt of a channel or a conversation. */
const personaSchema = z.strictObject({
  systemPrompt: prompt.optional().describe("The persona's system prompt."),
  systemPromptFile: filePath.optional().describe('Or a file holding it (read at start). One of the two is required.'),
  notes: bool.default(true).describe('Append the notes files (`notesFiles`) to this persona too. Default true.'),
});

/** Settings of the local agent (`agents.local-agent`). */
export const localAgentConfigSchema = z.strictObject({
  systemPrompt: prompt.optional().describe('System prompt. Default: a short helpful-assistant prompt.'),
  systemPromptFile: filePath
    .optional()
    .describe('A file holding the system prompt (resolved against the working directory, read at start). Not together with `systemPrompt`.'),
  notesFiles: z
    .array(filePath)
    .max(32, { error: 'expected at most 32 files' })
    .default([])
    .describe('Notes files (AGENTS.md-style) appended to the system prompt in this order, each as a bounded fragment; read at start. Default `[]`.'),
  notesFileMaxChars: int(200, 100_000).default(8000).describe('Most characters of one notes file; the rest is cut (the prompt says so). Default 8000.'),
  notesBudgetChars: int(200, 200_000)
    .default(16_000)
    .describe('Most characters of all notes together; files past the budget are left out (the prompt names them). Default 16 000.'),
  personas: z
    .record(z.string().trim().min(1, { error: 'expected a channel or conversation id' }), personaSchema)
    .default({})
    .describe('Deprecated: use `profiles.<name>.systemPrompt` (or `systemPromptFile`) bound to the chat or channel (translated at load).')
    .meta({ deprecated: true }),
  streaming: bool
    .default(DEFAULTS.agent.streaming)
    .describe(
      'Send the answer as it is written to channels that stream (their own `streaming` setting); other channels get whole messages either way, and their model calls are not streamed. Default true.',
    ),
  httpFetch: bool
    .default(DEFAULTS.agent.httpFetch)
    .describe('The built-in `http_fetch` tool (HTTP GET of a URL; it lets the model reach the network). Default false.'),
  search: webSearchSchema
    .optional()
    .describe(
      'The built-in `web_search` tool and its backend (SearXNG, Brave Search API or Tavily); results are framed as external content (docs/tools.md#web-search-and-reading). Default: unset (no search).',
    ),
  currentTime: bool.default(DEFAULTS.agent.currentTime).describe('The built-in `current_time` tool. Default true.'),
  askUser: bool
    .default(false)
    .describe(
      'The built-in `ask_user` tool: the agent asks a question with 2 to 5 options shown as buttons and waits for a click or a typed answer (docs/tools.md#asking-the-user). Default false.',
    ),
  voice: z
    .strictObject({
      model: z.string().trim().min(1).max(128).describe("The speech model on `model`'s provider (its OpenAI speech API), e.g. `gpt-4o-mini-tts`."),
      voice: z.string().trim().min(1).max(64).optional().describe("The provider's voice, e.g. `alloy`. Default: the provider's."),
      replies: z
        .enum(['off', 'always', 'when-spoken-to'], { error: 'expected off, always or when-spoken-to' })
        .default('off')
        .describe(
          'When answers are also spoken, for runs whose profile has no `voice`: `off`, `always`, or `when-spoken-to` (a message the run answers is a voice note). Default `off`.',
        ),
    })
    .optional()
    .describe(
      "Spoken replies: the answer read aloud with the AI SDK's speech generation and sent as a voice message after the text (docs/agent.md#spoken-replies). Default: unset (no speech).",
    ),
  images: z
    .strictObject({
      model: z.string().trim().min(1).max(128).describe("The image model on `model`'s provider (its OpenAI images API), e.g. `gpt-image-1`."),
      size: z
        .string()
        .regex(/^\d{2,5}x\d{2,5}$/, { error: 'expected <width>x<height>, e.g. 1024x1024' })
        .optional()
        .describe("Size asked for, e.g. `1024x1024`. Default: the provider's."),
    })
    .optional()
    .describe(
      'The built-in `generate_image` tool: draws a picture and sends it in the chat (docs/agent.md#sending-files). Needs `model.provider` openai or openai-compatible. Default: unset (no images).',
    ),
  sendFile: z
    .strictObject({
      workspace: filePath
        .optional()
        .describe(
          'The folder `path` is read in (resolved against the working directory); paths outside it, through symlinks included, are refused. Default: unset (no `path`).',
        ),
      urls: bool
        .default(false)
        .describe('Whether `url` may be given: fetched through the guarded fetch (public addresses, or those in `httpFetchAllow`). Default false.'),
      maxBytes: int(1024, 50 * 1024 * 1024)
        .default(DEFAULT_SEND_FILE_MAX_BYTES)
        .describe(
          'Largest file sent, in bytes; a channel with a lower limit gets a message saying the file could not be sent instead. Default 20 971 520 (20 MiB).',
        ),
    })
    .optional()
    .describe(
      'The built-in `send_file` tool: sends a file from the workspace or a URL natively in the chat (docs/agent.md#sending-files). Default: unset (no tool).',
    ),
  steeringMode: z
    .enum(['all', 'one'], { error: 'expected all or one' })
    .default(DEFAULTS.agent.steeringMode)
    .describe('Steering taken per turn boundary: `all` waiting messages or `one`. Default `all`.'),
  maxSteps: int(1, 1000).default(DEFAULTS.agent.maxSteps).describe('Most model steps per run invocation. Default 24.'),
  streamIdleTimeoutMs: z
    .number({ error: 'expected a number' })
    .int({ error: 'expected an integer' })
    .min(0, { error: 'expected an integer >= 0' })
    .max(3_600_000, { error: 'expected at most 3 600 000 (one hour)' })
    .default(DEFAULT_STREAM_IDLE_TIMEOUT_MS)
    .describe(
      'A model stream silent this long (waiting for the response included, tool execution not) is aborted and retried once; a second silence ends the run `failed` with reason `timeout` and tells the user. A call asked whole (nothing streamed: docs/agent.md#streamed-and-whole-answers) must answer within it. In ms; 0 turns it off. Default 120 000.',
    ),
  attachments: z
    .strictObject({
      maxBytes: z
        .number({ error: 'expected a number' })
        .int({ error: 'expected an integer' })
        .min(1024, { error: 'expected an integer >= 1024' })
        .max(100 * 1024 * 1024, { error: 'expected at most 104857600 (100 MiB)' })
        .default(ATTACHMENT_DEFAULTS.maxBytes)
        .describe('Largest attachment fetched for the model, in bytes. Default 10 485 760 (10 MiB).'),
      maxTotalBytes: z
        .number({ error: 'expected a number' })
        .int({ error: 'expected an integer' })
        .min(1024, { error: 'expected an integer >= 1024' })
        .max(1024 * 1024 * 1024, { error: 'expected at most 1073741824 (1 GiB)' })
        .optional()
        .describe(
          "Most bytes of files one prompt carries (its earlier steered messages' files included), and its downloads hold at once; a file past it gets the `policy`. Default: twice `maxBytes`.",
        ),
      accept: z
        .array(z.string().regex(/^[a-z]+\/(\*|[\w.+-]+)$/, { error: 'expected a media type like image/* or application/pdf' }))
        .default([...ATTACHMENT_DEFAULTS.accept])
        .describe('Media types the model accepts as image or file parts (`image/*`, `application/pdf`). Default `["image/*"]`.'),
      policy: z
        .enum(['omit', 'text', 'error'], { error: 'expected omit, text or error' })
        .default(ATTACHMENT_DEFAULTS.policy)
        .describe(
          'A file the model does not accept, too large, or not fetchable: `text` (a placeholder naming it), `omit` (left out) or `error` (the user is told the type is not supported). Default `text`.',
        ),
      maxAudioSeconds: int(1, 86_400)
        .default(ATTACHMENT_DEFAULTS.maxAudioSeconds)
        .describe(
          'Longest voice note or audio file transcribed (`transcriptionModel`), in seconds, as its packets play (counted before anything is sent, never as its container declares); a longer one, or one whose length cannot be read, gets the `policy`. Each transcription is charged to the budgets as 10 input tokens a second. Default 600.',
        ),
    })
    .prefault({})
    .describe('Attachments of the messages a run answers, fetched through their channel and sent as image / file parts.'),
  transcriptionModel: z
    .string()
    .trim()
    .min(1, { error: 'expected a model name' })
    .optional()
    .describe(
      'Speech-to-text model (`whisper-1`, `gpt-4o-mini-transcribe`) on the `model` provider (openai, or openai-compatible with that API): voice notes and audio files become text, transcribed once per file. Default: unset (a placeholder).',
    ),
  skills: z
    .array(filePath)
    .max(32, { error: 'expected at most 32 directories' })
    .default([])
    .describe(
      'Skills directories, each holding one folder per skill (Agent Skills format: a `SKILL.md` with `name` and `description` front matter, and files beside it); read at start. `profiles.<name>.skills` selects among them (docs/agent.md#skills). Default `[]`.',
    ),
  toolModules: z
    .array(z.string().trim().min(1, { error: 'expected a module path or package name' }))
    .default([])
    .describe(
      'Modules whose exports include tools (`AgentTool` objects: default export, `tool`, or `tools`), resolved against the working directory. Default `[]`.',
    ),
  // MCP servers, artifacts of large results, durable calls, http_fetch allow-list (docs/tools.md).
  ...toolSettingsShape,
});

/** The local agent's settings as written in a config file. */
export type LocalAgentSettings = z.input<typeof localAgentConfigSchema>;

/** Configuration of the local agent when it is created in code. */
export interface LocalAgentConfig {
  /** A ready model (tests, custom providers). Default: built from the run's model settings (config `model.*`). */
  model?: LanguageModel;
  /** Ready models a call fails over to, in order. Default: built from the run's `model.fallbacks`. */
  fallbackModels?: LanguageModel[];
  /** System prompt, or one per conversation. Default: a short helpful-assistant prompt. */
  system?: string | ((conversationId: string) => string);
  /** Extra tools. */
  tools?: AgentTool[];
  /**
   * Built-in tools: `currentTime` (default on), `httpFetch` and `webSearch` (default off: they reach the network), `askUser` (default off).
   * `webSearch: { backend: 'native' }` offers the model provider's own search tool instead (native-search.ts).
   */
  builtins?: {
    currentTime?: boolean;
    httpFetch?: boolean | HttpFetchToolOptions;
    webSearch?: WebSearchToolOptions | { backend: 'native' } | undefined;
    /** `ask_user`: questions with options as buttons, answered by a click or a message (ask-user.ts). Default false. */
    askUser?: boolean;
    /** The `send_file` tool (send-file.ts). Default: off. */
    sendFile?: SendFileToolOptions | undefined;
    /** The `generate_image` tool (generate-image.ts). Default: off. */
    images?: ImageToolOptions | undefined;
  };
  /** Steering taken per turn boundary. Default `all`. */
  steeringMode?: SteeringMode;
  /** Most model steps per invocation. Default 24. */
  maxSteps?: number;
  /** Provider retries before a run fails. Default 2. */
  maxRetries?: number;
  /** Stream deltas to channels that support it. Default false. */
  streaming?: boolean;
  /** A model stream silent this long is aborted and retried once, then the run fails with reason `timeout`, in ms. 0: never. Default 120 000. */
  streamIdleTimeoutMs?: number;
  /** Builds the model from the run's model settings when `model` is not given. Default: the runner's model factory. */
  createModel?: (settings: ModelSettings) => LanguageModel;
  /** Attachments as image / file parts (default: images up to 10 MiB; others as placeholders). */
  attachments?: AttachmentSettings;
  /** Spoken replies (voice-replies.ts). Default: none. */
  voice?: VoiceReplyOptions;
  /** Transcribes voice notes: a ready model, or built from the run's model settings. Default: none. */
  transcriptionModel?: TranscriptionModel | ((settings: ModelSettings) => TranscriptionModel);
  /** MCP servers, result bounds, idempotent tools (docs/tools.md). */
  toolbox?: ToolboxOptions;
  /** Skills (`loadSkills`), sorted by name; a run sees those its profile selects (`skills`), all by default. Default: none. */
  skills?: readonly Skill[];
}

/** Creates the local agent runner plugin. */
export function createLocalAgentPlugin(config: LocalAgentConfig = {}): RunnerPlugin {
  const tools: AgentTool[] = [];
  if (config.builtins?.currentTime ?? DEFAULTS.agent.currentTime) tools.push(currentTimeTool);
  const fetchOpt = config.builtins?.httpFetch;
  if (fetchOpt) tools.push(httpFetchTool(typeof fetchOpt === 'object' ? fetchOpt : {}));
  const search = config.builtins?.webSearch;
  if (search && search.backend !== 'native') tools.push(webSearchTool(search));
  const nativeSearch = search?.backend === 'native';
  tools.push(...(config.tools ?? []));
  // One model per distinct model setting (the base one and each profile's): bounded by the configuration.
  const models = new Map<string, LanguageModel>();
  // Made once per profile (its skills never change while the process runs); one entry per configured profile.
  const skillSets = new Map<string, SkillSet>();
  const toolbox = new Toolbox(config.toolbox);
  const askUser = config.builtins?.askUser === true;
  // The tools made per run, from what the run's context offers.
  const runTools = (ctx: RunContext) => [
    ...scheduleTools(ctx),
    ...memoryTools(ctx),
    ...subagentTools(ctx),
    ...sendFileTools(ctx, config.builtins?.sendFile),
    ...imageTools(ctx, config.builtins?.images),
    ...(askUser ? askUserTools(ctx, toolbox.policy) : []),
  ];
  const attachments = new AttachmentParts(config.attachments);
  // The loop's settings every run shares.
  const loopSettings = {
    steeringMode: config.steeringMode ?? DEFAULTS.agent.steeringMode,
    maxSteps: config.maxSteps ?? DEFAULTS.agent.maxSteps,
    maxRetries: config.maxRetries ?? DEFAULTS.agent.maxRetries,
    streaming: config.streaming ?? false,
    attachments,
    // System prompts and tool descriptions are the same run after run: estimated once.
    estimates: new SharedEstimates(),
    ...(config.voice && { voice: config.voice }),
    ...(config.streamIdleTimeoutMs !== undefined && { streamIdleTimeoutMs: config.streamIdleTimeoutMs }),
  };
  let transcriber: TranscriptionModel | undefined = typeof config.transcriptionModel === 'function' ? undefined : config.transcriptionModel;
  return {
    close: () => toolbox.close(),
    manifest: {
      name: 'local-agent',
      version: '0.1.0',
      capabilities: { steering: true, state: true },
      steeringMode: config.steeringMode ?? DEFAULTS.agent.steeringMode,
    },
    async run(ctx) {
      let model = config.model;
      try {
        model ??= modelFor(models, ctx.agent.model, config.createModel ?? createModel);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        // No model configured yet (a fresh `npm start`): one clear answer naming what to set, not a generic failure.
        ctx.logger.warn({ err }, 'no model configured; answering with the setup notice');
        return { outcome: 'failed', reason: 'model not configured', notice: modelSetupNotice(ctx.agent.model), final: true };
      }
      if (!transcriber && typeof config.transcriptionModel === 'function') {
        try {
          transcriber = config.transcriptionModel(ctx.agent.model);
        } catch (err) {
          if (!(err instanceof ConfigError)) throw err;
          ctx.logger.warn({ err }, 'no usable transcription model; voice notes stay placeholders');
        }
      }
      const skills = skillSetOf(skillSets, config.skills, ctx.agent.profile);
      const toolSet = await toolbox.toolSet(ctx, [...tools, ...skills.tools, ...runTools(ctx)]);
      const native = addNativeSearch(ctx, toolSet, toolbox, nativeSearch);
      const fallbacks = config.fallbackModels ?? fallbackModels(ctx, models, config.createModel ?? createModel);
      return runAgentLoop(ctx, {
        model,
        ...(fallbacks.length > 0 && { fallbacks }),
        tools: toolSet,
        system: await withMemory(
          ctx,
          withSkills(withContentRules(systemPrompt(ctx, config.system), toolSet, native, toolbox.offersFramedMcp(toolSet)), skills, toolSet),
        ),
        ...loopSettings,
        ...(transcriber && { transcriber }),
      });
    },
  };
}

/** The run's system prompt: its profile's, else the conversation's (personas; a subagent's parent's), else the default. */
function systemPrompt(ctx: RunContext, system: LocalAgentConfig['system']): string {
  if (ctx.agent.profile?.systemPrompt) return ctx.agent.profile.systemPrompt;
  return typeof system === 'function' ? system(policyConversation(ctx.run)) : (system ?? DEFAULT_SYSTEM_PROMPT);
}

/**
 * The prompt with the web-content rules once, when the run offers a tool that brings web content; the native
 * search's own rules when it offers that; the MCP-content rules once, when it offers a tool of an MCP server whose
 * results are framed (`mcp`).
 */
function withContentRules(system: string, tools: Record<string, unknown>, native: boolean, mcp: boolean): string {
  const framed = tools.http_fetch || (tools.web_search && !native);
  return [system, ...(framed ? [WEB_CONTENT_RULES] : []), ...(native ? [NATIVE_SEARCH_RULES] : []), ...(mcp ? [MCP_CONTENT_RULES] : [])].join('\n\n');
}

/**
 * Adds the provider's own search tool to the run's tools when it is
 * `configured` (`search.backend: native`), the run's model has one, and
 * its profile and policy offer `web_search` without approval (the provider
 * runs it: nobody could approve a call).
 * Returns whether it was added; a run whose model has none (a profile or
 * /model choice on another provider) goes without search, logged.
 */
function addNativeSearch(ctx: RunContext, toolSet: ToolSet, toolbox: Toolbox, configured: boolean): boolean {
  if (!configured) return false;
  const mode = toolbox.policy.mode(NATIVE_SEARCH_TOOL, policyConversation(ctx.run), 'allow', ctx.agent.profile?.toolPolicy);
  if (!offersTool(ctx.agent.profile?.tools, NATIVE_SEARCH_TOOL) || mode !== 'allow' || toolSet[NATIVE_SEARCH_TOOL]) return false;
  const native = nativeSearchTool(ctx.agent.model);
  if (!native) {
    ctx.logger.warn(
      { provider: ctx.agent.model.provider, api: ctx.agent.model.api, problem: nativeSearchProblem(ctx.agent.model) },
      "the run's model has no native search; going without",
    );
    return false;
  }
  toolSet[NATIVE_SEARCH_TOOL] = native;
  return true;
}

/** A profile's skills as runs use them: the `read_skill` tool over them and their prompt block. */
interface SkillSet {
  tools: AgentTool[];
  block: string;
}

/** The skill set of `profile`, made on its first run and kept (by profile name). */
function skillSetOf(
  sets: Map<string, SkillSet>,
  all: readonly Skill[] | undefined,
  profile: { name: string; skills?: readonly string[] | undefined } | undefined,
): SkillSet {
  const key = profile?.name ?? '';
  let set = sets.get(key);
  if (!set) {
    const skills = skillsFor(all, profile);
    set = { tools: skillTools(skills), block: skills.length > 0 ? skillsBlock(skills) : '' };
    sets.set(key, set);
  }
  return set;
}

/** The prompt with the run's skills, one line each, when it offers `read_skill` (a profile's `tools` may leave it out). */
function withSkills(system: string, skills: SkillSet, tools: Record<string, unknown>): string {
  return skills.block && tools.read_skill ? `${system}\n\n${skills.block}` : system;
}

/** The model for `settings`, built once per provider, API, endpoint and name. */
function modelFor(models: Map<string, LanguageModel>, settings: ModelSettings, build: (s: ModelSettings) => LanguageModel): LanguageModel {
  const key = `${settings.provider}|${settings.api ?? 'chat'}|${settings.baseURL ?? ''}|${settings.name}|${settings.apiKey ?? ''}`;
  let model = models.get(key);
  if (!model) models.set(key, (model = build(settings)));
  return model;
}

/** The run's fallback models (`model.fallbacks`); one that cannot be built is left out, logged. */
function fallbackModels(ctx: RunContext, models: Map<string, LanguageModel>, build: (s: ModelSettings) => LanguageModel): LanguageModel[] {
  return (ctx.agent.model.fallbacks ?? []).flatMap((settings) => {
    try {
      return [modelFor(models, settings, build)];
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      ctx.logger.warn({ err, model: settings.name }, 'a fallback model cannot be built; going on without it');
      return [];
    }
  });
}

const isTool = (v: unknown): v is AgentTool =>
  typeof v === 'object' && v !== null && typeof (v as AgentTool).name === 'string' && typeof (v as AgentTool).execute === 'function';

/** Loads the tools a module exports (default export, `tool`, or `tools`). */
async function loadToolModule(specifier: string, index: number): Promise<AgentTool[]> {
  const path = `agents.local-agent.toolModules.${index}`;
  const target = specifier.startsWith('.') || specifier.startsWith('/') ? pathToFileURL(resolve(specifier)).href : specifier;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(target)) as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError([{ path, message: `cannot load ${specifier}: ${(err as Error).message}` }]);
  }
  const found = [mod.default, mod.tool, ...(Array.isArray(mod.tools) ? mod.tools : [])].filter(isTool);
  if (found.length === 0)
    throw new ConfigError([
      { path, message: `${specifier} exports no tool (expected a default export, \`tool\` or \`tools\` with name, description, inputSchema, execute)` },
    ]);
  return found;
}

/** The local agent: a tool loop on the AI SDK, steering at every turn boundary. */
export default defineRunnerPlugin({
  id: 'local-agent',
  kind: 'runner',
  description: 'An agent on the Vercel AI SDK with tools, taking steering at every turn boundary.',
  configSchema: localAgentConfigSchema,
  env: [
    { env: 'STEERBOT_SYSTEM_PROMPT', path: 'systemPrompt', kind: 'string' },
    { env: 'STEERBOT_SYSTEM_PROMPT_FILE', path: 'systemPromptFile', kind: 'string' },
    { env: 'STEERBOT_AGENT_STREAMING', path: 'streaming', kind: 'bool' },
    { env: 'STEERBOT_AGENT_HTTP_FETCH', path: 'httpFetch', kind: 'bool' },
    { env: 'STEERBOT_AGENT_SEARCH_BACKEND', path: 'search.backend', kind: 'string' },
    { env: 'STEERBOT_AGENT_SEARCH_URL', path: 'search.baseUrl', kind: 'string' },
    { env: 'STEERBOT_AGENT_SEARCH_API_KEY', path: 'search.apiKey', kind: 'string', secret: true },
    { env: 'STEERBOT_AGENT_SEARCH_MAX_RESULTS', path: 'search.maxResults', kind: 'int' },
    { env: 'STEERBOT_AGENT_CURRENT_TIME', path: 'currentTime', kind: 'bool' },
    { env: 'STEERBOT_AGENT_ASK_USER', path: 'askUser', kind: 'bool' },
    { env: 'STEERBOT_AGENT_STEERING_MODE', path: 'steeringMode', kind: 'string' },
    { env: 'STEERBOT_AGENT_MAX_STEPS', path: 'maxSteps', kind: 'int' },
    { env: 'STEERBOT_AGENT_STREAM_IDLE_TIMEOUT_MS', path: 'streamIdleTimeoutMs', kind: 'int' },
    { env: 'STEERBOT_TRANSCRIPTION_MODEL', path: 'transcriptionModel', kind: 'string' },
    { env: 'STEERBOT_AGENT_SKILLS', path: 'skills', kind: 'list' },
  ],
  async create(settings, deps) {
    const [tools, prompts, skills] = await Promise.all([
      Promise.all(settings.toolModules.map(loadToolModule)).then((t) => t.flat()),
      loadSystemPrompts(settings, DEFAULT_SYSTEM_PROMPT),
      loadSkills(settings.skills),
    ]);
    checkSkillSelections(skills, deps.profiles ?? {});
    const searchProblem = settings.search?.backend === 'native' ? nativeSearchProblem(deps.model) : undefined;
    if (searchProblem) throw new ConfigError([{ path: 'agents.local-agent.search.backend', message: searchProblem }]);
    return createLocalAgentPlugin({
      system: (conversationId) => prompts.for(conversationId),
      streaming: settings.streaming,
      builtins: {
        currentTime: settings.currentTime,
        askUser: settings.askUser,
        httpFetch: settings.httpFetch && { allow: settings.httpFetchAllow ?? [] },
        webSearch: settings.search,
        sendFile: settings.sendFile && {
          ...settings.sendFile,
          ...(settings.sendFile.workspace !== undefined && { workspace: resolve(settings.sendFile.workspace) }),
          allow: settings.httpFetchAllow ?? [],
        },
        images: settings.images && {
          model: createImageModel(deps.model, settings.images.model, 'agents.local-agent.images.model'),
          size: settings.images.size as `${number}x${number}` | undefined,
        },
      },
      steeringMode: settings.steeringMode,
      maxSteps: settings.maxSteps,
      streamIdleTimeoutMs: settings.streamIdleTimeoutMs,
      attachments: settings.attachments,
      ...(settings.voice && {
        voice: {
          model: createSpeechModel(deps.model, settings.voice.model, 'agents.local-agent.voice.model'),
          voice: settings.voice.voice,
          replies: settings.voice.replies,
        },
      }),
      ...(settings.transcriptionModel !== undefined && { transcriptionModel: (s: ModelSettings) => createTranscriptionModel(s, settings.transcriptionModel!) }),
      tools,
      skills,
      createModel: (s) => deps.createModel(s),
      toolbox: {
        logger: deps.logger.child({ part: 'tools' }),
        ...(settings.mcpServers && { mcpServers: settings.mcpServers }),
        ...(settings.toolResultMaxChars !== undefined && { maxResultChars: settings.toolResultMaxChars }),
        ...(settings.artifactTtlSeconds !== undefined && { artifactTtlSeconds: settings.artifactTtlSeconds }),
        ...(settings.idempotentTools && { idempotentTools: settings.idempotentTools }),
        ...(settings.toolPolicy && { policy: settings.toolPolicy }),
      },
    });
  },
});
