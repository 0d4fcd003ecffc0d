/**
 * Tool failures as the model sees them: a safe envelope naming the tool, a
 * short category and a message. Only a ToolFailure's (or an MCP tool's own)
 * message reaches the model; any other error is described by its category
 * alone, its details go to the logs.
 */

import { redactSecrets } from 'steerbot/plugin';
import { ToolFailure, type ToolFailureCategory } from 'steerbot/runner';

export { ToolFailure, type ToolFailureCategory } from 'steerbot/runner';

/** What the model gets when a tool fails. */
export interface ToolErrorEnvelope {
  error: { tool: string; category: ToolFailureCategory; message: string };
}

/** Longest message of an envelope, in characters: a longer one is cut (an MCP server's framed message is made to fit). */
export const MAX_TOOL_ERROR_CHARS = 500;

const GENERIC: Record<ToolFailureCategory, string> = {
  timeout: 'the tool did not finish in time',
  aborted: 'the call was cancelled',
  forbidden: 'the tool refused the request',
  not_found: 'not found',
  invalid_input: 'the input was not valid',
  unavailable: 'the tool is unavailable right now',
  too_many_redirects: 'too many redirects',
  tool_error: 'the tool reported an error',
  outcome_unknown: 'the outcome is unknown',
  denied: 'the call was not allowed',
  approval_timeout: 'nobody approved the call in time',
  internal: 'the tool failed with an internal error',
};

/** Builds the envelope for `err` thrown by tool `tool`; a thrown value whose details are not meant for the model gets its category's generic message. */
export function toolErrorEnvelope(
  tool: string,
  err: unknown,
  opts: { timedOut?: boolean; aborted?: boolean; passMessage?: (err: unknown) => boolean } = {},
): ToolErrorEnvelope {
  let category: ToolFailureCategory = 'internal';
  let message: string | undefined;
  if (opts.timedOut) category = 'timeout';
  else if (opts.aborted) category = 'aborted';
  else if (err instanceof ToolFailure) {
    category = err.category;
    message = err.message;
  } else if (opts.passMessage?.(err)) {
    category = 'tool_error';
    message = err instanceof Error ? err.message : String(err);
  }
  const text = redactSecrets(message ?? GENERIC[category]).slice(0, MAX_TOOL_ERROR_CHARS);
  return { error: { tool, category, message: text } };
}
