/**
 * A step's tool calls, run by the loop instead of by the AI SDK: the model is
 * offered the tools without `execute`, so its step ends with the calls; the
 * loop records them (`record.toolCalls`) before any runs, then runs them here.
 * An attempt taking a run over finishes a step from its recorded calls the
 * same way, so the model never decides a step twice (a rephrased call would
 * run a side effect again).
 */
import type { ModelMessage, ToolModelMessage, ToolSet } from 'ai';
import { ToolFailure, toolErrorEnvelope } from './tool-errors.js';

/** A tool call of a step that has no result yet. */
interface OpenCall {
  toolCallId: string;
  toolName: string;
  input: unknown;
}

type ToolResultPart = Extract<ToolModelMessage['content'][number], { type: 'tool-result' }>;

/** `tools` as the model is offered them: the same definitions without `execute` (the loop runs the calls). */
export function declaredTools(tools: ToolSet): ToolSet {
  const out: ToolSet = {};
  for (const [name, t] of Object.entries(tools)) out[name] = { ...t, execute: undefined } as ToolSet[string];
  return out;
}

/**
 * The tool calls in `messages` (a step's response) that no result in them
 * answers, in call order: the SDK answers a call it could not parse itself,
 * and a provider runs its own tools.
 */
export function openToolCalls(messages: readonly ModelMessage[]): OpenCall[] {
  const calls: OpenCall[] = [];
  const answered = new Set<string>();
  for (const m of messages) {
    if (typeof m.content === 'string') continue;
    for (const p of m.content) {
      if (p.type === 'tool-call' && p.providerExecuted !== true) calls.push({ toolCallId: p.toolCallId, toolName: p.toolName, input: p.input });
      else if (p.type === 'tool-result') answered.add(p.toolCallId);
    }
  }
  return calls.filter((c) => !answered.has(c.toolCallId));
}

/**
 * Runs the open calls of a step concurrently through their tools' `execute`
 * (which never throws in the local agent's toolbox: failures are results) and
 * returns the step's messages with their results, in call order, in the tool
 * message that ends the step. `history`: the prompt the step answered.
 */
export async function runToolCalls(
  tools: ToolSet,
  step: readonly ModelMessage[],
  history: readonly ModelMessage[],
  signal: AbortSignal,
): Promise<ModelMessage[]> {
  const open = openToolCalls(step);
  if (open.length === 0) return [...step];
  const results = await Promise.all(
    open.map(async (c): Promise<ToolResultPart> => {
      const execute = tools[c.toolName]?.execute as
        | ((input: unknown, opts: { toolCallId: string; messages: ModelMessage[]; abortSignal: AbortSignal }) => Promise<unknown>)
        | undefined;
      // A tool gone since the call was made (an MCP server down after a takeover): the model hears so.
      const output = execute
        ? await execute(c.input, { toolCallId: c.toolCallId, messages: [...history], abortSignal: signal })
        : toolErrorEnvelope(c.toolName, new ToolFailure('unavailable', `the tool ${c.toolName} is not available now; the call was not run`));
      return { type: 'tool-result', toolCallId: c.toolCallId, toolName: c.toolName, output: modelOutput(output) };
    }),
  );
  const last = step.at(-1);
  if (last?.role === 'tool') return [...step.slice(0, -1), { ...last, content: [...last.content, ...results] }];
  return [...step, { role: 'tool', content: results }];
}

/** A tool's value as the model gets it (as the AI SDK renders a tool without `toModelOutput`). */
function modelOutput(value: unknown): ToolResultPart['output'] {
  if (typeof value === 'string') return { type: 'text', value };
  return { type: 'json', value: JSON.parse(JSON.stringify(value ?? null)) };
}
