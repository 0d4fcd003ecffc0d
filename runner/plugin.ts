/**
 * The runner plugin contract. A runner plugin executes one run: it gets a
 * RunContext (history, inputs, steering, state, delivery, stop signal) and
 * returns how the run went. It never talks to Redis or to a platform.
 */
import type { LanguageModel, ModelMessage } from 'ai';
import type { Logger } from 'pino';
import type { MessageButton, OutboundFile, VoiceFormat } from 'steerbot/channel';
import type { Attachment, FetchedFile, MessageReceived, PluginDefinition, RouteRegistry, SeqEntry, SteeringMode, StopKind } from 'steerbot/plugin';
import type { z } from 'zod';
import type { ModelProvider } from '../src/config/defaults.js';
import type { MemoryHit, MemoryNote, MemorySaveResult } from '../src/people/memory.js';
import type { AgentProfile } from '../src/people/profiles.js';
import type { ListedSchedule } from '../src/schedules/schedules.js';
import type { ScheduleRequest } from '../src/schedules/spec.js';
import type { ApprovalGate, ArtifactStore, ToolCallJournal } from './tools/contract.js';

export type {
  ApprovalGate,
  ApprovalOutcome,
  ApprovalRequest,
  ArtifactRef,
  ArtifactStore,
  QuestionOutcome,
  QuestionRequest,
  ToolCallClaim,
  ToolCallJournal,
  ToolCallRef,
} from './tools/contract.js';

/** What a runner plugin can do; the host and runtime adapt to it. */
export interface RunnerCapabilities {
  /** Pulls steering at turn boundaries. Without it the host routes messages sent during a run with the `collect` policy. */
  steering: boolean;
  /** Uses conversation state (the contract suite then checks state round trips). Default false. */
  state?: boolean;
}

/** A runner plugin's manifest. */
export interface RunnerManifest {
  name: string;
  version: string;
  capabilities: RunnerCapabilities;
  /** Steering a continuation takes when finish hands messages back: `all` or `one`. Default `all`. */
  steeringMode?: SteeringMode;
}

/** How a plugin says a run went. Failures are data, not exceptions. */
export interface RunResult {
  outcome: 'completed' | 'failed';
  /** Short terminal reason (no secrets, no stack traces). */
  reason?: string;
  /**
   * What to tell the user about a failure (no secrets). The messages the run
   * took and did not answer go to a follow-up run first; when they are not
   * handed on, the runtime sends the notice followed by those messages, so
   * none is dropped silently. A plugin may also send its own message instead.
   */
  notice?: string;
  /**
   * `failed` only: a follow-up run would fail the same way (a missing model
   * setting, a prompt too long for the model, a request the provider refuses
   * as invalid): the messages go to no follow-up and the notice is sent now.
   * Default false.
   */
  final?: boolean;
}

/** The delivery sink: how a plugin talks to the user. Never throws to the plugin. */
export interface DeliverySink {
  /**
   * Sends one complete message to the conversation. Resolves once it was handed to the channel (or skipped as already delivered).
   * `buttons`: commands offered under it on channels that show buttons (others ignore them).
   * `key`: a message the run sends apart from its answers (an approval request), under delivery
   * keys of its own (`<run id>:<key>:<n>`): it neither counts among the turn's keys nor takes over
   * a streamed answer, so an attempt that delivers a recorded answer finds the answer's keys.
   */
  message(text: string, opts?: { buttons?: MessageButton[]; key?: string }): Promise<void>;
  /**
   * Sends one file natively, exactly once per `key` (the tool call's
   * idempotency key: a re-run after a takeover finds the file's outbox record
   * and does not send it again). A channel that takes no files, or not one
   * this large, gets one text message saying so instead. Resolves with what
   * happened; never throws. Absent in hand-made sinks.
   */
  file?(file: OutboundFile, opts: { key: string }): Promise<FileDelivery>;
  /**
   * The largest file the conversation's channel takes, in bytes; undefined
   * when it takes none. Ask before making a file that costs something (a
   * picture, speech), so nothing is paid for that cannot be sent. Absent in
   * hand-made sinks.
   */
  fileLimit?(): number | undefined;
  /** The audio format the conversation's channel wants a spoken reply in (`ChannelOutbound.voiceFormat`; default `opus`). Absent in hand-made sinks. */
  voiceFormat?(): VoiceFormat;
  /** A streaming delta of the answer in progress (used only when the channel streams). */
  delta(text: string): void;
  /**
   * True when deltas reach the user (the conversation's channel streams by
   * editing a message); false when `delta` would drop them, so a plugin may
   * ask its model for the whole answer instead of a stream. Absent in
   * hand-made sinks: take it as true.
   */
  streams?(): boolean;
  /** Shows a typing indicator (refreshed by the sink while the run is active). */
  typing(): void;
}

