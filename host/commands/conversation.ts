/**
 * The commands on the conversation itself: `/stop`, `/new`, `/compact`,
 * `/queue <mode>`, `/status` and `/purge`. All but `/status` change it for
 * everyone in it (admins only in a group). In a conversation purged with
 * `afterPurge: 'refuse'`, `/stop`, `/new`, `/compact`, `/queue <mode>` and
 * `/status` change nothing and answer what a message gets there
 * (`PURGED_NOTICE`). `/status`, which writes nothing else, sets the dedupe
 * key itself.
 */
import { parseJsonOrUndefined } from '../../src/json.js';
import type { CommandSource } from '../../src/protocol/dispatch.js';
import { type ConversationStatus, INPUT_POLICIES, type InputPolicy } from '../../src/protocol/types.js';
import { parseBreaker } from '../../src/record/breaker.js';
import type { SeqEntry } from '../../src/record/entries.js';
import { readTail } from '../../src/record/read.js';
import { readUnanswered, type UnansweredNote, unansweredStatusLine } from '../../src/record/unanswered.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type CommandDeps, type CommandOutcome, type CommandTable, DUPLICATE, PURGED } from './table.js';

const POLICY_HELP: Record<InputPolicy, string> = {
  steer: 'new messages join the current run at its next step',
  followup: 'each new message gets its own run after the current one',
  collect: 'new messages are answered together after the current run',
  interrupt: 'a new message stops the current run (its partial answer is kept) and is answered next',
  supersede: 'a new message replaces the current run (its partial answer is dropped)',
};

const modesList = () => INPUT_POLICIES.map((p) => `• ${p}: ${POLICY_HELP[p]}`).join('\n');

/** `/stop`, `/new`, `/compact`, `/queue`, `/status`, `/purge`. */
export const conversationCommands = {
  stop: { admin: true, run: (deps, _args, source) => stopCommand(deps, source) },
  new: { admin: true, run: (deps, _args, source) => newCommand(deps, source) },
  compact: { admin: true, run: (deps, _args, source) => compactCommand(deps, source) },
  queue: { admin: true, run: queueCommand },
  status: { run: (deps, _args, source, channelPolicy) => statusCommand(deps, source, channelPolicy) },
  // It changes what every run here costs: an admin's, in a group.
  model: { admin: true, run: modelCommand },
  purge: { admin: true, run: purgeCommand },
} satisfies CommandTable;

async function stopCommand({ dispatch }: CommandDeps, source: CommandSource): Promise<CommandOutcome> {
  const r = await dispatch.requestStop(source, 'stop');
  if (r.kind === 'duplicate') return DUPLICATE;
  if (r.kind === 'purged') return PURGED;
  if (r.kind === 'idle') return { reply: 'Nothing to stop: no run is active.', duplicate: false };
  return { reply: r.runState === 'queued' ? 'Cancelled the run before it started.' : 'Stopping the current run.', duplicate: false };
}

async function newCommand({ dispatch }: CommandDeps, source: CommandSource): Promise<CommandOutcome> {
  const r = await dispatch.reset(source);
  if (r.kind === 'duplicate') return DUPLICATE;
  if (r.kind === 'purged') return PURGED;
  const stopped = r.stoppedRunId ? ' The current run was stopped.' : '';
  return { reply: `Started a new conversation: earlier messages are no longer part of the context.${stopped}`, duplicate: false };
}

async function compactCommand(deps: CommandDeps, source: CommandSource): Promise<CommandOutcome> {
  const r = await deps.dispatch.requestCompaction(source);
  if (r.kind === 'duplicate') return DUPLICATE;
  if (r.kind === 'purged') return PURGED;
  if (r.kind === 'new-run') {
    await deps.enqueue(source.conversationId, r.runId);
    return { reply: 'Compacting the conversation.', duplicate: false };
  }
  return { reply: 'The conversation will be compacted at the next step of the current run.', duplicate: false };
}

/** How many of the latest record entries `/status` looks through for the last model step. */
const STATUS_TAIL_ENTRIES = 20;

