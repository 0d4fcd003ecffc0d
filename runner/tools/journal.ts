/**
 * Durable tool calls. Every call is recorded when it starts (`tool.started`)
 * and when it completes (`tool.completed`), fenced by the run's token. An
 * attempt that takes a run over matches its calls against what earlier
 * attempts recorded but never got into a `model.step` (the step that made
 * them died with its attempt): a recorded result is replayed, a call started
 * without a result runs again only when the tool is idempotent, otherwise its
 * outcome is unknown, and a call never started runs. A step finished from its
 * recorded calls (`tool.calls`) makes the same calls, matched by id; a plugin
 * that asks its model again gets new ids, so calls also match by tool and
 * input digest, oldest first.
 */
import { createHash } from 'node:crypto';
import type { RunRef, Runs } from '../../src/protocol/runs.js';
import type { ModelStep, SeqEntry, ToolCompleted, ToolStarted } from '../../src/record/entries.js';
import type { ToolCallClaim, ToolCallJournal, ToolCallRef } from './contract.js';

/** A call an earlier attempt started whose result never reached a recorded step. */
export interface PendingToolCall {
  call: string;
  tool: string;
  inputHash: string;
  key: string;
  /** Its recorded result, when it completed. */
  result?: { status: 'ok' | 'error'; output: unknown };
}

/** JSON with object keys sorted: the same input always gives the same text. */
function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** Digest of a tool call's input (what the record keeps instead of the input). */
export function toolInputHash(input: unknown): string {
  return createHash('sha256').update(stableJson(input)).digest('hex').slice(0, 32);
}

/** Call ids whose results are in a recorded model step: answered, never pending. */
function answeredCalls(step: ModelStep, into: Set<string>): void {
  for (const m of step.messages) {
    if (m.role !== 'tool' || !Array.isArray(m.content)) continue;
    for (const part of m.content as Array<{ type?: string; toolCallId?: string }>)
      if (part.type === 'tool-result' && part.toolCallId) into.add(part.toolCallId);
  }
}

/** Approvals that calls of `runId` ran under: a takeover never reuses them for another call. Pure. */
export function usedApprovals(entries: readonly SeqEntry[], runId: string): Set<string> {
  const used = new Set<string>();
  for (const e of entries) if (e.kind === 'tool.started' && e.run === runId && e.approval) used.add(e.approval);
  return used;
}

/** A request an earlier attempt of a run made: an approval, or a question (`approval` is then its id). */
export interface EarlierRequest {
  approval: string;
  tool: string;
  inputHash: string;
  /** Its entry's seq: a message after it answers a question. */
  seq: number;
}

/** Approval requests and questions of `runId` in `entries`, oldest first: a takeover resumes their waits instead of asking again. Pure. */
export function earlierApprovalRequests(entries: readonly SeqEntry[], runId: string): EarlierRequest[] {
  const out: EarlierRequest[] = [];
  for (const e of entries) {
    if (e.kind === 'approval.requested' && e.run === runId) out.push({ approval: e.approval, tool: e.tool, inputHash: e.inputHash, seq: e.seq });
    else if (e.kind === 'question.asked' && e.run === runId) out.push({ approval: e.question, tool: e.tool, inputHash: e.inputHash, seq: e.seq });
  }
  return out;
}

/** The calls of `runId` in `entries` (seq order) that a takeover must account for, oldest first. Pure. */
export function pendingToolCalls(entries: readonly SeqEntry[], runId: string): PendingToolCall[] {
  const consumed = new Set<string>();
  const started = new Map<string, PendingToolCall>();
  for (const e of entries) {
    if (!('run' in e) || e.run !== runId) continue;
    if (e.kind === 'model.step') answeredCalls(e, consumed);
    else if (e.kind === 'tool.started') {
      if (e.supersedes) consumed.add(e.supersedes);
      started.set(e.call, { call: e.call, tool: e.tool, inputHash: e.inputHash, key: e.key });
    } else if (e.kind === 'tool.completed') {
      if (e.supersedes) carryForward(e.supersedes, e.call, started, consumed);
      const s = started.get(e.call);
      if (s && (e.status === 'ok' || e.status === 'error')) s.result = { status: e.status, output: e.output };
    }
  }
  return [...started.values()].filter((c) => !consumed.has(c.call));
}