/**
 * What became of a file handed to `DeliverySink.file`: `sent` (now, or by an
 * earlier attempt), `unsupported` / `too-large` (a text message said so
 * instead), `failed` (the platform refused it, or retries ran out: `error`).
 */
export interface FileDelivery {
  outcome: 'sent' | 'unsupported' | 'too-large' | 'failed';
  /** The channel's limit, in bytes (`too-large`). */
  maxBytes?: number;
  /** Why it failed (`failed`), without secrets. */
  error?: string;
}

/** One model step to record: the messages the next request must replay. */
export interface StepRecord {
  messages: ModelMessage[];
  finishReason?: string;
  usage?: {
    inputTokens?: number | undefined;
    outputTokens?: number | undefined;
    totalTokens?: number | undefined;
    cachedInputTokens?: number | undefined;
  };
  /** True when the step was cut off by a stop request. */
  partial?: boolean;
  /** The model that answered the step (its model id); `/status` names it. */
  model?: string;
  /** True when `model` is a fallback the run failed over to. */
  fallback?: boolean;
}

/** How a subagent stands: `done` (its answer), `failed` (it ended without one), `running`. */
export interface SubagentResult {
  id: string;
  status: 'done' | 'failed' | 'running';
  /** Its answers so far, oldest first, joined. */
  answer?: string;
  /** Why it failed. */
  reason?: string;
}

/**
 * The subagents of one run: each task a child run in a child conversation of
 * its own, on any runner, charged to the run's accountable identity. Starting
 * and steering are idempotent by key, so a takeover re-running the call
 * starts no child twice.
 */
export interface RunSubagents {
  /** Starts one child per task (at most the configured count per run); returns their ids. Throws InvalidInputError past the limit. */
  start(key: string, tasks: readonly string[]): Promise<string[]>;
  /** Sends `text` into child `id` (steered into its run while it runs); false when `id` is not this run's child. */
  steer(id: string, text: string, key: string): Promise<boolean>;
  /** Waits until each child is done or failed, at most `timeoutMs`; `signal` (the run stopped) stops them. */
  wait(ids: readonly string[], opts: { timeoutMs: number; signal: AbortSignal }): Promise<SubagentResult[]>;
  /** Longest wait of one call, in ms (`subagents.timeoutSeconds`). */
  readonly timeoutMs: number;
}

/** Model settings from config. */
export interface ModelSettings {
  provider: ModelProvider;
  name: string;
  baseURL?: string | undefined;
  /** Never logged. */
  apiKey?: string | undefined;
  /** The API the `openai` provider calls: `chat` (chat completions) or `responses` (the Responses API; `openai` only). Default `chat`. */
  api?: 'chat' | 'responses' | undefined;
  /** Context window, in tokens. */
  contextWindow: number;
  /** Tokens kept free for the answer. */
  outputReserve: number;
  /** Models a call fails over to, in order, on a rate limit, overload, 5xx, timeout or silent stream (`model.fallbacks`). Default: none. */
  fallbacks?: Array<Omit<ModelSettings, 'fallbacks'>> | undefined;
}

/** Compaction hooks for the agent loop. They throw only StaleRunError; other failures are logged and answered with undefined. */
export interface CompactionHooks {
  /** At a turn boundary (after the tool batch and steering): a replacement prompt when the next request would cross the threshold or /compact was asked, else undefined. */
  atBoundary(messages: ModelMessage[]): Promise<ModelMessage[] | undefined>;
  /** After a provider context-overflow error: compacts once (everything but this run); the prompt to retry with, or undefined. */
  onOverflow(): Promise<ModelMessage[] | undefined>;
  /** Reports the provider's input tokens for a request made with `messages` (calibrates the estimator); `overheadTokens` = system prompt + tool definitions. */
  observe(messages: ModelMessage[], inputTokens: number, overheadTokens?: number): void;
}

