/**
 * Files both ways over real mail servers: an attachment of alice's mail
 * reaches the agent (its bytes downloaded over IMAP when the prompt is
 * built), and a file the agent sends arrives as an attachment of a reply in
 * the thread; a long answer arrives whole.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { idPart } from '../../plugins/email/normalize.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { createSpeechModel } from '../../runner/model.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type MailServers, startMailServers } from '../../testing/fakes/mail-servers.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';
import { mailToBot, repliesIn, startEmailSystem, untilReplies } from './email-harness.js';

let servers: MailServers;
let ai: FakeOpenAIServer;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;
let workspace: string;

const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
const PDF = Buffer.from('%PDF-1.4\n% a report\n%%EOF\n');
const conversation = (root: string) => `email:${idPart(root)}`;

async function start(spoken = false): Promise<void> {
  const settings = { provider: 'openai-compatible' as const, name: 'm', baseURL: ai.url, apiKey: 'k', contextWindow: 128_000, outputReserve: 4000 };
  const voice = { model: createSpeechModel(settings, 'gpt-4o-mini-tts', 'agents.local-agent.voice.model'), replies: 'always' as const };
  const agent = createLocalAgentPlugin({
    model: fakeModel(ai.url),
    builtins: { currentTime: false, sendFile: { workspace } },
    ...(spoken && { voice }),
  });
  ({ http, plugin } = await startEmailSystem({ h, servers, agent }));
}

beforeAll(async () => {
  servers = await startMailServers();
});

afterAll(async () => {
  await servers?.stop();
});

beforeEach(async () => {
  ai = await startFakeOpenAI();
  h = await RunnerHarness.start();
  workspace = await mkdtemp(join(tmpdir(), 'sb-email-'));
  await writeFile(join(workspace, 'report.pdf'), PDF);
});

afterEach(async () => {
  await plugin?.stop();
  await http?.close();
  await h.close();
  await ai.close();
  await rm(workspace, { recursive: true, force: true });
});

describe('email files', () => {
  it('passes an image attached to a mail to the agent as an image, fetched over IMAP', async () => {
    await start();
    ai.script([{ text: 'A nice chart.' }]);
    const id = await mailToBot(servers, { text: 'what is this?', attachments: [{ filename: 'chart.png', content: PNG, contentType: 'image/png' }] });
    await untilReplies(servers, id, 1);
    await h.idle(15_000, conversation(id));
    const [entry] = await h.entries('message.received', conversation(id));
    expect(entry!.attachments).toMatchObject([{ kind: 'image', name: 'chart.png', mime: 'image/png' }]);
    // Estimated from the encoded part (base64 with its line breaks): never below the bytes.
    expect(entry!.attachments![0]!.size).toBeGreaterThanOrEqual(PNG.byteLength);
    expect(entry!.attachments![0]!.ref).toMatch(/^imap:\d+:\d+:2$/);
    expect(JSON.stringify(ai.requests[0]!.body.messages)).toContain(PNG.toString('base64'));
  });

  it('sends a file the agent sends as an attachment, and a long reply whole in one mail (mail has no practical length limit)', async () => {
    await start();
    const long = Array.from({ length: 1500 }, (_, i) => `word${i}`).join(' ');
    expect(long.length).toBeGreaterThan(10_000);
    ai.script([{ toolCalls: [{ id: 'call_1', name: 'send_file', args: { path: 'report.pdf', caption: 'Your report' } }] }, { text: long }]);
    const id = await mailToBot(servers, { subject: 'Report', text: 'send me the report' });
    const replies = await untilReplies(servers, id, 2, 'the file and the answer');
    await h.idle(15_000, conversation(id));
    const withFile = replies.find((r) => r.attachments.length > 0)!;
    expect(withFile.text?.trim()).toBe('Your report');
    expect(withFile.subject).toBe('Re: Report');
    expect(withFile.attachments.map((a) => [a.filename, a.contentType, Buffer.compare(a.content, PDF)])).toEqual([['report.pdf', 'application/pdf', 0]]);
    const answer = replies.find((r) => r.attachments.length === 0)!;
    expect(answer.text?.trim().split(/\s+/)).toEqual(long.split(' '));
    expect(await repliesIn(servers, id)).toHaveLength(2);
  });

  it('sends a spoken reply as an OGG audio attachment in the thread, after the answer as text', async () => {
    await start(true);
    ai.script([{ text: 'The train leaves at nine.' }]);
    const id = await mailToBot(servers, { subject: 'Train', text: 'when does the train leave?' });
    const replies = await untilReplies(servers, id, 2, 'the answer and its spoken form');
    await h.idle(15_000, conversation(id));
    // The mail servers may deliver the two in either order; the spoken one answers the text one (the thread's chain).
    const text = replies.find((r) => r.attachments.length === 0)!;
    const spoken = replies.find((r) => r.attachments.length === 1)!;
    expect(text.text?.trim()).toBe('The train leaves at nine.');
    expect(spoken.inReplyTo).toBe(text.messageId);
    const [audio] = spoken.attachments;
    expect([audio!.filename, audio!.contentType, audio!.content.toString()]).toEqual(['reply.ogg', 'audio/ogg', 'OggSThe train leaves at nine.']);
    expect(ai.speeches).toEqual([expect.objectContaining({ input: 'The train leaves at nine.', response_format: 'opus' })]);
    expect(await repliesIn(servers, id)).toHaveLength(2);
  });
});