/**
 * A call an attempt accounted for under a new id without running it (replayed, or reported unknown) stays the
 * earlier call under that id, key and result included: a later takeover finds it pending and never runs it for real.
 */
function carryForward(earlierCall: string, call: string, started: Map<string, PendingToolCall>, consumed: Set<string>): void {
  consumed.add(earlierCall);
  const earlier = started.get(earlierCall);
  if (earlier && !started.has(call)) started.set(call, { ...earlier, call });
}

/** The journal of one run attempt. */
export class RunToolJournal implements ToolCallJournal {
  private readonly pending: PendingToolCall[];

  constructor(
    private readonly runs: Runs,
    private readonly run: RunRef,
    pending: readonly PendingToolCall[] = [],
  ) {
    this.pending = [...pending];
  }

  async claim(call: ToolCallRef): Promise<ToolCallClaim> {
    const inputHash = toolInputHash(call.input);
    const i = this.pendingIndex(call, inputHash);
    const earlier = i >= 0 ? this.pending.splice(i, 1)[0] : undefined;
    // The same call finished from the record is not a successor of itself: its entries stay the call's own.
    const supersedes = earlier && earlier.call !== call.callId ? { supersedes: earlier.call } : {};
    if (earlier?.result) {
      await this.complete(call, inputHash, { status: 'replayed', output: earlier.result.output, ...supersedes });
      return { kind: 'replay', ...earlier.result };
    }
    if (earlier && !call.idempotent) {
      await this.complete(call, inputHash, { status: 'unknown', output: null, ...supersedes });
      return { kind: 'unknown' };
    }
    const key = earlier?.key ?? `k_${createHash('sha256').update(`${this.run.runId}\n${call.callId}`).digest('hex').slice(0, 32)}`;
    const entry: ToolStarted = {
      ...this.callFields(call, inputHash),
      kind: 'tool.started',
      key,
      ...(call.idempotent && { idempotent: true }),
      ...supersedes,
      ...(call.approval !== undefined && { approval: call.approval }),
    };
    await this.runs.append(this.run, entry);
    return { kind: 'run', idempotencyKey: key, rerun: earlier !== undefined };
  }

  recorded(call: ToolCallRef): 'started' | 'completed' | undefined {
    const p = this.pending[this.pendingIndex(call, toolInputHash(call.input))];
    return p ? (p.result ? 'completed' : 'started') : undefined;
  }

  /** Index of the pending call with the call's id, else of the oldest of its tool with this input digest, or -1. */
  private pendingIndex(call: ToolCallRef, inputHash: string): number {
    const same = this.pending.findIndex((p) => p.call === call.callId && p.tool === call.tool);
    return same >= 0 ? same : this.pending.findIndex((p) => p.tool === call.tool && p.inputHash === inputHash);
  }

  async completed(call: ToolCallRef, result: { status: 'ok' | 'error'; output: unknown }): Promise<void> {
    await this.complete(call, toolInputHash(call.input), result);
  }

  /** What `tool.started` and `tool.completed` entries of a call both carry. */
  private callFields(call: ToolCallRef, inputHash: string) {
    return { v: 1 as const, at: Date.now(), run: this.run.runId, token: this.run.token, call: call.callId, tool: call.tool, inputHash };
  }

  private async complete(call: ToolCallRef, inputHash: string, r: { status: ToolCompleted['status']; output: unknown; supersedes?: string }): Promise<void> {
    const entry: ToolCompleted = {
      ...this.callFields(call, inputHash),
      kind: 'tool.completed',
      status: r.status,
      output: r.output ?? null,
      ...(r.supersedes !== undefined && { supersedes: r.supersedes }),
    };
    await this.runs.append(this.run, entry);
  }
}
