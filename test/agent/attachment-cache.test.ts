/**
 * The attachment fetch cache's size accounting: two runs fetching one file
 * at once (fetches in flight are shared within a run only) leave one entry,
 * counted once.
 */
import type { ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { AttachmentParts } from '../../plugins/local-agent/attachments.js';
import type { RunContext } from '../../runner/plugin.js';
import { userMessage } from '../../runner/projection.js';
import { createLogger } from '../../src/logger.js';
import type { FetchedFile } from '../../src/plugin/kit.js';
import type { MessageReceived, SeqEntry } from '../../src/record/entries.js';

const FILE = new Uint8Array(1000).fill(7);

const entry: SeqEntry<MessageReceived> = {
  seq: 1,
  v: 1,
  kind: 'message.received',
  at: 0,
  updateKey: 'telegram:1',
  sender: { id: 'u1', name: 'Ann' },
  text: 'look',
  attachments: [{ kind: 'image', ref: 'photo-1', mime: 'image/png' }],
} as SeqEntry<MessageReceived>;

/** A run's context as the cache sees it: its own signal, and a fetch that waits for `gate`. */
function runContext(gate: Promise<void>, fetched: { count: number }): RunContext {
  return {
    run: { id: 'run-1', conversationId: 'telegram:42', attempt: 1 },
    stop: { signal: new AbortController().signal, requested: () => undefined },
    logger: createLogger({ level: 'silent' }),
    features: {
      fetchAttachment: async (): Promise<FetchedFile> => {
        fetched.count++;
        await gate;
        return { data: FILE, mediaType: 'image/png' };
      },
    },
  } as unknown as RunContext;
}

describe('attachment cache', () => {
  it('counts a file once when two runs fetch it at the same time', async () => {
    const parts = new AttachmentParts({ cacheBytes: 10_000 });
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const fetched = { count: 0 };
    const prompt = (): ModelMessage[] => [userMessage(entry, false)];
    const both = Promise.all([parts.expand(runContext(gate, fetched), prompt(), [entry]), parts.expand(runContext(gate, fetched), prompt(), [entry])]);
    // Both fetches are under way before either ends.
    for (let i = 0; i < 100 && fetched.count < 2; i++) await new Promise((r) => setImmediate(r));
    expect(fetched.count).toBe(2);
    open();
    await both;
    expect(parts.cacheSize).toBe(FILE.byteLength);
    // A third run takes it from the cache; the size is unchanged.
    await parts.expand(runContext(Promise.resolve(), fetched), prompt(), [entry]);
    expect(fetched.count).toBe(2);
    expect(parts.cacheSize).toBe(FILE.byteLength);
  });
});
