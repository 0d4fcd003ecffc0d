/**
 * One JSON document written a piece at a time. An object's members are
 * produced in order, each when the writer reaches it (a member may depend on
 * what an earlier one read: the runs summary on the record), and a long
 * array is written a page at a time, so neither the document nor a 100 000
 * entry record is ever one string. The pieces go to a Writable or an HTTP
 * response as they come; together they are valid JSON, one array item a line.
 * A piece may be empty: a step of a long read that writes nothing yet, so a
 * writer that stopped taking pieces stops the read there too.
 */
import { once } from 'node:events';
import type { Writable } from 'node:stream';

/** A JSON value given as its text in pieces (a streamed array or object). */
export class Streamed {
  constructor(readonly chunks: AsyncIterable<string>) {}
}

/**
 * One member of a streamed object: its name and a function giving its value
 * when the writer gets to it: a JSON value, `Streamed` pieces, or undefined
 * (the member is left out).
 */
export type Member = readonly [name: string, value: () => unknown];

/** The pieces of an object with `members`, in order. */
export async function* streamObject(members: Iterable<Member>): AsyncGenerator<string> {
  let first = true;
  yield '{';
  for (const [name, value] of members) {
    const v = await value();
    if (v === undefined) continue;
    yield `${first ? '' : ','}\n${JSON.stringify(name)}:`;
    first = false;
    if (v instanceof Streamed) yield* v.chunks;
    else yield JSON.stringify(v);
  }
  yield '\n}';
}

/** An array whose items (JSON values) come in pages: one piece per page, one item per line. */
export function arrayOfPages(pages: AsyncIterable<readonly unknown[]>): Streamed {
  return new Streamed(
    (async function* () {
      let first = true;
      yield '[';
      for await (const page of pages) {
        if (page.length === 0) continue;
        yield `${first ? '\n' : ',\n'}${page.map((item) => JSON.stringify(item)).join(',\n')}`;
        first = false;
      }
      yield first ? ']' : '\n]';
    })(),
  );
}

/** An array whose items are themselves streamed (each a nested document). */
export function arrayOfStreams(items: AsyncIterable<Streamed>): Streamed {
  return new Streamed(
    (async function* () {
      let first = true;
      yield '[';
      for await (const item of items) {
        yield first ? '\n' : ',\n';
        first = false;
        yield* item.chunks;
      }
      yield first ? ']' : '\n]';
    })(),
  );
}

/**
 * Writes `chunks` to `out` as they come, waiting for `drain` when it is full,
 * so the reader is never further ahead than the writer's buffer. Does not end
 * `out` (stdout must stay open). Throws the first error of either side.
 */
export async function writeChunks(chunks: AsyncIterable<string>, out: Writable): Promise<void> {
  let failed: unknown;
  const onError = (err: unknown) => {
    failed ??= err;
  };
  out.on('error', onError);
  try {
    for await (const chunk of chunks) {
      if (failed !== undefined) throw failed;
      // An empty piece is a reader's step (a survey page): nothing to write.
      if (chunk === '') continue;
      if (!out.write(chunk)) await once(out, 'drain');
    }
    if (failed !== undefined) throw failed;
  } finally {
    out.off('error', onError);
  }
}
