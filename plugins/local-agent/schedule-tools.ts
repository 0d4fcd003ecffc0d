/**
 * The agent's schedule tools: create, list and cancel the conversation's
 * schedules (docs/scheduling.md). The model turns "tomorrow at 9" into an ISO
 * time or a cron line; the tool validates it and echoes the next fire times,
 * so the model can tell the user exactly when. Offered when the run has
 * `ctx.features.schedules` (schedules on, and not a subagent's run); the tool
 * policy applies to them by name, so an operator can require approval or deny
 * them. A schedule the agent makes is owned by the run's accountable
 * identity, so a run that also answers someone else makes none; cancelling
 * someone else's needs every person the run answers to be an admin of the
 * chat (`ctx.features.schedules` refuses both, and the model is told why).
 */

import { InvalidInputError, ScheduleForbiddenError, z } from 'steerbot/plugin';
import { type AgentTool, type RunContext, schedules, ToolFailure } from 'steerbot/runner';

const createInput = z.object({
  prompt: z
    .string()
    .min(1)
    .max(4000)
    .describe('What you will be asked to do at each fire, written as an instruction to yourself, e.g. "Remind the user to call Anna."'),
  at: z.string().max(64).optional().describe('One-shot: an ISO 8601 time with its UTC offset, e.g. 2026-12-03T09:00:00+01:00.'),
  in: z.string().max(32).optional().describe('One-shot: a duration from now, e.g. 10m, 2h, 1d, 1h30m.'),
  cron: z.string().max(128).optional().describe('Recurring: a cron line (minute hour day month weekday), e.g. "0 8 * * 1-5" for weekdays at 8.'),
  tz: z.string().max(64).optional().describe('IANA time zone of `cron`, e.g. Europe/Paris. Default UTC.'),
  every: z.string().max(32).optional().describe('Recurring: an interval, e.g. 30m, 2h, 1d.'),
  missed: z
    .enum(['skip', 'run-once'])
    .optional()
    .describe('If the bot was down at fire time: skip the missed fire, or run it once late. Default: run-once for one-shots, skip for recurring.'),
});

const iso = (t: number) => new Date(t).toISOString();

/** What the model sees of a schedule. */
function shown(s: schedules.ListedSchedule) {
  return { id: s.id, when: schedules.describeWhen(s.when), next: s.next.map(iso), prompt: s.prompt, kind: s.origin, missed: s.missed };
}

/** Validation errors reach the model as they are: it can fix the request; a refusal (someone else asked, someone else's schedule) it can pass on. */
function asToolFailure(err: unknown): never {
  if (err instanceof InvalidInputError) throw new ToolFailure('invalid_input', err.message);
  if (err instanceof ScheduleForbiddenError) throw new ToolFailure('forbidden', err.message);
  throw err;
}

// Module constants, like `createInput`: the tools are made per run, their schemas (and JSON Schemas) once.
const listInput = z.object({});
const cancelInput = z.object({ id: z.string().min(1).max(64).describe('The schedule id, e.g. s0k3x9q2m1a7b.') });

/** The schedule tools of one run; none when the run has no `schedules`. */
export function scheduleTools(ctx: RunContext): AgentTool[] {
  const store = ctx.features.schedules;
  if (!store) return [];
  const create: AgentTool<z.infer<typeof createInput>> = {
    name: 'schedule_create',
    description:
      'Creates a schedule in this conversation: at each fire you get the prompt as a scheduled input and answer it here. Give exactly one of at, in, cron, every. Returns the id and the next fire times (tell the user when).',
    inputSchema: createInput,
    // A re-run after a takeover creates the same schedule (its id comes from the call's idempotency key), not a second one.
    idempotent: true,
    timeoutMs: 10_000,
    async execute(input, { call }) {
      const created = await store.create(input, call ? { idempotencyKey: call.idempotencyKey } : {}).catch(asToolFailure);
      return { created: shown(created) };
    },
  };
  const list: AgentTool<Record<string, never>> = {
    name: 'schedule_list',
    description: "Lists this conversation's schedules with their next fire times.",
    inputSchema: listInput,
    idempotent: true,
    timeoutMs: 10_000,
    async execute() {
      return { schedules: (await store.list(3)).map(shown) };
    },
  };
  const cancel: AgentTool<{ id: string }> = {
    name: 'schedule_cancel',
    description: "Cancels one of this conversation's schedules by id (from schedule_list).",
    inputSchema: cancelInput,
    idempotent: true,
    timeoutMs: 10_000,
    async execute({ id }) {
      if (!(await store.cancel(id).catch(asToolFailure))) throw new ToolFailure('not_found', `no schedule ${id} in this conversation`);
      return { cancelled: id };
    },
  };
  return [create, list, cancel];
}
