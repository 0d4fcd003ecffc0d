/**
 * One invocation of the external agent: POST the signed run request, read
 * its NDJSON events under the connect / first-event / idle timeouts, and
 * apply each event to the run (record, deliver, state) only once it is
 * wholly valid, so a bad event writes nothing. A stop closes the stream,
 * sends a signed cancel request and keeps the streamed text as a partial
 * answer. Steering pulls come in over the run endpoints (`endpoints.ts`) and
 * are ordered after the events the agent wrote before it asked.
 */
import { randomBytes } from 'node:crypto';
import { type HttpRequest, type HttpResponse, parseJson, type SteeringMode, signatures } from 'steerbot/plugin';
import type { RunContext, RunResult } from 'steerbot/runner';
import { AgentFailure, type AgentFailureCode, NOTICES } from './failure.js';
import { ndjsonLines } from './ndjson.js';
import { type AgentEvent, type AgentMessage, agentEventSchemas, agentMessage, type CancelRequest, NDJSON, PROTOCOL, type RunRequest } from './protocol.js';

/** The conversation state key holding the agent's state object. */
export const STATE_KEY = 'http-agent.state';

/** What an invocation needs of the plugin's settings. */
export interface InvocationSettings {
  url: string;
  secret: string;
  connectTimeoutMs: number;
  firstEventTimeoutMs: number;
  idleTimeoutMs: number;
  maxEventBytes: number;
  maxMessageChars: number;
  maxStateBytes: number;
}

/** The invocation a pull named has ended (its stream closed): the run endpoint answers 410. */
export class InvocationEndedError extends Error {
  constructor() {
    super('this invocation of the run has ended');
    this.name = 'InvocationEndedError';
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Parses and validates one event line; nesting deeper than `MAX_JSON_DEPTH` is refused before it is parsed.
 * @throws AgentFailure naming what is wrong.
 */
export function parseEvent(line: string): AgentEvent {
  const json = parseJson(line);
  if (!json.ok) throw new AgentFailure('malformed-event', json.problem === 'invalid' ? 'an event line is not JSON' : `an event is ${json.message}`);
  const raw = json.value;
  if (!isObject(raw) || typeof raw.type !== 'string') throw new AgentFailure('malformed-event', 'an event must be a JSON object with a string "type"');
  const type = raw.type;
  if (!Object.hasOwn(agentEventSchemas, type)) throw new AgentFailure('unknown-event', `unknown event type "${type.slice(0, 40)}"`);
  const parsed = agentEventSchemas[type as keyof typeof agentEventSchemas].safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new AgentFailure('malformed-event', `bad ${type} event: ${issue.path.join('.') || '(event)'}: ${issue.message}`);
  }
  return parsed.data as AgentEvent;
}

const hasToolPart = (messages: Array<{ content: unknown }>) =>
  messages.some((m) => Array.isArray(m.content) && m.content.some((p: { type: string }) => p.type === 'tool-call' || p.type === 'tool-result'));

/** A short, secret-free description of a network error (its code, e.g. `ECONNREFUSED`). */
function networkError(err: unknown): string {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string') return code;
  return err instanceof Error ? err.name : 'network error';
}

/** How long the rest of a stream is read after its result before it is closed, in ms. */
const DRAIN_MS = 1000;

/** One invocation of the agent for one RunContext. */
export class AgentInvocation {
  /** The run capability's token: valid while this invocation runs. */
  readonly token = randomBytes(24).toString('base64url');
  private readonly ac = new AbortController();
  private applied = 0;
  /** The turn has its answer: only state, typing and result may follow until a pull takes a message. */
  private answered = false;
  /** Text streamed since the last recorded step: kept as a partial answer on a stop. */
  private partial = '';
  private state: Record<string, unknown> = {};
  private ended = false;
  /** The result arrived and the rest of the stream is being read off (`drain`). */
  private draining = false;
  private requested = false;
  private lock: Promise<unknown> = Promise.resolve();
  private waiters: Array<() => void> = [];
  private timer: NodeJS.Timeout | undefined;
  private watch: { code: AgentFailureCode; ms: number; detail: string } | undefined;

  constructor(
    private readonly ctx: RunContext,
    private readonly s: InvocationSettings,
    /** Sends the requests to the agent (a keep-alive pool). */
    private readonly send: HttpRequest,
    /** Base URL of this invocation's run endpoints; undefined when none are served. */
    private readonly capabilityUrl: string | undefined,
  ) {}

  /** Runs the invocation. Returns failures as results; throws only what the runtime must see (a lost run). */
  async run(): Promise<RunResult> {
    const { ctx } = this;
    if (ctx.stop.signal.aborted) return { outcome: 'completed' };
    const onAbort = () => this.ac.abort('stop');
    ctx.stop.signal.addEventListener('abort', onAbort, { once: true });
    try {
      return await this.exchange();
    } catch (err) {
      if (ctx.stop.signal.aborted) return await this.stopped();
      if (err instanceof AgentFailure) {
        ctx.logger.warn({ code: err.code, detail: err.detail }, 'agent invocation failed');
        return err.toResult();
      }
      throw err;
    } finally {
      this.disarm();
      this.ended = true;
      this.notify();
      ctx.stop.signal.removeEventListener('abort', onAbort);
      if (!this.draining) this.ac.abort('done'); // closes a stream the agent left open
    }
  }

