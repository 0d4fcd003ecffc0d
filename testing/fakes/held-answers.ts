/**
 * Answers a fake platform does the work of, then holds back: the message is
 * stored (the platform has it, the user sees it) but the client does not get
 * the answer until the test releases it, or never, when the client went away.
 * A test kills a runner at `done` to land exactly between the platform's
 * send and the runner's acknowledgement.
 */
import type { ServerResponse } from 'node:http';

/** A held answer, armed with a fake's `holdAnswer`. */
export interface HeldAnswer {
  /** Resolves once the call was done (its message stored) and its answer held. */
  readonly done: Promise<void>;
  /** Sends the held answer, if its client still waits for it. */
  release(): void;
}

interface Armed {
  matches(call: string): boolean;
  done(): void;
  released: Promise<void>;
}

/** The armed holds of one fake; a call is named as the fake likes (a method, `<verb> <path>`). */
export class AnswerHolds {
  private readonly armed: Armed[] = [];

  /** Holds the answer of the next call `matches` names, after it was done. */
  arm(matches: (call: string) => boolean): HeldAnswer {
    let done!: () => void;
    let release!: () => void;
    const answer: HeldAnswer = { done: new Promise<void>((r) => (done = r)), release: () => release() };
    this.armed.push({ matches, done, released: new Promise<void>((r) => (release = r)) });
    return answer;
  }

  /**
   * Whether the call named `call`, done and about to be answered on `res`, is
   * held: then `answer` runs once released, unless the client went away.
   */
  hold(call: string, res: ServerResponse, answer: () => void): boolean {
    const i = this.armed.findIndex((a) => a.matches(call));
    if (i < 0) return false;
    const [held] = this.armed.splice(i, 1);
    held!.done();
    void held!.released.then(() => {
      if (!res.writableEnded && !res.socket?.destroyed) answer();
    });
    return true;
  }
}