/** Names the fallback model that answered the conversation's last model step, when one did. */
function fallbackLine(tail: readonly SeqEntry[]): string[] {
  const step = tail.findLast((e) => e.kind === 'model.step');
  return step?.kind === 'model.step' && step.fallback && step.model ? [`Last step answered by ${step.model}, a fallback (the run's model failed).`] : [];
}

async function statusCommand(deps: CommandDeps, source: CommandSource, channelPolicy: InputPolicy | undefined): Promise<CommandOutcome> {
  const { dispatch } = deps;
  // Sent together on one connection: one round trip of waiting, not two.
  const choices = deps.models?.choices ?? [];
  const keys = conversationKeys(dispatch.options.prefix, source.conversationId);
  const [unanswered, r, extra, chosen, tail] = await Promise.all([
    readUnanswered(dispatch.options.client, dispatch.options.prefix, source.conversationId),
    dispatch.statusCommand(source),
    // The features' lines are extra: /status answers without them when they fail.
    deps.statusLines?.(source.conversationId).catch(() => []) ?? [],
    // Only where /model has choices: the conversation's own (a stored name the profile no longer allows is not used).
    choices.length > 0 ? dispatch.options.client.hget(keys.meta, 'model') : null,
    // The latest entries, for the model that answered the last step.
    readTail(dispatch.options.client, keys.log, STATUS_TAIL_ENTRIES).catch(() => []),
  ]);
  if (r.kind === 'duplicate') return DUPLICATE;
  if (r.kind === 'purged') return PURGED;
  const lines = [
    formatStatus(r.status, channelPolicy ?? dispatch.options.defaultPolicy, unanswered),
    ...(deps.profileName ? [`Agent profile: ${deps.profileName}`] : []),
    ...(choices.length > 0
      ? [chosen && choices.includes(chosen) ? `Model: ${chosen} (chosen with /model)` : `Model: ${deps.models!.default} (the default)`]
      : []),
    ...fallbackLine(tail),
    ...extra,
  ];
  return { reply: lines.join('\n'), duplicate: false };
}

/**
 * `/model` lists the models this conversation may use, `/model <name>`
 * switches to one of them (the next run uses it), `/model default` goes back.
 * Only names the sender's profile allows are written; anything else is
 * answered with the list, and nothing is written.
 */
async function modelCommand(deps: CommandDeps, args: string, source: CommandSource): Promise<CommandOutcome> {
  const models = deps.models ?? { default: '', choices: [] };
  const name = args.split(/\s+/, 1)[0] ?? '';
  const wanted = name.toLowerCase() === 'default' ? 'default' : models.choices.find((c) => c === name);
  if (name && wanted === undefined) {
    const list = models.choices.length > 0 ? ` Choices: ${[...models.choices, 'default'].join(', ')}.` : ' This conversation has no other models.';
    return { reply: `Unknown model "${name.slice(0, 64)}".${list}`, duplicate: false };
  }
  const r =
    wanted === undefined
      ? await deps.dispatch.modelChoice(source, 'show')
      : wanted === 'default'
        ? await deps.dispatch.modelChoice(source, 'clear')
        : await deps.dispatch.modelChoice(source, 'set', wanted);
  if (r.kind === 'duplicate') return DUPLICATE;
  if (r.kind === 'purged') return PURGED;
  const fallback = models.default ? `the default (${models.default})` : 'the default';
  if (wanted === 'default') return { reply: `Model reset to ${fallback}.`, duplicate: false };
  if (wanted !== undefined) return { reply: `Model set to ${wanted}: the next answer uses it.`, duplicate: false };
  // A stored choice this profile no longer allows is not used (the runner checks it again).
  const current = r.model !== undefined && models.choices.includes(r.model) ? r.model : fallback;
  if (models.choices.length === 0) return { reply: `Model: ${current}. This conversation has no other models.`, duplicate: false };
  return { reply: `Model: ${current}. Choices: ${[...models.choices, 'default'].join(', ')} (/model <name>).`, duplicate: false };
}

