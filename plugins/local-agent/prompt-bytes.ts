/**
 * The bytes of files one prompt may carry (`attachments.maxTotalBytes`),
 * shared by the fetches that fill it. A file reserves, from before its
 * request until it is done, as much as it may download (`maxBytes`, as far as
 * it is free: a platform's declared size is the sender's word), at least its
 * declared size; it then keeps what it weighs when it goes into the prompt
 * and gives the rest back. A file whose least is not free waits for the
 * fetches under way, and gets none when none is under way; its download is
 * cut at its reservation. So the files of a prompt never hold more than the
 * total at once, however many files its messages carry and whatever sizes
 * they declare.
 */
import type { ModelMessage } from 'ai';

/** The bytes left for one prompt's files. */
export class PromptBytes {
  private free: number;
  /** Fetches holding a share now. */
  private holding = 0;
  private readonly waiting: Array<() => void> = [];

  /** `free`: bytes the prompt may still take (the total less the files already in it). */
  constructor(free: number) {
    this.free = Math.max(0, free);
  }

  /**
   * Reserves `most` bytes, or as many as are free when fewer, but at least `least` (at most `most`): waits
   * while fetches under way hold what is missing of `least`. Returns the bytes reserved; undefined when
   * `least` cannot be had.
   */
  async take(least: number, most: number): Promise<number | undefined> {
    while (least > this.free && this.holding > 0) await new Promise<void>((wake) => this.waiting.push(wake));
    if (least > this.free) return undefined;
    const share = Math.max(least, Math.min(most, this.free));
    this.free -= share;
    this.holding++;
    return share;
  }

  /** Grows a share taken with `take` by `extra` bytes when they are free now (it never waits); false when they are not. */
  grow(extra: number): boolean {
    if (extra > this.free) return false;
    this.free -= extra;
    return true;
  }

  /** Ends a share taken with `take`: `kept` of its bytes stay taken (the file in the prompt), the rest are free again. */
  release(share: number, kept: number): void {
    this.free += share - Math.min(kept, share);
    this.holding--;
    for (const wake of this.waiting.splice(0)) wake();
  }
}

/** Bytes of the image and file parts `messages` already carry (earlier steered messages of the same run). Pure. */
export function bytesInPrompt(messages: readonly ModelMessage[]): number {
  let sum = 0;
  for (const m of messages) {
    if (m.role !== 'user' || typeof m.content === 'string') continue;
    for (const p of m.content) {
      const data = p.type === 'image' ? p.image : p.type === 'file' ? p.data : undefined;
      if (data instanceof Uint8Array) sum += data.byteLength;
    }
  }
  return sum;
}
