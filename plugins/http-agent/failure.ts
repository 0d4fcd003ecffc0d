/**
 * Why an invocation of the external agent failed: a named code (the run's
 * terminal reason starts with it) and the short message the user gets.
 * Failures are data: `toResult` turns one into the plugin's RunResult.
 */
import type { RunResult } from 'steerbot/runner';

/** What went wrong, by name. */
export type AgentFailureCode =
  | 'connect-timeout'
  | 'first-event-timeout'
  | 'idle-timeout'
  | 'unreachable'
  | 'http-status'
  | 'bad-content-type'
  | 'stream-broken'
  | 'malformed-event'
  | 'unknown-event'
  | 'event-too-large'
  | 'message-too-long'
  | 'state-too-large'
  | 'protocol-violation'
  | 'no-result'
  | 'agent-failed';

/** What the user is told, by kind of failure. */
export const NOTICES = {
  timeout: 'The agent took too long to answer. Please try again.',
  unreachable: 'The agent is not reachable right now. Please try again later.',
  badInput: 'The agent sent an answer that could not be used. Please try again.',
  agentFailed: 'Sorry, the agent could not answer. Please try again.',
} as const;

const NOTICE_OF: Record<AgentFailureCode, string> = {
  'connect-timeout': NOTICES.timeout,
  'first-event-timeout': NOTICES.timeout,
  'idle-timeout': NOTICES.timeout,
  unreachable: NOTICES.unreachable,
  'http-status': NOTICES.unreachable,
  'bad-content-type': NOTICES.unreachable,
  'stream-broken': NOTICES.unreachable,
  'malformed-event': NOTICES.badInput,
  'unknown-event': NOTICES.badInput,
  'event-too-large': NOTICES.badInput,
  'message-too-long': NOTICES.badInput,
  'state-too-large': NOTICES.badInput,
  'protocol-violation': NOTICES.badInput,
  'no-result': NOTICES.badInput,
  'agent-failed': NOTICES.agentFailed,
};

/** An invocation that cannot go on. `detail` must hold no secret: it lands in the record and the logs. */
export class AgentFailure extends Error {
  constructor(
    readonly code: AgentFailureCode,
    readonly detail: string,
    /** Overrides the default message to the user (an agent's own failure message). */
    readonly notice: string = NOTICE_OF[code],
  ) {
    super(`http-agent ${code}: ${detail}`);
    this.name = 'AgentFailure';
  }

  /** The run result: failed, reason `http-agent <code>: <detail>`, and the user's message. */
  toResult(): RunResult {
    return { outcome: 'failed', reason: this.message, notice: this.notice };
  }
}