  /**
   * After the result: reads the rest of the stream (ignored) so its connection goes back to the pool for
   * the next invocation; a stream still open after `DRAIN_MS` is closed.
   */
  private drain(lines: AsyncIterator<string>): void {
    this.draining = true;
    const timer = setTimeout(() => this.ac.abort('done'), DRAIN_MS);
    void (async () => {
      try {
        while (!(await lines.next()).done);
      } catch {
        // closed, or a line past the cap: either way the stream is done with
      } finally {
        clearTimeout(timer);
        this.ac.abort('done');
      }
    })();
  }

  /**
   * Takes steering for the agent: first waits until the `eventsSent` events
   * it wrote before asking are applied (a pull is a boundary in the stream's
   * order), then pulls through the run.
   * @throws InvocationEndedError once the invocation has ended.
   */
  async pull(mode: SteeringMode, eventsSent: number): Promise<AgentMessage[]> {
    while (this.applied < eventsSent && !this.ended) await new Promise<void>((resolve) => this.waiters.push(resolve));
    return this.locked(async () => {
      if (this.ended) throw new InvocationEndedError();
      const got = await this.ctx.steering.pull(mode);
      if (got.length > 0) {
        this.answered = false; // a new turn: it needs an answer of its own
        this.partial = '';
      }
      this.touch(); // the agent was waiting for us, not idle
      return got.map(agentMessage);
    });
  }

