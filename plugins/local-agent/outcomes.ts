/**
 * How the local agent's runs end when they do not end with an answer: the
 * terminal reasons it records (`run.ended.reason`) and the short messages the
 * user gets instead of silence.
 */

/** Terminal reasons the local agent records. Stable strings: dashboards and tests branch on them. */
export const RUN_REASON = {
  /** The provider stream stayed silent for `streamIdleTimeoutMs`, twice in a row. */
  timeout: 'timeout',
  /** The prompt is larger than the model's context window even after compaction: by the estimate (the provider was not called), or the provider refused it again after the one compaction. */
  contextOverflow: 'context_overflow',
  /** The model's final answer had no text (the run still completed; the user got `EMPTY_ANSWER_MESSAGE`). */
  emptyAnswer: 'empty_answer',
  /** A run answering only heartbeats ended without a message: nothing to say (completed, nobody was told anything). */
  silent: 'silent',
  /** A file the model cannot take arrived and the attachment policy is `error`. */
  attachmentUnsupported: 'attachment_unsupported',
  /** The loop stopped after `maxSteps` tool steps. */
  stepLimit: 'step limit reached',
} as const;

/** Text sent when the model fails (the runtime sends it, with any steered message left unanswered). */
export const DEFAULT_MODEL_FAILURE_MESSAGE = 'Sorry, the model failed to answer. Please try again in a moment.';

/** Text sent when the model stopped responding, twice. */
export const STREAM_TIMEOUT_MESSAGE = 'Sorry, the model stopped responding. Please try again in a moment.';

/** Text sent when the model answered with nothing. */
export const EMPTY_ANSWER_MESSAGE = 'The model returned an empty answer. Please rephrase or try again.';

/** Text sent when the conversation no longer fits the model's context window. */
export const CONTEXT_OVERFLOW_MESSAGE =
  'This conversation is too long for the model, even after summarizing it. Please send a shorter message, or start over with /new.';

/** Text sent when the loop gave up after `maxSteps` tool steps. */
export const STEP_LIMIT_MESSAGE = 'I stopped after too many steps without an answer. Please rephrase or narrow the request.';
