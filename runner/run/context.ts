/**
 * The RunContext one plugin invocation gets: its prompt (from the
 * compaction checkpoint and the record), steering pulls, fenced state and
 * record writes, delivery, tools' journal, artifacts and approvals, all
 * bound to one attempt of the run.
 */
import { DEFAULTS } from '../../src/config/defaults.js';
import { ScheduleForbiddenError } from '../../src/errors.js';
import { type IdentityStore, tryAccountId } from '../../src/people/identity.js';
import { type MemoryNote, type MemoryStore, selectPromptNotes } from '../../src/people/memory.js';
import type { AgentProfile } from '../../src/people/profiles.js';
import type { MessageReceived, ModelStep, SeqEntry, ToolCalls } from '../../src/record/entries.js';
import { type CancelRuleDeps, cancelRefusal } from '../../src/schedules/cancel-rule.js';
import { type Schedules, scheduleIdFor } from '../../src/schedules/schedules.js';
import type { RunTrace } from '../../src/telemetry/run-trace.js';
import { tracePull } from '../../src/telemetry/run-trace.js';
import type { RunCompaction } from '../compaction/hooks.js';
import type { ConversationSchedules, RunContext, RunIdentities, RunMemory, StepRecord } from '../plugin.js';
import { isFinalStep } from '../projection.js';
import { RunApprovals } from '../tools/approval.js';
import { RedisArtifacts } from '../tools/artifacts.js';
import type { RunAttempt } from './attempt.js';
import type { RunBudget } from './budget.js';
import type { ExecutorOptions } from './options.js';
import { isMessage, type ToolState } from './start.js';
import type { UnansweredMessages } from './unanswered.js';

/** What one invocation is bound to besides the attempt. */
export interface InvocationParts {
  compaction: RunCompaction;
  /** The user messages this invocation answers. */
  inputs: Array<SeqEntry<MessageReceived>>;
  unanswered: UnansweredMessages;
  telemetry: RunTrace;
  tools: ToolState;
  /** The tool-call step an earlier attempt died in, for the first invocation to finish. */
  unfinishedStep: StepRecord | undefined;
  /** The budgets the run spends from; undefined when no limit is set. */
  budget: RunBudget | undefined;
  /** The run's accountable identity: the person whose message started it, or a fire's owner (`accountableIdentity`). */
  identity: string | undefined;
  /** The run's agent profile (from the bindings); undefined: none configured. */
  profile: AgentProfile | undefined;
}

/** Builds the context of one invocation (reads its prompt). */
export async function createRunContext(o: ExecutorOptions, attempt: RunAttempt, p: InvocationParts): Promise<RunContext> {
  const { ref, delivery, logger } = attempt;
  const { compaction, inputs, unanswered, tools, unfinishedStep } = p;
  const history = await compaction.initialPrompt();
  delivery.beginTurn(compaction.answerAnchor);
  // The people whose messages this invocation answers (fires and events are nobody's): the schedule tools' group rule asks about each.
  const requesters = new Set(inputs.filter((m) => !m.origin).map((m) => m.sender.id));
  return {
    conversationId: ref.conversationId,
    runId: ref.runId,
    attempt: attempt.acquired.attempt,
    fencingToken: ref.token,
    history,
    inputs,
    steering: {
      pull: async (mode) => {
        const pulled = await tracePull(() => o.runs.pullAtBoundary(ref, mode ?? o.steeringMode ?? DEFAULTS.agent.steeringMode));
        compaction.noteRequested(pulled.compactionRequestedSeq);
        const messages = pulled.messages.filter(isMessage);
        for (const m of messages) if (!m.origin) requesters.add(m.sender.id);
        unanswered.add(messages);
        // What follows answers the newest message taken: the anchor a retried attempt reads from the
        // record (its `steering.injected`), so both attempts deliver under the same keys.
        if (pulled.messages.length > 0) delivery.beginTurn(Math.max(...pulled.messages.map((m) => m.seq)));
        return messages;
      },
    },
    state: {
      get: (key) => o.state.get(ref.conversationId, key),
      set: (key, value) => o.state.set(ref, key, value),
    },
    recordStep: (step) => recordStep(o, attempt, p, step),
    ...(p.budget && { spendingCheck: () => p.budget!.check() }),
    recordToolCalls: (step) => o.runs.append(ref, stepEntry(attempt, step, 'tool.calls') satisfies ToolCalls),
    ...(unfinishedStep && { unfinishedStep }),
    delivery,
    signal: attempt.signal,
    stopRequested: () => attempt.stopKind,
    logger,
    model: p.profile?.model ?? o.model,
    ...(p.profile && { profile: p.profile }),
    ...(p.identity !== undefined && { identity: p.identity }),
    compaction,
    fetchAttachment: async (attachment, opts) => {
      const out = o.resolveOutbound(ref.conversationId);
      return out?.fetchAttachment ? out.fetchAttachment(attachment, opts) : undefined;
    },
    ...(o.schedules && {
      schedules: conversationSchedules(
        o.schedules,
        ref.conversationId,
        p.identity,
        inputs.some((m) => m.group === true),
        cancelRule(o, ref.conversationId, p.identity, () => [...requesters]),
      ),
    }),
    ...(o.memory && p.identity !== undefined && memoryAllowed(p) && { memory: runMemory(o.memory, p.identity) }),
    toolCalls: tools.journal,
    artifacts: new RedisArtifacts(o.client, o.prefix, ref),
    approvals: new RunApprovals({
      client: o.client,
      prefix: o.prefix,
      run: ref,
      delivery,
      starter: inputs[0]?.sender.id,
      logger,
      usedApprovals: tools.usedApprovals,
      earlierRequests: tools.earlierApprovals,
    }),
    ...(o.identities && { identities: runIdentities(o, ref.conversationId) }),
  };
}