  private async exchange(): Promise<RunResult> {
    const { ctx, s } = this;
    const stored = await ctx.state.get(STATE_KEY);
    this.state = isObject(stored) ? stored : {};
    const body = JSON.stringify(this.request());
    this.arm('connect-timeout', s.connectTimeoutMs, `no response within ${s.connectTimeoutMs} ms`);
    this.requested = true;
    let res: HttpResponse;
    try {
      res = await this.send(s.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: NDJSON, ...signatures.signedHeaders(s.secret, body) },
        body,
        signal: this.ac.signal,
      });
    } catch (err) {
      throw this.watchdogFailure() ?? new AgentFailure('unreachable', `request failed: ${networkError(err)}`);
    }
    if (!res.ok) {
      res.destroy();
      throw new AgentFailure('http-status', `the agent answered HTTP ${res.status}`);
    }
    const type = res.headers['content-type'] ?? '';
    if (!type.toLowerCase().startsWith(NDJSON)) {
      res.destroy();
      throw new AgentFailure('bad-content-type', `expected ${NDJSON}, got "${type.slice(0, 60)}"`);
    }
    this.arm('first-event-timeout', s.firstEventTimeoutMs, `no event within ${s.firstEventTimeoutMs} ms of the response`);
    const lines = ndjsonLines(res.body, s.maxEventBytes)[Symbol.asyncIterator]();
    for (;;) {
      let next: IteratorResult<string>;
      try {
        next = await lines.next();
      } catch (err) {
        throw this.readFailure(err);
      }
      if (next.done) break;
      this.disarm(); // applying an event is the runner's time, not the agent's
      if (next.value.trim() !== '') {
        const event = parseEvent(next.value);
        const result = await this.locked(() => this.apply(event));
        this.applied++;
        this.notify();
        if (result) {
          this.drain(lines);
          return result;
        }
      }
      this.arm('idle-timeout', s.idleTimeoutMs, `no event for ${s.idleTimeoutMs} ms`);
    }
    throw new AgentFailure('no-result', 'the stream ended without a result event');
  }

  /** Applies one valid event; returns the run result for a `result` event. */
  private async apply(event: AgentEvent): Promise<RunResult | undefined> {
    const { ctx, s } = this;
    const afterAnswer = () =>
      new AgentFailure('protocol-violation', `a ${event.type} event after the turn's answer (pull steering first, or end with a result)`);
    switch (event.type) {
      case 'text-delta':
        if (this.answered) throw afterAnswer();
        if (this.partial.length + event.text.length > s.maxMessageChars)
          throw new AgentFailure('message-too-long', `streamed text longer than ${s.maxMessageChars} characters`);
        this.partial += event.text;
        if (event.text) ctx.delivery.delta(event.text);
        return undefined;
      case 'message':
        if (this.answered) throw afterAnswer();
        if (event.text.length > s.maxMessageChars)
          throw new AgentFailure('message-too-long', `a message of ${event.text.length} characters; the cap is ${s.maxMessageChars}`);
        // The turn's answer: recorded first, then delivered (a takeover delivers it from the record).
        await ctx.record.step({
          messages: [{ role: 'assistant', content: [{ type: 'text', text: event.text }] }],
          finishReason: 'stop',
          ...(event.usage && { usage: event.usage }),
        });
        this.answered = true;
        this.partial = '';
        await ctx.delivery.message(event.text);
        return undefined;
      case 'step':
        if (this.answered) throw afterAnswer();
        if (!hasToolPart(event.messages))
          throw new AgentFailure('protocol-violation', 'a step must hold a tool call or a tool result; send the answer as a message event');
        await ctx.record.step({ messages: event.messages, finishReason: 'tool-calls', ...(event.usage && { usage: event.usage }) });
        this.partial = '';
        return undefined;
      case 'state': {
        const next = { ...this.state };
        if (event.value === null) delete next[event.key];
        else next[event.key] = event.value;
        const bytes = Buffer.byteLength(JSON.stringify(next));
        if (bytes > s.maxStateBytes) throw new AgentFailure('state-too-large', `the state would be ${bytes} bytes; the cap is ${s.maxStateBytes}`);
        await ctx.state.set(STATE_KEY, next);
        this.state = next;
        return undefined;
      }
      case 'typing':
        ctx.delivery.typing();
        return undefined;
      case 'result':
        if (event.outcome === 'failed') throw new AgentFailure('agent-failed', event.reason, event.message ?? NOTICES.agentFailed);
        return { outcome: 'completed' };
    }
  }

  /** After a stop, shutdown or lost run: cancel the agent's work and keep what it streamed (a stop only). */
  private async stopped(): Promise<RunResult> {
    const { ctx } = this;
    const stop = ctx.stop.requested();
    if (this.requested) void this.cancel(stop ?? (ctx.stop.signal.reason === 'lost' ? 'lost' : 'shutdown'));
    // As the local agent: a stop keeps what was said, marked partial; on shutdown the next attempt redoes the turn.
    const text = this.partial;
    if (text && stop)
      await this.locked(() =>
        ctx.record.step({ messages: [{ role: 'assistant', content: [{ type: 'text', text }] }], partial: true, finishReason: 'aborted' }),
      );
    return { outcome: 'completed' };
  }

  /** Sends the signed cancel request; never throws (the closed stream already told the agent). */
  private async cancel(reason: CancelRequest['reason']): Promise<void> {
    const { ctx, s } = this;
    const body = JSON.stringify({ protocol: PROTOCOL, type: 'cancel', run: this.runInfo(), reason } satisfies CancelRequest);
    try {
      const res = await this.send(s.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...signatures.signedHeaders(s.secret, body) },
        body,
        timeoutMs: s.connectTimeoutMs,
      });
      await res.discard();
      if (!res.ok) ctx.logger.warn({ status: res.status }, 'agent refused the cancel request');
    } catch (err) {
      ctx.logger.warn({ detail: networkError(err) }, 'cancel request to the agent failed');
    }
  }

  private request(): RunRequest {
    const { ctx, s } = this;
    return {
      protocol: PROTOCOL,
      type: 'run',
      run: this.runInfo(),
      inputs: ctx.inputs.map(agentMessage),
      history: ctx.history,
      state: this.state,
      ...(this.capabilityUrl !== undefined && { capability: { url: this.capabilityUrl, token: this.token } }),
      limits: { maxEventBytes: s.maxEventBytes, maxMessageChars: s.maxMessageChars, maxStateBytes: s.maxStateBytes },
    };
  }

  private runInfo() {
    // The three fields the protocol names, whatever else a hand-made context's `run` holds.
    const { id, conversationId, attempt } = this.ctx.run;
    return { id, conversationId, attempt };
  }

  /** Event application and pulls, one at a time. */
  private locked<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.lock.then(fn);
    this.lock = next.catch(() => undefined);
    return next;
  }

  private notify(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Ends the invocation with `code` unless something happens within `ms`. */
  private arm(code: AgentFailureCode, ms: number, detail: string): void {
    this.disarm();
    this.watch = { code, ms, detail };
    this.timer = setTimeout(() => this.ac.abort(new AgentFailure(code, detail)), ms);
  }

  private disarm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Restarts a running timeout (activity of the agent that is not an event). */
  private touch(): void {
    if (this.timer !== undefined && this.watch) this.arm(this.watch.code, this.watch.ms, this.watch.detail);
  }

  /** What a failed read of the stream means: a cap or a timeout of ours, a stop, or a broken connection. */
  private readFailure(err: unknown): unknown {
    if (err instanceof AgentFailure) return err;
    const timedOut = this.watchdogFailure();
    if (timedOut) return timedOut;
    return this.ctx.stop.signal.aborted ? err : new AgentFailure('stream-broken', `the event stream broke: ${networkError(err)}`);
  }

  private watchdogFailure(): AgentFailure | undefined {
    const reason: unknown = this.ac.signal.reason;
    return this.ac.signal.aborted && reason instanceof AgentFailure ? reason : undefined;
  }
}
