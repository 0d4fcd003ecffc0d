/**
 * The default runner plugin: an agent on the Vercel AI SDK with a tool loop
 * that takes steering at every turn boundary.
 */
import type { LanguageModel } from 'ai';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { SteeringMode } from '../../src/protocol/types.js';
import { runAgentLoop } from './loop.js';
import { modelFromSettings } from './model.js';
import { currentTimeTool, httpFetchTool, toToolSet, type AgentTool, type HttpFetchToolOptions } from './tools.js';

export type { AgentTool } from './tools.js';

/** Configuration of the local agent. */
export interface LocalAgentConfig {
  /** A ready model (tests, custom providers). Default: built from the run's model settings (config `model.*`). */
  model?: LanguageModel;
  /** System prompt. Default: a short helpful-assistant prompt. */
  system?: string;
  /** Extra tools. */
  tools?: AgentTool[];
  /** Built-in tools: `currentTime` (default on), `httpFetch` (default off: it reaches the network). */
  builtins?: { currentTime?: boolean; httpFetch?: boolean | HttpFetchToolOptions };
  /** Steering taken per turn boundary. Default `all`. */
  steeringMode?: SteeringMode;
  /** Most model steps per invocation. Default 24. */
  maxSteps?: number;
  /** Provider retries before a run fails. Default 2. */
  maxRetries?: number;
  /** Stream deltas to channels that support it. Default false. */
  streaming?: boolean;
  /** `fetch` used by the provider (tests, proxies). */
  fetch?: typeof fetch;
}

export const DEFAULT_SYSTEM_PROMPT =
  'You are a helpful assistant in a chat. Users may send new messages while you work; when one arrives, take it into account and adjust course.';

/** Creates the local agent runner plugin. */
export function createLocalAgentPlugin(config: LocalAgentConfig = {}): RunnerPlugin {
  const tools: AgentTool[] = [];
  if (config.builtins?.currentTime ?? true) tools.push(currentTimeTool);
  const fetchOpt = config.builtins?.httpFetch;
  if (fetchOpt) tools.push(httpFetchTool(typeof fetchOpt === 'object' ? fetchOpt : {}));
  tools.push(...(config.tools ?? []));
  let model: LanguageModel | undefined = config.model;
  return {
    manifest: {
      name: 'local-agent',
      version: '0.1.0',
      capabilities: { steering: true, state: true, streaming: config.streaming ?? false },
    },
    async run(ctx) {
      model ??= await modelFromSettings(ctx.model, config.fetch);
      const toolSet = toToolSet(tools, (name, err) => ctx.logger.warn({ tool: name, err }, 'tool failed'));
      return runAgentLoop(ctx, {
        model,
        tools: toolSet,
        system: config.system ?? DEFAULT_SYSTEM_PROMPT,
        steeringMode: config.steeringMode ?? 'all',
        maxSteps: config.maxSteps ?? 24,
        maxRetries: config.maxRetries ?? 2,
        streaming: config.streaming ?? false,
      });
    },
  };
}