/** Everything a plugin gets for one run (or one continuation of it). */
export interface RunContext {
  /** Which run this is: its id, its conversation, its attempt. */
  run: RunInfo;
  /**
   * The prompt so far, projected from the record: the compaction summary (when
   * there is a checkpoint), earlier turns, this run's inputs and any steps
   * already recorded. Compacted first when it crossed the threshold.
   */
  history: ModelMessage[];
  /** The user messages this invocation answers (the run's inputs, or messages handed back by finish). */
  inputs: Array<SeqEntry<MessageReceived>>;
  /** Messages sent while the run works, taken at turn boundaries (capability `steering`). */
  steering: {
    /** Takes waiting steering messages (all, or one). Returns [] when none wait or a stop was requested. Must be called only at turn boundaries. */
    pull(mode?: SteeringMode): Promise<Array<SeqEntry<MessageReceived>>>;
  };
  /** Conversation-scoped values that outlive the run. */
  state: {
    /** Conversation-scoped value under a namespaced key (e.g. `myplugin.notes`), or undefined. */
    get(key: string): Promise<unknown>;
    /** Sets a value (JSON, size-capped), fenced by this run. */
    set(key: string, value: unknown): Promise<void>;
  };
  /** Writes of the run's model steps to the conversation record, fenced by this attempt. */
  record: RunRecord;
  /** How the plugin talks to the user; never throws to the plugin. */
  delivery: DeliverySink;
  /** When the run must stop, and why. */
  stop: RunStop;
  /** A pino logger bound to the conversation, run and attempt. */
  logger: Logger;
  /** What the run answers with: its model settings and its agent profile. */
  agent: RunAgent;
  /** Compaction hooks (turn-boundary pressure check, overflow recovery, usage calibration). */
  compaction: CompactionHooks;
  /** What the run's features and the runtime's services hand the plugin: each member is absent when its feature is off, and in hand-made contexts. */
  features: RunFeatures;
}

/** Which run an invocation belongs to (`RunContext.run`); the http-agent protocol sends `id`, `conversationId` and `attempt` as `run`. */
export interface RunInfo {
  /** The run id (also its BullMQ job id). */
  id: string;
  /** The conversation the run answers in. */
  conversationId: string;
  /** 1 on the first attempt; more after a takeover from a dead worker. */
  attempt: number;
  /**
   * Set for a subagent's run: the conversation of the run that delegated it.
   * The run works for that conversation: its profile is that conversation's
   * (`agent.profile`), and a plugin applies that conversation's own settings
   * (a tool policy per conversation) too. Absent for any other run.
   */
  parentConversationId?: string;
}

/** How a run is asked to stop (`RunContext.stop`). */
export interface RunStop {
  /** Aborted on interrupt / supersede / stop, on shutdown, or when the run was lost to another worker. */
  signal: AbortSignal;
  /** Why the signal fired, when it was a stop request; undefined otherwise (not fired, shutdown, lost). */
  requested(): StopKind | undefined;
}

/** What a run answers with (`RunContext.agent`). */
export interface RunAgent {
  /** The run's model settings: the conversation's `/model` choice, else its profile's, else `model.*`. */
  model: ModelSettings;
  /** The run's agent profile (`profiles`, chosen by `bindings`): its system prompt, tools, tool policy. Absent when none is configured. */
  profile?: AgentProfile;
}

/** How a plugin records the run's model steps (`RunContext.record`). */
export interface RunRecord {
  /**
   * Appends a completed model step to the record; returns its seq. A step that
   * is not a tool-call step (nor partial) is the turn's final answer: the
   * plugin must deliver its text (its assistant text parts, joined) next, and
   * nothing else, because an attempt that takes the run over after a crash
   * delivers that text from the record instead of invoking the plugin again.
   */
  step(step: StepRecord): Promise<number>;
  /**
   * Records a step's tool calls (its response messages, before any result)
   * before the first of them runs; returns the entry's seq. A plugin that
   * records them gets the step back as `unfinished` when its attempt dies
   * before `step`. Throws StaleRunError when the run was lost. Absent in
   * hand-made contexts.
   */
  toolCalls?(step: StepRecord): Promise<number>;
  /**
   * Charges a model call that records no step: one cut off before it said
   * anything (or by a shutdown or a lost lease), gone silent, or failed after
   * its request may have reached the provider. Providers report usage only
   * with a whole answer but bill such a call's prompt all the same, so the
   * plugin gives its estimate, and the runner features (budgets) count it as
   * they count a recorded step's usage. Not fenced: a run lost to another
   * worker still spent it. Absent in hand-made contexts.
   */
  spent?(usage: NonNullable<StepRecord['usage']>): Promise<void>;
  /**
   * A tool-call step an earlier attempt of this run recorded with
   * `toolCalls` and died before recording whole: the model already
   * decided these calls. The plugin finishes the step from it (each call run,
   * replayed or reported of unknown outcome by the journal) and records it,
   * instead of asking the model for the step again. Given to the first
   * invocation of a takeover only.
   */
  unfinished?: StepRecord;
  /**
   * The attempt's fencing token (higher on each takeover): the run's writes
   * carry it, and a tool writing elsewhere can fence its own writes with it.
   * Absent in hand-made contexts.
   */
  fencingToken?: number;
}

