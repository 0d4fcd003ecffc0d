/**
 * The RunContext one plugin invocation gets: its prompt (from the
 * compaction checkpoint and the record), steering pulls, fenced state and
 * record writes, delivery, and its `features`: the tools' journal,
 * artifacts and approvals, all bound to one attempt of the run, and what
 * the runner features add.
 */

import type { AgentProfile } from '../../src/people/profiles.js';
import type { ModelStep, ToolCalls } from '../../src/record/entries.js';
import type { RunTrace } from '../../src/telemetry/run-trace.js';
import { tracePull } from '../../src/telemetry/run-trace.js';
import type { RunCompaction } from '../compaction/hooks.js';
import type { ModelSettings, RunContext, RunFeatures, RunIdentities, StepRecord } from '../plugin.js';
import { isFinalStep } from '../projection.js';
import { RunApprovals } from '../tools/approval.js';
import { RedisArtifacts } from '../tools/artifacts.js';
import type { RunAttempt } from './attempt.js';
import { featuresAfterStep, featuresContext, featuresSpent, type InvocationRun } from './features.js';
import type { ExecutorOptions } from './options.js';
import { isMessage, type ToolState } from './start.js';
import type { UnansweredMessages } from './unanswered.js';

/** What one invocation is bound to besides the attempt. */
export interface InvocationParts {
  compaction: RunCompaction;
  /** The invocation as features see it: its inputs, the run's identity and profile. */
  run: InvocationRun;
  unanswered: UnansweredMessages;
  telemetry: RunTrace;
  tools: ToolState;
  /** The tool-call step an earlier attempt died in, for the first invocation to finish. */
  unfinishedStep: StepRecord | undefined;
  /** The conversation's `/model` choice (meta `model`, read with the attempt's prompt head); undefined: none. */
  modelChoice: string | undefined;
}

/** Builds the context of one invocation (reads its prompt). */
export async function createRunContext(o: ExecutorOptions, attempt: RunAttempt, p: InvocationParts): Promise<RunContext> {
  const { ref, delivery, logger } = attempt;
  const { compaction, run, unanswered, unfinishedStep } = p;
  const { inputs, profile } = run;
  const history = await compaction.initialPrompt();
  delivery.beginTurn(compaction.answerAnchor);
  return {
    run: {
      id: ref.runId,
      conversationId: ref.conversationId,
      attempt: attempt.acquired.attempt,
      ...(run.parentConversationId !== undefined && { parentConversationId: run.parentConversationId }),
    },
    history,
    inputs,
    steering: {
      pull: async (mode) => {
        const pulled = await tracePull(() => o.runs.pullAtBoundary(ref, mode ?? o.settings.steeringMode));
        compaction.noteRequested(pulled.compactionRequestedSeq);
        const messages = pulled.messages.filter(isMessage);
        // The people whose messages this invocation answers: the schedule tools' group rule asks about each.
        run.took(messages);
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
    record: {
      step: (step) => recordStep(o, attempt, p, step),
      // Counters only, nothing of the conversation: not fenced, a lost attempt's call was billed too.
      spent: (usage) => featuresSpent(o.features, p.run, usage),
      toolCalls: (step) => o.runs.append(ref, stepEntry(attempt, step, 'tool.calls') satisfies ToolCalls),
      ...(unfinishedStep && { unfinished: unfinishedStep }),
      fencingToken: ref.token,
    },
    delivery,
    stop: { signal: attempt.signal, requested: () => attempt.stopKind },
    logger,
    agent: { model: chosenModel(profile, p.modelChoice) ?? profile?.model ?? o.settings.model, ...(profile && { profile }) },
    compaction,
    features: { ...runtimeFeatures(o, attempt, p), ...featuresContext(o.features, run) },
  };
}

/**
 * The model the conversation chose with `/model`, when its profile allows it
 * (checked again here: the config may have changed since); undefined: the
 * profile's own.
 */
function chosenModel(profile: AgentProfile | undefined, name: string | undefined): ModelSettings | undefined {
  return profile?.models && name && Object.hasOwn(profile.models, name) ? profile.models[name] : undefined;
}

/** The members of `RunContext.features` the runtime itself provides: the tool journal, artifacts, approvals, attachments, identities. */
function runtimeFeatures(o: ExecutorOptions, attempt: RunAttempt, p: InvocationParts): RunFeatures {
  const { ref, delivery, logger } = attempt;
  const { run, tools } = p;
  return {
    fetchAttachment: async (attachment, opts) => {
      const out = o.channels.outbound(ref.conversationId);
      return out?.fetchAttachment ? out.fetchAttachment(attachment, opts) : undefined;
    },
    toolCalls: tools.journal,
    artifacts: new RedisArtifacts(o.client, o.prefix, ref),
    approvals: new RunApprovals({
      client: o.client,
      prefix: o.prefix,
      run: ref,
      delivery,
      starter: run.inputs[0]?.sender.id,
      logger,
      usedApprovals: tools.usedApprovals,
      earlierRequests: tools.earlierApprovals,
    }),
    identities: runIdentities(o, ref.conversationId, run.identity),
  };
}

/** Who is who in one run: its accountable identity, and its conversation's senders resolved through the conversation's channel. */
function runIdentities(o: ExecutorOptions, conversationId: string, accountable: string | undefined): RunIdentities {
  const channel = o.channels.channelOf(conversationId);
  return { accountable, channel, resolve: (senderId) => o.identities.resolve(channel, senderId) };
}

/** Appends a `model.step`; a final answer answers every message taken so far. */
async function recordStep(o: ExecutorOptions, attempt: RunAttempt, p: InvocationParts, step: StepRecord): Promise<number> {
  p.telemetry.usage(step.usage);
  await featuresAfterStep(o.features, p.run, step);
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
    ...(step.model !== undefined && { model: step.model.slice(0, 256) }),
    ...(step.fallback && { fallback: true }),
  };
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
