/**
 * The `send_file` tool on its own (plugins/local-agent/send-file.ts): what
 * it reads from the workspace or a URL, the type it gives a file, what it
 * refuses, and what the model hears of each delivery outcome. The delivery
 * is a recording sink; end to end it is tested in
 * test/channels/telegram-files-e2e.test.ts, attacks in test/security/send-file.test.ts.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type SendFileToolOptions, sendFileTools } from '../../plugins/local-agent/send-file.js';
import type { FileDelivery, RunContext } from '../../runner/plugin.js';
import { ToolFailure } from '../../runner/tools/agent-tool.js';
import type { OutboundFile } from '../../src/channel.js';
import { PDF } from '../helpers/media.js';

const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(16, 4)]);

let workspace: string;
let server: Server;
let base: string;
let handed: Array<{ file: OutboundFile; key: string }>;
let outcome: FileDelivery;

beforeAll(async () => {
  workspace = await mkdtemp(join(tmpdir(), 'sb-send-file-'));
  await writeFile(join(workspace, 'report.pdf'), PDF);
  await writeFile(join(workspace, 'fake.png'), 'not a png at all');
  await writeFile(join(workspace, 'page.html'), '<script>alert(1)</script>');
  await writeFile(join(workspace, 'big.txt'), 'x'.repeat(5000));
  server = createServer((req, res) => {
    if (req.url === '/chart') res.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await rm(workspace, { recursive: true, force: true });
});

beforeEach(() => {
  handed = [];
  outcome = { outcome: 'sent' };
});

/** A context whose delivery records the files handed to it. */
function context(withFile = true): RunContext {
  const delivery = {
    message: async () => undefined,
    delta: () => undefined,
    typing: () => undefined,
    ...(withFile && {
      file: async (file: OutboundFile, opts: { key: string }) => {
        handed.push({ file, key: opts.key });
        return outcome;
      },
    }),
  };
  return { delivery } as unknown as RunContext;
}

const call = { runId: 'r1', conversationId: 'c1', callId: 'call_1', attempt: 1, idempotencyKey: 'k_abc', rerun: false };

/** Runs send_file with `args`; resolves with its result, or the ToolFailure it threw. */
async function run(args: Record<string, unknown>, o: SendFileToolOptions = { workspace }): Promise<unknown> {
  const [tool] = sendFileTools(context(), o);
  try {
    return await tool!.execute(args, { signal: new AbortController().signal, call });
  } catch (err) {
    if (err instanceof ToolFailure) return { category: err.category, message: err.message };
    throw err;
  }
}

describe('send_file', () => {
  it('hands a workspace file to delivery with its type and caption, under the call key', async () => {
    expect(await run({ path: 'report.pdf', caption: 'Q3' })).toEqual({ sent: { name: 'report.pdf', type: 'application/pdf', bytes: PDF.byteLength } });
    expect(handed).toHaveLength(1);
    expect(handed[0]!.key).toBe('k_abc');
    expect(handed[0]!.file).toMatchObject({ name: 'report.pdf', mimeType: 'application/pdf', caption: 'Q3' });
    expect(Buffer.from(handed[0]!.file.bytes).equals(PDF)).toBe(true);
  });

  it('fetches a URL through the guarded fetch when its host is allowed, typed by its content type', async () => {
    expect(await run({ url: `${base}/chart` }, { urls: true, allow: ['127.0.0.1'] })).toEqual({
      sent: { name: 'chart.png', type: 'image/png', bytes: PNG.byteLength },
    });
  });

  it('refuses a URL when urls are off, and a private one when not allowed', async () => {
    expect(await run({ url: `${base}/chart` })).toEqual({ category: 'forbidden', message: 'refused: files cannot be sent from URLs here' });
    expect(await run({ url: `${base}/chart` }, { urls: true })).toMatchObject({ category: 'forbidden', message: expect.stringMatching(/^refused: /) });
    expect(handed).toEqual([]);
  });

  it('refuses types it does not send and content that does not match its extension', async () => {
    expect(await run({ path: 'page.html' })).toMatchObject({
      category: 'forbidden',
      message: expect.stringContaining('page.html is not a type that can be sent'),
    });
    expect(await run({ path: 'fake.png' })).toEqual({ category: 'forbidden', message: 'refused: the content of fake.png is not PNG' });
    expect(handed).toEqual([]);
  });

  it('refuses a file over maxBytes, and a call naming both or neither of path and url', async () => {
    expect(await run({ path: 'big.txt' }, { workspace, maxBytes: 1024 })).toMatchObject({
      category: 'invalid_input',
      message: expect.stringContaining('more than the 1024 bytes'),
    });
    expect(await run({ path: 'report.pdf', url: `${base}/chart` })).toMatchObject({ category: 'invalid_input' });
    expect(await run({})).toMatchObject({ category: 'invalid_input' });
    expect(handed).toEqual([]);
  });

  it('tells the model when the chat got a notice instead of the file, and fails when delivery failed', async () => {
    outcome = { outcome: 'too-large', maxBytes: 10 };
    expect(await run({ path: 'report.pdf' })).toMatchObject({ notSent: { name: 'report.pdf' }, reason: "it is larger than this chat's limit of 10 bytes" });
    outcome = { outcome: 'failed', error: 'HTTP 400' };
    expect(await run({ path: 'report.pdf' })).toEqual({ category: 'unavailable', message: 'the file was not sent: HTTP 400' });
  });

  it('is not offered without a source, or where the delivery cannot send files', () => {
    expect(sendFileTools(context(), {})).toEqual([]);
    expect(sendFileTools(context(), undefined)).toEqual([]);
    expect(sendFileTools(context(false), { workspace })).toEqual([]);
    expect(sendFileTools(context(), { workspace }).map((t) => [t.name, t.idempotent])).toEqual([['send_file', true]]);
  });
});
