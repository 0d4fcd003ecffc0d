/**
 * The stream watchdog: aborts a model call whose stream has said nothing for
 * `idleMs`. A provider that stops streaming (a hung connection, an overloaded
 * server holding the response) would otherwise hold the conversation until
 * someone sends `/stop`. Waiting for response headers counts as silence; time
 * spent running the step's tools does not (the model is not expected to speak
 * then).
 */
import { childController } from 'steerbot/plugin';

/** Why the watchdog aborted a call (the abort reason of its signal). */
export class StreamIdleTimeout extends Error {
  constructor(readonly idleMs: number) {
    super(`the model stream was silent for ${idleMs} ms`);
    this.name = 'StreamIdleTimeout';
  }
}

/** One model call's watchdog; `stop()` it once the stream is read. */
export class StreamWatchdog {
  /** The signal to give the model call: the run's signal or the watchdog's abort. */
  readonly signal: AbortSignal;
  private readonly ac: AbortController;
  /** Unhooks the call's signal from the run's (`stop()`): one model call after another leaves nothing on the run's signal. */
  private readonly unlink: () => void;
  private timer: NodeJS.Timeout | undefined;
  private readonly openToolCalls = new Set<string>();
  private stopped = false;

  /** `idleMs` <= 0 disables the watchdog. */
  constructor(
    private readonly idleMs: number,
    parent: AbortSignal,
  ) {
    ({ controller: this.ac, unlink: this.unlink } = childController(parent));
    this.signal = this.ac.signal;
    this.arm();
  }

  /** True when the watchdog aborted the call. */
  get fired(): boolean {
    return this.signal.reason instanceof StreamIdleTimeout;
  }

  /** Reports one stream part: any part is a sign of life; tool calls pause the clock until their results arrive. */
  part(p: { type: string; toolCallId?: string }): void {
    if (p.type === 'tool-call' && p.toolCallId !== undefined) this.openToolCalls.add(p.toolCallId);
    else if ((p.type === 'tool-result' || p.type === 'tool-error' || p.type === 'tool-output-denied') && p.toolCallId !== undefined)
      this.openToolCalls.delete(p.toolCallId);
    this.arm();
  }

  /** Stops the clock (the stream ended, or failed). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.unlink();
  }

  private arm(): void {
    clearTimeout(this.timer);
    if (this.stopped || this.idleMs <= 0 || this.openToolCalls.size > 0 || this.signal.aborted) return;
    this.timer = setTimeout(() => this.ac.abort(new StreamIdleTimeout(this.idleMs)), this.idleMs);
    this.timer.unref();
  }
}