/**
 * The handles of one run's features (`RunContext.features`): each is absent
 * when its feature is off and in hand-made contexts. A runner feature adds
 * its own member (runner/feature.ts); the runtime adds the tool journal,
 * artifacts, approvals, attachments and identities.
 */
export interface RunFeatures {
  /** Durable tool calls: recorded when they start and complete, replayed after a takeover (docs/tools.md). Absent in hand-made contexts. */
  toolCalls?: ToolCallJournal;
  /** Large tool results, kept under the conversation with a TTL. Absent in hand-made contexts. */
  artifacts?: ArtifactStore;
  /** Asks a person in the chat to approve a tool call, durably. Absent in hand-made contexts. */
  approvals?: ApprovalGate;
  /** The conversation's schedules. Absent when schedules are off (`schedules.enabled`), in a subagent's run, and in hand-made contexts. */
  schedules?: ConversationSchedules;
  /**
   * The long-term memory of the person the run is for
   * (`identities.accountable`). Absent when memory is off (`memory.enabled`, or the
   * profile's `memory: false`), when the run has no identity, and in hand-made contexts.
   */
  memory?: RunMemory;
  /** Child runs the agent delegates tasks to. Absent when subagents are off (`subagents.enabled`), in a child run, and in hand-made contexts. */
  subagents?: RunSubagents;
  /**
   * Who the run is for and who sent its messages across channels: the run's
   * accountable identity, and the identity id of a sender of this
   * conversation (an input's `sender.id`), the key of what follows a person
   * (memory, budgets). Absent in hand-made contexts.
   */
  identities?: RunIdentities;
  /**
   * Checks the spending budgets (`budgets.*`) before a model step: the result
   * that ends the run (reason `budget`, the person's notice included) when one
   * is spent, else undefined. The runtime checks before the first step and
   * charges every recorded step's usage and every `record.spent`; a plugin calls this before each
   * further step. With `'image'` it also admits one picture against
   * `imagesPerDay` and counts it: a result then refuses only the picture (the
   * run goes on; its notice is never set). Absent when no budget applies and in hand-made contexts.
   */
  spendingCheck?(spend?: 'image'): Promise<RunResult | undefined>;
  /**
   * Fetches an attachment's bytes through the conversation's channel (the
   * record keeps references only); undefined when the channel cannot. Throws
   * as the channel does (InvalidInputError: larger than `maxBytes`). Absent in hand-made contexts.
   */
  fetchAttachment?(attachment: Attachment, opts: { maxBytes: number; signal?: AbortSignal }): Promise<FetchedFile | undefined>;
}

/** Who is who in one run (`RunContext.features.identities`): the person it is for, the senders of its conversation. */
export interface RunIdentities {
  /**
   * The identity the run is charged to (budgets, profile bindings and memory follow it): the person whose message
   * started it (`<channel id>:<user id>`, or their linked identity), or the owner a schedule's fire names.
   * Undefined when there is none (the operator's runs).
   */
  readonly accountable: string | undefined;
  /** The conversation's channel id. */
  readonly channel: string;
  /** Identity id of sender `senderId` on this channel: the linked identity, else `<channel>:<sender id>`. One Redis read. Throws InvalidInputError for a bad id. */
  resolve(senderId: string): Promise<string>;
}