async function queueCommand(deps: CommandDeps, args: string, source: CommandSource, channelPolicy: InputPolicy | undefined): Promise<CommandOutcome> {
  const mode = args.toLowerCase();
  if (mode === 'default' || mode === 'reset') {
    const r = await deps.dispatch.setPolicy(source, undefined);
    if (r.kind === 'duplicate') return DUPLICATE;
    if (r.kind === 'purged') return PURGED;
    return { reply: `Queue mode reset to the channel default (${channelPolicy ?? deps.dispatch.options.defaultPolicy}).`, duplicate: false };
  }
  if ((INPUT_POLICIES as readonly string[]).includes(mode)) {
    const r = await deps.dispatch.setPolicy(source, mode as InputPolicy);
    if (r.kind === 'duplicate') return DUPLICATE;
    if (r.kind === 'purged') return PURGED;
    return { reply: `Queue mode set to ${mode}: ${POLICY_HELP[mode as InputPolicy]}.`, duplicate: false };
  }
  // No or unknown mode: explain, write nothing.
  const head = mode ? `Unknown queue mode "${args.slice(0, 40)}".` : 'Usage: /queue <mode>.';
  return { reply: `${head} Modes:\n${modesList()}\n• default: back to the channel default`, duplicate: false };
}

/**
 * `/purge` (`/purge stop`: stop an active run first): deletes everything
 * stored for the conversation, in one atomic step, and runs the features'
 * purge hooks (`deps.purge`, host/purge.ts). Deduped by the command's update
 * key like every command.
 */
async function purgeCommand(deps: CommandDeps, args: string, source: CommandSource): Promise<CommandOutcome> {
  const o = deps.dispatch.options;
  const r = await deps.purge(source.conversationId, { stopActive: args.toLowerCase() === 'stop', updateKey: source.updateKey });
  switch (r.kind) {
    case 'duplicate':
      return DUPLICATE;
    case 'active':
      return { reply: 'A run is active. Send /purge stop to stop it and delete this conversation.', duplicate: false };
    case 'not_found':
      return { reply: 'Nothing is stored for this conversation.', duplicate: false };
    case 'already_purged':
      return { reply: 'This conversation was already deleted.', duplicate: false };
    case 'purged': {
      const next = o.afterPurge === 'restart' ? 'A new message starts a new, empty conversation.' : 'New messages here are not accepted for now.';
      return {
        reply: `Deleted this conversation: its messages, runs, state, schedules and delivery records.${r.stoppedRunId ? ' The active run was stopped.' : ''} ${next}`,
        duplicate: false,
      };
    }
  }
}

/** The `/status` reply; `unanswered`: steered messages the last failed or stopped run took and did not answer. */
function formatStatus(s: ConversationStatus, channelPolicy: InputPolicy, unanswered?: UnansweredNote): string {
  const lines: string[] = [];
  if (s.activeRunId) {
    lines.push(`Active run: ${s.activeRunId} (${s.runState ?? 'unknown'}${s.attempt > 1 ? `, attempt ${s.attempt}` : ''})`);
    if (s.stop) lines.push(`Stop requested: ${s.stop}`);
  } else {
    lines.push('No active run.');
  }
  lines.push(`Steering queue: ${s.steeringDepth} · Pending: ${s.pendingDepth}`);
  lines.push(
    s.policyOverride ? `Queue mode: ${s.policyOverride} (set with /queue; channel default ${channelPolicy})` : `Queue mode: ${channelPolicy} (channel default)`,
  );
  if (s.compactionRequestedSeq > 0) lines.push('Compaction: /compact requested, applied at the next turn boundary');
  const breaker = parseBreaker(parseJsonOrUndefined(s.compactionBreaker));
  if (breaker.open) lines.push(`Compaction: paused after ${breaker.ineffective} ineffective compactions (/compact resumes it)`);
  if (unanswered) lines.push(unansweredStatusLine(unanswered));
  return lines.join('\n');
}
