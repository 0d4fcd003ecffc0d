/**
 * The console's actions. Stop, compact, new context and set policy run the
 * chat commands themselves (`commandSet`, the same scripts), sent by the
 * operator: the record shows them as `command.received` from sender
 * `console`. Purge runs `/purge` (with `stop`: the active run is stopped
 * first) through the host's one purge, the chat command's, with the same
 * feature hooks. Abandon ends a run whose runner stopped answering (running past
 * its lease) through the runner's own `finish` script, fenced by the token
 * the console read: if a runner took the run over meanwhile, the token moved
 * on and nothing is written. The run ends `failed` with the reason
 * `abandoned by operator`, recorded in its `run.ended` entry; steering it had
 * not pulled goes to pending and a successor run answers it.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { InvalidInputError, LeaseHeldError, RunEndedError, RunNotFoundError, StaleRunError } from '../../src/errors.js';
import type { Dispatch } from '../../src/protocol/dispatch.js';
import { Runs } from '../../src/protocol/runs.js';
import { INPUT_POLICIES, type InputPolicy } from '../../src/protocol/types.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { commandSet } from '../commands/index.js';
import type { Purge } from '../purge.js';

/** What actions need. */
export interface ConsoleActionDeps {
  dispatch: Dispatch;
  enqueue(conversationId: string, runId: string): Promise<void>;
  /** The configured policy of a conversation's channel. */
  channelPolicy(conversationId: string): InputPolicy | undefined;
  logger: Logger;
  now?: () => number;
  /** The host's purge (host/purge.ts), with every feature's purge hooks. */
  purge: Purge;
}

/** An action's outcome: `ok` false is a refusal the operator is shown (409). */
export interface ActionOutcome {
  ok: boolean;
  message: string;
}

/** The reason recorded on a run the operator abandoned. */
export const ABANDON_REASON = 'abandoned by operator (runner unresponsive past its lease)';

/** Actions the console offers. */
export const CONSOLE_ACTIONS = ['stop', 'compact', 'new', 'policy', 'purge', 'abandon'] as const;
export type ConsoleAction = (typeof CONSOLE_ACTIONS)[number];

const COMMAND_OF: Record<Exclude<ConsoleAction, 'abandon'>, string> = { stop: 'stop', compact: 'compact', new: 'new', policy: 'queue', purge: 'purge' };

// The conversation's own commands: the actions are those.
const CONVERSATION_COMMANDS = commandSet([]);

/** Runs the console's actions. */
export class ConsoleActions {
  private readonly runs: Runs;

  constructor(private readonly d: ConsoleActionDeps) {
    this.runs = new Runs(d.dispatch.options);
  }

  /**
   * Runs `action` on a conversation. `arg`: the policy for `policy`
   * (`default` clears the override), `stop` for `purge` (stop an active run
   * first), the run id for `abandon`.
   * @throws InvalidInputError on a bad argument (nothing written).
   */
  async run(conversationId: string, action: ConsoleAction, arg: string | undefined): Promise<ActionOutcome> {
    conversationKeys(this.d.dispatch.options.prefix, conversationId); // validates the id
    if (action === 'abandon') return this.abandon(conversationId, arg ?? '');
    if (action === 'policy' && !(arg === 'default' || (INPUT_POLICIES as readonly string[]).includes(arg ?? ''))) {
      throw new InvalidInputError(`policy must be one of ${INPUT_POLICIES.join(', ')}, or default`);
    }
    const source = { conversationId, updateKey: `console:${randomUUID()}`, sender: { id: 'console', name: 'operator (console)' } };
    if (action === 'purge' && arg !== undefined && arg !== 'stop') throw new InvalidInputError('purge takes no argument, or stop');
    const args = action === 'policy' || action === 'purge' ? (arg ?? '') : '';
    const outcome = await CONVERSATION_COMMANDS.run(this.d, { name: COMMAND_OF[action], args }, source, this.d.channelPolicy(conversationId));
    this.d.logger.info({ conversationId, action, arg }, 'console action');
    return { ok: true, message: outcome.reply };
  }

  private async abandon(conversationId: string, runId: string): Promise<ActionOutcome> {
    const o = this.d.dispatch.options;
    const k = conversationKeys(o.prefix, conversationId);
    const [state, token, leaseUntil] = await o.client.hmget(k.run(runId), 'state', 'token', 'lease_until');
    if (!state) return { ok: false, message: `no run ${runId} in this conversation` };
    if (state !== 'running') return { ok: false, message: `run ${runId} is ${state}: only a running run can be abandoned (stop a queued one)` };
    const liveLease = (until: number) => {
      const left = Math.ceil((until - (this.d.now ?? Date.now)()) / 1000);
      return {
        ok: false,
        message: `run ${runId} still has a live lease (${left} s left): its runner may be working; stop it instead, or wait for the lease to run out`,
      };
    };
    // Read first for a clear answer; the finish script checks the lease again atomically.
    if (Number(leaseUntil) > (this.d.now ?? Date.now)()) return liveLease(Number(leaseUntil));
    try {
      const fin = await this.runs.finish({ conversationId, runId, token: Number(token) }, 'failed', { reason: ABANDON_REASON, abandon: true });
      const successor = fin.kind === 'ended' ? fin.successor : undefined;
      if (successor) await this.d.enqueue(conversationId, successor.runId);
      this.d.logger.warn({ conversationId, runId, token: Number(token), successor: successor?.runId }, 'console: run abandoned by operator');
      return { ok: true, message: `Run ${runId} abandoned.${successor ? ` Waiting messages are answered by run ${successor.runId}.` : ''}` };
    } catch (err) {
      if (err instanceof LeaseHeldError) return liveLease(err.leaseUntilMs);
      if (err instanceof StaleRunError) return { ok: false, message: `run ${runId} was taken over by a runner (its fencing token moved on): not abandoned` };
      if (err instanceof RunEndedError || err instanceof RunNotFoundError) return { ok: false, message: `run ${runId} has already ended` };
      throw err;
    }
  }
}