/** The run's conversation's schedules (docs/scheduling.md), for a plugin's schedule tools. */
export interface ConversationSchedules {
  /**
   * Validates and creates a schedule, owned by the run's accountable identity
   * (its fires are charged to it); returns it with its next fire times.
   * Throws InvalidInputError naming the field on a bad request (in a run no
   * person's message started, also a one-shot sooner than
   * `schedules.minIntervalSeconds`), ScheduleLimitError (`code`
   * `SCHEDULE_LIMIT`) past the conversation's limit, and
   * ScheduleForbiddenError (`code` `SCHEDULE_FORBIDDEN`) when the run also
   * answers a person who is not its identity; nothing is written then.
   * `idempotencyKey` (a tool call's): the same key makes the same schedule, so a re-run creates no second one.
   */
  create(request: ScheduleRequest, opts?: { idempotencyKey?: string }): Promise<ListedSchedule>;
  /** The conversation's schedules with their next `count` fire times (default 1), soonest first. */
  list(count?: number): Promise<ListedSchedule[]>;
  /**
   * Cancels one of the conversation's schedules; false when it has no such
   * schedule. Throws ScheduleForbiddenError (`code` `SCHEDULE_FORBIDDEN`),
   * changing nothing, when the schedule is someone else's and a person whose
   * message the run answers is not an admin of the chat (docs/scheduling.md).
   */
  cancel(id: string): Promise<boolean>;
}

/** The memory of the run's person (docs/people.md#memory), for a plugin's memory tools and prompt. */
export interface RunMemory {
  /** Most characters of one note. */
  readonly maxNoteChars: number;
  /**
   * Saves a note (the same text twice is stored once: `same`). Throws
   * MemoryLimitError (`code` `MEMORY_LIMIT`) past the count or size limit,
   * InvalidInputError for an empty text, and in a run that also answers
   * someone else than its person or that an event started (a subagent's
   * task or result among them); nothing is written then.
   */
  save(text: string, opts?: { signal?: AbortSignal }): Promise<MemorySaveResult>;
  /** Notes matching `query`, best first (at most `limit`, default 5, at most 20). */
  search(query: string, opts?: { limit?: number; signal?: AbortSignal }): Promise<MemoryHit[]>;
  /** Deletes note `id`; false when there is none. Throws InvalidInputError for an id that is not a note id, and where `save` refuses. */
  delete(id: string): Promise<boolean>;
  /**
   * The notes for the system prompt, read once per invocation (the same
   * array on every call): the most recently saved or edited notes that fit
   * `memory.promptNotes` and `memory.promptChars`, in the order they were
   * saved; `total` is how many notes there are. It depends on the notes
   * alone, so a prompt built from it stays byte-identical until a note changes.
   */
  promptNotes(): Promise<{ notes: MemoryNote[]; total: number }>;
}

/** A runner plugin. */
export interface RunnerPlugin {
  manifest: RunnerManifest;
  /** Executes the run. Should return (not throw) on model or tool failure. */
  run(ctx: RunContext): Promise<RunResult>;
  /** Releases what the plugin holds across runs (connections, child processes); called once when the runner stops. */
  close?(): Promise<void>;
}

/** What a runner plugin's factory gets besides its own settings. */
export interface RunnerPluginDeps {
  /** The process logger. */
  logger: Logger;
  /** The configured model settings (`model.*`). */
  model: ModelSettings;
  /** `fetch` for the plugin's own HTTP calls (the one `startApp` was given: proxies, tests). Default: the global `fetch`. */
  fetch?: typeof fetch;
  /** Builds the configured model (or the one `settings` name) through the runner's model factory. Throws ConfigError when it cannot. */
  createModel(settings?: ModelSettings): LanguageModel;
  /** Routes served by the process's HTTP server, when the runner has one: add them in `create` (before it listens). */
  routes?: RouteRegistry;
  /** Base URL that server listens at (e.g. `http://127.0.0.1:8080`) once it listens; undefined before, or without a server. */
  serverUrl?(): string | undefined;
  /** The configured profiles (`profiles.<name>`) as written, for the settings a plugin checks at start (their `skills` names). Default: none. */
  profiles?: Readonly<Record<string, { skills?: readonly string[] | undefined }>>;
}

/** A runner plugin module's definition. */
export type RunnerPluginDefinition<S extends z.ZodType = z.ZodType> = PluginDefinition<'runner', S, RunnerPluginDeps, RunnerPlugin>;

/** Types a runner plugin definition (identity at run time). */
export function defineRunnerPlugin<S extends z.ZodType>(definition: RunnerPluginDefinition<S>): RunnerPluginDefinition<S> {
  return definition;
}
