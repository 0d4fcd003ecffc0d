/**
 * Splits an NDJSON byte stream into lines, refusing a line longer than the
 * event size cap before it is buffered whole (an agent cannot make the
 * runner hold an unbounded line in memory). Timeouts are the caller's.
 */
import { AgentFailure } from './failure.js';

const NL = 0x0a;

/**
 * Yields each line of `chunks` (UTF-8, without its `\n` or `\r\n`), blank
 * lines included: they are the protocol's keep-alives. A last line without
 * a newline is yielded when the stream ends.
 * @throws AgentFailure `event-too-large` when a line exceeds `maxLineBytes`.
 */
export async function* ndjsonLines(chunks: AsyncIterable<Uint8Array>, maxLineBytes: number): AsyncGenerator<string> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const tooLarge = () => new AgentFailure('event-too-large', `an event is longer than ${maxLineBytes} bytes`);
  for await (const chunk of chunks) {
    let buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    for (let nl = buf.indexOf(NL); nl !== -1; nl = buf.indexOf(NL)) {
      const head = buf.subarray(0, nl);
      if (pendingBytes + head.length > maxLineBytes) throw tooLarge();
      const line = pending.length > 0 ? Buffer.concat([...pending, head]) : head;
      pending = [];
      pendingBytes = 0;
      buf = buf.subarray(nl + 1);
      yield line.toString('utf8').replace(/\r$/, '');
    }
    if (buf.length > 0) {
      pendingBytes += buf.length;
      if (pendingBytes > maxLineBytes) throw tooLarge();
      pending.push(Buffer.from(buf)); // a copy: the stream may reuse its chunk
    }
  }
  if (pendingBytes > 0) yield Buffer.concat(pending).toString('utf8').replace(/\r$/, '');
}
