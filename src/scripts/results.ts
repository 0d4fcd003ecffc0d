/**
 * Maps script replies to typed errors, in one place. Scripts answer a table
 * whose first element is a negative code on refusal (see includes/common.lua).
 */
import {
  CasConflictError,
  InvalidInputError,
  LeaseHeldError,
  RunEndedError,
  RunNotFoundError,
  ScriptError,
  StaleRunError,
  type SteerbotError,
} from '../errors.js';
import type { ScriptName, ScriptReply } from './index.js';

/** Error codes shared by every script (keep in step with includes/common.lua). */
export const SCRIPT_ERRORS = {
  NOT_FOUND: -1,
  ENDED: -2,
  STALE: -3,
  LEASE_HELD: -4,
  BAD_ARG: -5,
  CONFLICT: -6,
  TOO_LARGE: -7,
  /** One item of a batch script failed (its message follows); the other items stand. */
  SCRIPT: -8,
} as const;

/** Throws the typed error a refusal stands for; returns the reply otherwise. */
export function checkReply(script: ScriptName | (string & {}), reply: ScriptReply, runId = '?'): ScriptReply {
  const head = reply[0];
  if (typeof head !== 'number' || head >= 0) return reply;
  throw errorFor(script, head, reply, runId);
}

function errorFor(script: string, code: number, reply: ScriptReply, runId: string): SteerbotError {
  switch (code) {
    case SCRIPT_ERRORS.NOT_FOUND:
      return new RunNotFoundError(script, runId);
    case SCRIPT_ERRORS.ENDED:
      return new RunEndedError(script, runId);
    case SCRIPT_ERRORS.STALE:
      return new StaleRunError(script, runId);
    case SCRIPT_ERRORS.LEASE_HELD:
      return new LeaseHeldError(script, runId, Number(reply[1]));
    case SCRIPT_ERRORS.BAD_ARG:
      return new InvalidInputError(`${script}: argument refused by the script`);
    case SCRIPT_ERRORS.CONFLICT:
      return new CasConflictError(script, reply[1] === '' ? undefined : String(reply[1]));
    case SCRIPT_ERRORS.TOO_LARGE:
      return new InvalidInputError(`${script}: value larger than ${reply[1]} bytes`);
    case SCRIPT_ERRORS.SCRIPT:
      return new ScriptError(script, String(reply[1]));
    default:
      return new ScriptError(script, `unknown error code ${code}`);
  }
}

/** Reads `n` (seq, json) pairs starting at `reply[offset]`. */
export function pairsFrom(reply: ScriptReply, offset: number, n: number): Array<{ seq: number; json: string }> {
  const out: Array<{ seq: number; json: string }> = [];
  for (let i = 0; i < n; i++) {
    out.push({ seq: Number(reply[offset + 2 * i]), json: String(reply[offset + 2 * i + 1] ?? '') });
  }
  return out;
}

/** Parses a comma-separated seq list. */
export function seqList(csv: unknown): number[] {
  const s = String(csv ?? '');
  return s === '' ? [] : s.split(',').map(Number);
}
