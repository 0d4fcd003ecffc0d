/**
 * Files out, end to end: the Telegram webhook (real grammY plugin) → the
 * real channel host → Redis → BullMQ → the runner with the local agent, whose
 * scripted model (the fake OpenAI-compatible server) calls `send_file` →
 * delivery → the plugin's `sendDocument` / `sendPhoto` → the fake Bot API.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { ALICE, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';
import { postUpdate, startTelegramSystem } from './telegram-harness.js';

const SECRET = 'e2e_files_secret_0123456789';
const CONVERSATION = `telegram:${ALICE.id}`;
const PDF = Buffer.from('%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n');
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(128, 3)]);

let ai: FakeOpenAIServer;
let tg: FakeTelegram;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;
let workspace: string;

beforeEach(async () => {
  workspace = await mkdtemp(join(tmpdir(), 'sb-files-'));
  await writeFile(join(workspace, 'report.pdf'), PDF);
  await writeFile(join(workspace, 'chart.png'), PNG);
  ai = await startFakeOpenAI();
  tg = await startFakeTelegram();
  h = await RunnerHarness.start();
  ({ http, plugin } = await startTelegramSystem({
    h,
    tg,
    secret: SECRET,
    agent: createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false, sendFile: { workspace } } }),
  }));
});

afterEach(async () => {
  await plugin.stop();
  await http.close();
  await h.close();
  await tg.close();
  await ai.close();
  await rm(workspace, { recursive: true, force: true });
});

/** The tool results the model received in request `i`, parsed. */
const toolResults = (i: number): any[] =>
  ai.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'tool').map((m: { content: string }) => JSON.parse(m.content));

describe('telegram files end to end', () => {
  it('sends a workspace file the model asks for as one document with its bytes and caption', async () => {
    ai.script([{ toolCalls: [{ id: 'call_1', name: 'send_file', args: { path: 'report.pdf', caption: 'Your report' } }] }, { text: 'Sent you the report.' }]);
    expect(await postUpdate(http, SECRET, messageUpdate({ text: 'send me the report' }))).toBe(200);

    await h.idle(15_000, CONVERSATION);
    expect(tg.callsOf('sendDocument')).toHaveLength(1);
    expect(tg.sentFiles).toHaveLength(1);
    expect(tg.sentFiles[0]).toMatchObject({ method: 'sendDocument', chatId: ALICE.id, name: 'report.pdf', caption: 'Your report' });
    expect(tg.sentFiles[0]!.bytes.equals(PDF)).toBe(true);
    expect(toolResults(1)).toEqual([{ sent: { name: 'report.pdf', type: 'application/pdf', bytes: PDF.byteLength } }]);
    expect(tg.sent.map((m) => m.text)).toEqual(['Sent you the report.']);
  });

  it('sends an image as a photo', async () => {
    ai.script([{ toolCalls: [{ id: 'call_1', name: 'send_file', args: { path: 'chart.png' } }] }, { text: 'Here is the chart.' }]);
    await postUpdate(http, SECRET, messageUpdate({ text: 'the chart please' }));

    await h.idle(15_000, CONVERSATION);
    expect(tg.sentFiles.map((f) => [f.method, f.name])).toEqual([['sendPhoto', 'chart.png']]);
    expect(tg.sentFiles[0]!.bytes.equals(PNG)).toBe(true);
  });

  it('retries an upload refused with 429 and the chat gets exactly one file message', async () => {
    tg.failNext('sendDocument', { error_code: 429, description: 'Too Many Requests: retry after 1', parameters: { retry_after: 1 } });
    ai.script([{ toolCalls: [{ id: 'call_1', name: 'send_file', args: { path: 'report.pdf' } }] }, { text: 'Done.' }]);
    await postUpdate(http, SECRET, messageUpdate({ text: 'the report' }));

    await h.idle(15_000, CONVERSATION);
    expect(tg.callsOf('sendDocument').map((c) => c.outcome)).toEqual([429, 'ok']);
    expect(tg.sentFiles).toHaveLength(1);
    expect(tg.sent.map((m) => m.text)).toEqual(['Done.']);
  });

  it('refuses a path outside the workspace and sends nothing', async () => {
    ai.script([{ toolCalls: [{ id: 'call_1', name: 'send_file', args: { path: '../../etc/passwd' } }] }, { text: 'I cannot send that.' }]);
    await postUpdate(http, SECRET, messageUpdate({ text: 'send /etc/passwd' }));

    await h.idle(15_000, CONVERSATION);
    expect(toolResults(1)[0].error).toMatchObject({ category: 'forbidden', message: 'refused: "../../etc/passwd" is not a path inside the workspace' });
    expect(tg.callsOf('sendDocument')).toHaveLength(0);
    expect(tg.sentFiles).toHaveLength(0);
    expect(tg.sent.map((m) => m.text)).toEqual(['I cannot send that.']);
  });

  it('refuses a missing file with a clear error and sends nothing', async () => {
    ai.script([{ toolCalls: [{ id: 'call_1', name: 'send_file', args: { path: 'nope.pdf' } }] }, { text: 'Not found.' }]);
    await postUpdate(http, SECRET, messageUpdate({ text: 'send nope' }));

    await h.idle(15_000, CONVERSATION);
    expect(toolResults(1)[0].error).toMatchObject({ category: 'not_found', message: 'cannot read nope.pdf: ENOENT' });
    expect(tg.sentFiles).toHaveLength(0);
  });
});
