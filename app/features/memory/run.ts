/**
 * Memory's runner part: a run with an identity gets that person's long-term
 * memory (`RunContext.features.memory`) where the profile and the chat allow it.
 * Only that person may have their notes changed: a run that also answers
 * someone else (a message steered into a group run), or one an event
 * started (a subagent's task or late result may carry such a message),
 * saves and deletes none.
 */
import type { FeatureRun, RunnerFeature, RunnerFeatureKit } from '../../../runner/feature.js';
import { createEmbedder } from '../../../runner/model.js';
import type { RunMemory } from '../../../runner/plugin.js';
import { InvalidInputError } from '../../../src/errors.js';
import { type MemoryNote, MemoryStore, selectPromptNotes } from '../../../src/people/memory.js';
import { answersSomeoneElse } from '../../../src/schedules/run-rules.js';

/** The memory of `kit.config.memory`; with memory off, a feature that adds nothing. */
export function memoryRunner(kit: RunnerFeatureKit): RunnerFeature {
  if (!kit.config.memory.enabled) return { name: 'memory' };
  const store = memoryStore(kit);
  return {
    name: 'memory',
    context: (run) => (run.identity !== undefined && memoryAllowed(run) ? { memory: runMemory(store, run.identity, writeCheck(kit, run, run.identity)) } : {}),
  };
}

/** The memory store of `config.memory`, with an embedder when `memory.embeddingModel` is set. */
function memoryStore(kit: RunnerFeatureKit): MemoryStore {
  const { memory, model } = kit.config;
  return new MemoryStore({
    redis: kit.redis,
    prefix: kit.prefix,
    limits: memory,
    now: kit.now,
    ...(memory.embeddingModel !== undefined && {
      embedder: createEmbedder(model, memory.embeddingModel),
      onEmbedderError: (err: unknown) => kit.logger.warn({ err }, 'memory: the embedding model failed; going on without embeddings'),
    }),
  });
}

/**
 * Whether the invocation gets its starter's memory: not when the profile turns
 * memory off, and in a group chat (several people share the prompt and the
 * answers) only when the profile opts in with `memory: { inGroups: true }`.
 * A run only events or heartbeats started cannot tell a group from a
 * private chat (nobody's message says which), so it gets the owner's
 * memory only with that opt-in too; a schedule knows where it was made.
 */
function memoryAllowed(run: FeatureRun): boolean {
  const setting = run.profile?.memory;
  if (setting === false) return false;
  if (setting?.inGroups === true) return true;
  if (run.inputs.some((m) => m.group === true)) return false;
  return run.inputs.some((m) => m.origin === undefined || m.origin.kind === 'schedule');
}

/**
 * Throws InvalidInputError (the model reads why) unless every person whose
 * message the run answers so far is the run's identity, whose notes they are:
 * a member's message steered into a group run cannot have the starter's
 * notes (in the prompt of their private chats too) planted or deleted.
 */
function writeCheck(kit: RunnerFeatureKit, run: FeatureRun, identity: string): () => Promise<void> {
  const channel = kit.channels.channelOf(run.conversationId);
  return async () => {
    // An event's text is not the person's: a subagent's task or result was written by a model from whatever its run
    // answered. Asked at each write: steering may have pulled one in since the run started.
    if (run.answersEvent())
      throw new InvalidInputError("a run an event started (a subagent's task or result, an API event) saves and deletes no notes: nothing was written");
    const rule = {
      runIdentity: identity,
      requesters: () => run.requesters(),
      identityOf: (userId: string) => kit.identities.tryResolve(channel, userId),
      current: (id: string) => kit.identities.resolveAccount(id),
    };
    if (await answersSomeoneElse(rule))
      throw new InvalidInputError(
        'these notes are about the person who started this run, and this run also answers someone else: nothing was saved or deleted. Only that person can have their notes changed, in a message of their own',
      );
  };
}

/** The memory of one identity; the prompt's notes are read once per invocation; `mayWrite` throws when a save or delete is refused. */
function runMemory(store: MemoryStore, identity: string, mayWrite: () => Promise<void>): RunMemory {
  let prompt: Promise<{ notes: MemoryNote[]; total: number }> | undefined;
  return {
    maxNoteChars: store.limits.maxNoteChars,
    save: async (text, opts) => {
      await mayWrite();
      return store.save(identity, text, opts?.signal ? { signal: opts.signal } : {});
    },
    search: (query, opts) => store.search(identity, query, opts),
    delete: async (id) => {
      await mayWrite();
      return store.delete(identity, id);
    },
    promptNotes: () => {
      prompt ??= store.list(identity).then((all) => ({ notes: selectPromptNotes(all, store.limits), total: all.length }));
      return prompt;
    },
  };
}
