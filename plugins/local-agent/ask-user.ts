/**
 * The agent's `ask_user` tool (opt-in, `askUser`): asks the people in the
 * chat a question with two to five options, shown as buttons where the
 * channel has them and numbered everywhere. The run waits durably, like a
 * tool approval: a click by the user who started the run (or a configured
 * approver) is the answer; a message written instead ends the wait and
 * reaches the model as the person's next message; nobody answering ends it
 * after the approval timeout. The tool policy applies to it by name.
 */

import { z } from 'steerbot/plugin';
import { type AgentTool, type RunContext, ToolFailure } from 'steerbot/runner';
import type { ToolPolicy } from './policy.js';

/** Most characters of one option (what the platforms' buttons show in full). */
const OPTION_MAX_CHARS = 60;

const askInput = z.object({
  question: z.string().trim().min(1).max(1000).describe('The question, as the person will read it.'),
  options: z
    .array(z.string().trim().min(1).max(OPTION_MAX_CHARS))
    .min(2)
    .max(5)
    .describe(`Two to five short answers to choose from (each at most ${OPTION_MAX_CHARS} characters), shown as buttons.`)
    .refine((o) => new Set(o).size === o.length, { error: 'options must differ' }),
});

/** Extra time the tool call gets past the question's own timeout: the wait records the timeout itself. */
const TIMEOUT_MARGIN_MS = 30_000;

/** The `ask_user` tool of one run; none when the run cannot ask (no approval gate). */
export function askUserTools(ctx: RunContext, policy: ToolPolicy): AgentTool[] {
  const gate = ctx.features.approvals;
  if (!gate) return [];
  const timeoutMs = policy.approvalTimeoutMs;
  const ask: AgentTool<z.infer<typeof askInput>> = {
    name: 'ask_user',
    description:
      'Asks the person a question with 2 to 5 options shown as buttons, and waits for their choice. Use it when you need them to pick between clear alternatives before going on. They may also write an answer of their own instead.',
    inputSchema: askInput,
    // A re-run after a takeover resumes the same question (same input): it is never asked twice.
    idempotent: true,
    timeoutMs: timeoutMs + TIMEOUT_MARGIN_MS,
    async execute(input, { signal, call }) {
      const out = await gate.ask(
        { callId: call?.callId ?? '', tool: 'ask_user', input, question: input.question, options: input.options, deciders: policy.approvers, timeoutMs },
        signal,
      );
      switch (out.kind) {
        case 'answered':
          return { answer: out.option, option: out.answer + 1, ...(out.by !== undefined && { by: out.by }) };
        case 'typed':
          return out.steered
            ? { answer: null, note: 'Instead of choosing, the person wrote a message: it follows. Take it as their answer.' }
            : { answer: null, note: 'Instead of choosing, the person wrote a message, which is answered after this run. Finish briefly.' };
        case 'timeout':
          throw new ToolFailure('timeout', `nobody answered within ${Math.round(timeoutMs / 1000)} s`);
        case 'aborted':
          throw new ToolFailure('aborted', 'the run was stopped while waiting for the answer');
      }
    },
  };
  return [ask];
}