/** The identities of one conversation's senders, resolved through the conversation's channel. */
function runIdentities(o: ExecutorOptions, conversationId: string): RunIdentities {
  const store = o.identities as IdentityStore;
  const channel = o.resolveChannel?.(conversationId) ?? conversationId.split(':', 1)[0]!;
  return { channel, resolve: (senderId) => store.resolve(channel, senderId) };
}

/** Appends a `model.step`; a final answer answers every message taken so far. */
async function recordStep(o: ExecutorOptions, attempt: RunAttempt, p: InvocationParts, step: StepRecord): Promise<number> {
  p.telemetry.usage(step.usage);
  await p.budget?.charge(step.usage);
  const entry: ModelStep = { ...stepEntry(attempt, step, 'model.step'), ...(step.partial && { partial: true }) };
  const seq = await o.runs.append(attempt.ref, entry);
  if (isFinalStep({ messages: entry.messages, finishReason: step.finishReason, partial: step.partial })) p.unanswered.answered();
  return seq;
}

/** The fields a `model.step` and a `tool.calls` entry share. */
function stepEntry<K extends 'model.step' | 'tool.calls'>(attempt: RunAttempt, step: StepRecord, kind: K) {
  const { ref } = attempt;
  return {
    v: 1 as const,
    kind,
    at: Date.now(),
    run: ref.runId,
    token: ref.token,
    step: 0,
    messages: step.messages as Array<{ role: 'assistant' | 'tool'; content: unknown }>,
    ...(step.finishReason !== undefined && { finishReason: step.finishReason }),
    ...(step.usage !== undefined && { usage: stripUndefined(step.usage) }),
  };
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/**
 * Whether the invocation gets its starter's memory: not when the profile turns
 * memory off, and in a group chat (several people share the prompt and the
 * answers) only when the profile opts in with `memory: { inGroups: true }`.
 * A run only events or heartbeats started cannot tell a group from a
 * private chat (nobody's message says which), so it gets the owner's
 * memory only with that opt-in too; a schedule knows where it was made.
 */
function memoryAllowed(p: InvocationParts): boolean {
  const setting = p.profile?.memory;
  if (setting === false) return false;
  if (setting?.inGroups === true) return true;
  if (p.inputs.some((m) => m.group === true)) return false;
  return p.inputs.some((m) => m.origin === undefined || m.origin.kind === 'schedule');
}

/** The memory of one identity; the prompt's notes are read once per invocation. */
function runMemory(store: MemoryStore, identity: string): RunMemory {
  let prompt: Promise<{ notes: MemoryNote[]; total: number }> | undefined;
  return {
    maxNoteChars: store.limits.maxNoteChars,
    save: (text, opts) => store.save(identity, text, opts?.signal ? { signal: opts.signal } : {}),
    search: (query, opts) => store.search(identity, query, opts),
    delete: (id) => store.delete(identity, id),
    promptNotes: () => {
      prompt ??= store.list(identity).then((all) => ({ notes: selectPromptNotes(all, store.limits), total: all.length }));
      return prompt;
    },
  };
}

/**
 * The schedules of one conversation, created by the agent and owned by the
 * run's accountable identity (their fires are charged to it); cancelling
 * another's follows the group rule (`cancelRefusal`).
 */
function conversationSchedules(
  schedules: Schedules,
  conversationId: string,
  owner: string | undefined,
  group: boolean,
  rule: CancelRuleDeps,
): ConversationSchedules {
  return {
    create: (request, opts) =>
      schedules.create(conversationId, request, {
        createdBy: 'agent',
        owner,
        group,
        ...(opts?.idempotencyKey !== undefined && { id: scheduleIdFor(opts.idempotencyKey) }),
      }),
    list: (count) => schedules.list(conversationId, count),
    cancel: async (id) => {
      const s = await schedules.get(conversationId, id);
      if (!s) return false;
      const refusal = await cancelRefusal(s, rule);
      if (refusal) throw new ScheduleForbiddenError(refusal);
      return schedules.cancel(conversationId, id);
    },
  };
}

/** What the group rule of one run's schedule tools asks: who the run answers, their identities, whether they administer the chat. */
function cancelRule(o: ExecutorOptions, conversationId: string, runIdentity: string | undefined, requesters: () => string[]): CancelRuleDeps {
  const channel = o.resolveChannel?.(conversationId) ?? conversationId.split(':', 1)[0]!;
  return {
    runIdentity,
    requesters,
    identityOf: (userId) => (o.identities ? o.identities.tryResolve(channel, userId) : Promise.resolve(tryAccountId(channel, userId))),
    current: (identity) => (o.identities ? o.identities.resolveAccount(identity) : Promise.resolve(identity)),
    isAdmin: async (userId) => {
      if (o.chatAdmins?.(conversationId)?.includes(userId)) return true;
      const out = o.resolveOutbound(conversationId);
      return out?.isAdmin ? out.isAdmin(conversationId, userId) : false;
    },
  };
}
