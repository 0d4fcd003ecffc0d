/**
 * The agent's subagent tools (`subagents.enabled`): `delegate` hands tasks to
 * child runs that work in parallel, each in a context of its own, and waits
 * for their answers (or goes on, `wait: false`); `steer_subagent` sends a
 * running child a message, taken at its next turn boundary; `subagent_results`
 * waits for (or looks at) children started earlier. Offered when the run has
 * `ctx.features.subagents`; the tool policy applies to them by name. All three are
 * idempotent: a takeover re-running a call finds the same children.
 */
import { InvalidInputError, z } from 'steerbot/plugin';
import { type AgentTool, type RunContext, type RunSubagents, ToolFailure } from 'steerbot/runner';

const delegateInput = z.object({
  tasks: z
    .array(z.string().trim().min(1).max(8000))
    .min(1)
    .max(16)
    .describe('One task per subagent, each written so that someone without this conversation can do it: say what to find or do and what to answer with.'),
  wait: z.boolean().optional().describe('Wait for the answers (default true); false: go on and read them later with subagent_results.'),
});
const steerInput = z.object({
  id: z.string().min(1).max(256).describe('The subagent id delegate returned.'),
  message: z.string().trim().min(1).max(4000).describe('What to tell it; it reads it at its next step.'),
});
const resultsInput = z.object({
  ids: z.array(z.string().min(1).max(256)).min(1).max(16).describe('Subagent ids delegate returned.'),
  wait: z.boolean().optional().describe('Wait for the running ones (default true); false: report where each stands now.'),
});

/** Extra time a call gets past its wait: the wait ends itself and reports the children still running. */
const TIMEOUT_MARGIN_MS = 30_000;

/** The subagent tools of one run; none when the run has no `subagents`. */
export function subagentTools(ctx: RunContext): AgentTool[] {
  const subagents = ctx.features.subagents;
  if (!subagents) return [];
  const timeoutMs = subagents.timeoutMs + TIMEOUT_MARGIN_MS;
  const delegate: AgentTool<z.infer<typeof delegateInput>> = {
    name: 'delegate',
    description:
      'Hands tasks to subagents that work in parallel, each with a fresh context and your tools, and returns their answers (ids too, for steer_subagent and subagent_results). Use it for independent pieces of work.',
    inputSchema: delegateInput,
    idempotent: true,
    timeoutMs,
    async execute({ tasks, wait }, { signal, call }) {
      const ids = await refusingBadInput(() => subagents.start(call?.idempotencyKey ?? call?.callId ?? 'delegate', tasks));
      if (wait === false) return { started: ids, note: 'They work on while you go on; read their answers with subagent_results.' };
      return { results: await waitFor(subagents, ids, signal) };
    },
  };
  const steer: AgentTool<z.infer<typeof steerInput>> = {
    name: 'steer_subagent',
    description: 'Sends a running subagent a message (a correction, more detail); it takes it at its next step.',
    inputSchema: steerInput,
    idempotent: true,
    timeoutMs: 10_000,
    async execute({ id, message }, { call }) {
      if (!(await subagents.steer(id, message, call?.idempotencyKey ?? call?.callId ?? id)))
        throw new ToolFailure('not_found', `${id} is not a subagent of this run`);
      return { sent: true };
    },
  };
  const results: AgentTool<z.infer<typeof resultsInput>> = {
    name: 'subagent_results',
    description: 'Returns the answers of subagents started earlier, waiting for the running ones unless wait is false.',
    inputSchema: resultsInput,
    idempotent: true,
    timeoutMs,
    async execute({ ids, wait }, { signal }) {
      return { results: wait === false ? await subagents.wait(ids, { timeoutMs: 0, signal }) : await waitFor(subagents, ids, signal) };
    },
  };
  return [delegate, steer, results];
}

function waitFor(subagents: RunSubagents, ids: readonly string[], signal: AbortSignal) {
  return subagents.wait(ids, { timeoutMs: subagents.timeoutMs, signal });
}

/** A refusal the model can act on (too many subagents) reaches it as such. */
async function refusingBadInput<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof InvalidInputError) throw new ToolFailure('invalid_input', err.message);
    throw err;
  }
}
