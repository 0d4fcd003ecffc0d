/**
 * What the chat page is shown of the conversation record: each entry reduced
 * to the fields the page renders (who said what, how it was dispatched,
 * runs starting and ending, tool calls made, steering taken). Plain data;
 * the page renders it as text.
 */
import type { SeqEntry } from 'steerbot/plugin';

/** A tool call made in a model step. */
export interface ToolCallView {
  name: string;
  /** The call's input, as JSON text, cut to 200 characters. */
  input: string;
}

/** One record entry as the page sees it. */
export interface RecordView {
  seq: number;
  kind: string;
  at: number;
  run?: string;
  seqs?: number[];
  /** message.received: the text and the page's message id. */
  text?: string;
  messageId?: string;
  command?: string;
  args?: string;
  attempt?: number;
  outcome?: string;
  reason?: string;
  control?: string;
  tools?: ToolCallView[];
  partial?: boolean;
  /** tool.started / tool.completed: the tool, the call id, and how the call ended. */
  tool?: string;
  call?: string;
  status?: string;
  /** steering.injected: handed back by finish (the run continued to answer it). */
  follow_up?: boolean;
  tokensBefore?: number;
  tokensAfter?: number;
  /** approval.decided: which approval, and how (the page disables its buttons); question.answered: the same, `decision` its status. */
  approval?: string;
  question?: string;
  decision?: string;
}

const cut = (s: string, n: number) => (s.length <= n ? s : `${s.slice(0, n - 1)}…`);

/** Tool calls in a model step's messages. */
export function toolCallsOf(messages: ReadonlyArray<{ role: string; content: unknown }>): ToolCallView[] {
  const out: ToolCallView[] = [];
  for (const m of messages) {
    if (m.role !== 'assistant' || !Array.isArray(m.content)) continue;
    for (const part of m.content as Array<Record<string, unknown>>) {
      if (part?.type !== 'tool-call') continue;
      let input = '';
      try {
        input = JSON.stringify(part.input ?? part.args ?? {});
      } catch {
        input = '(unserializable)';
      }
      out.push({ name: String(part.toolName ?? '?'), input: cut(input, 200) });
    }
  }
  return out;
}

/** The page's view of one entry. */
export function recordView(e: SeqEntry): RecordView {
  const base = { seq: e.seq, kind: e.kind, at: e.at };
  switch (e.kind) {
    case 'message.received':
      return { ...base, text: e.text, ...(e.messageId !== undefined && { messageId: e.messageId }) };
    case 'message.sent':
      return { ...base, text: e.text };
    case 'command.received':
      return { ...base, command: e.command, ...(e.args !== undefined && { args: e.args }) };
    case 'steering.queued':
    case 'steering.injected':
    case 'steering.requeued':
    case 'steering.overflow':
      return { ...base, run: e.run, seqs: e.seqs, ...(e.follow_up && { follow_up: true }) };
    case 'run.control':
      return { ...base, run: e.run, seqs: e.seqs, control: e.control };
    case 'run.started':
      return { ...base, run: e.run, attempt: e.attempt, ...(e.inputs && { seqs: e.inputs }) };
    case 'run.ended':
      return { ...base, run: e.run, attempt: e.attempt, outcome: e.outcome, ...(e.reason && { reason: e.reason }) };
    case 'model.step':
      return { ...base, run: e.run, tools: toolCallsOf(e.messages), ...(e.partial && { partial: true }) };
    case 'tool.calls':
      return { ...base, run: e.run, tools: toolCallsOf(e.messages) };
    case 'approval.decided':
      return { ...base, run: e.run, approval: e.approval, decision: e.decision };
    case 'question.answered':
      return { ...base, run: e.run, question: e.question, decision: e.status };
    case 'compaction':
      return { ...base, tokensBefore: e.tokens_before, tokensAfter: e.tokens_after };
    default:
      return { ...base, ...toolJournal(e) };
  }
}

/**
 * The tools journal's entries (`tool.started` before a call runs,
 * `tool.completed` after), read by field so this view does not depend on the
 * journal's full schema: which tool, which call, how it ended.
 */
function toolJournal(e: SeqEntry): Partial<RecordView> {
  if (e.kind !== ('tool.started' as string) && e.kind !== ('tool.completed' as string)) return {};
  const f = e as unknown as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  const [run, tool, call, status] = [str(f.run), str(f.tool), str(f.call), str(f.status)];
  return { ...(run && { run }), ...(tool && { tool }), ...(call && { call }), ...(status && { status }) };
}
