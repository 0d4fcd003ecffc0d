/**
 * Media through the whole system on Matrix: a person's image or voice
 * message in a room → the fake homeserver's `/sync` → the real plugin →
 * the channel host → Redis → the runner with the local agent, which
 * downloads the file (authenticated media, the bot's token) and gives it to
 * the fake model; a spoken reply goes back as a voice message. Bad `mxc://`
 * URIs and oversized files are refused before anything is downloaded.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin, type LocalAgentConfig } from '../../plugins/local-agent/index.js';
import { createSpeechModel, createTranscriptionModel } from '../../runner/model.js';
import type { ModelSettings } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { InvalidInputError } from '../../src/errors.js';
import { type FakeMatrix, MATRIX_ALICE, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { oggOpus } from '../helpers/media.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';
import { startMatrixSystem, untilSyncing } from './matrix-harness.js';

const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(64, 7)]);

let ai: FakeOpenAIServer;
let matrix: FakeMatrix;
let h: RunnerHarness;
let http: HttpServer | undefined;
let plugin: ChannelPlugin | undefined;
let room: string;
let cid: string;

async function start(extra: Partial<LocalAgentConfig> = {}): Promise<void> {
  const agent = createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false }, maxRetries: 0, ...extra });
  ({ http, plugin } = await startMatrixSystem({ h, matrix, agent }));
  await untilSyncing(matrix);
}

const downloads = () => matrix.calls.filter((c) => c.kind === 'download');
const lastUser = (i: number) => ai.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').at(-1);

beforeEach(async () => {
  ai = await startFakeOpenAI();
  matrix = await startFakeMatrix();
  h = await RunnerHarness.start();
  room = matrix.directRoom(MATRIX_ALICE);
  cid = `matrix:${room}`;
});

afterEach(async () => {
  await plugin?.stop();
  await http?.close();
  [plugin, http] = [undefined, undefined];
  await h.close();
  await matrix.close();
  await ai.close();
});

describe('matrix attachments in', () => {
  it("gives an image a person posts to the model with its bytes, downloaded once with the bot's token", async () => {
    await start();
    ai.script([{ text: 'A chart.' }]);
    const mxc = matrix.media.add(PNG, 'image/png');
    matrix.message(room, MATRIX_ALICE, 'what is this?', {
      msgtype: 'm.image',
      content: { url: mxc, filename: 'chart.png', info: { mimetype: 'image/png', size: PNG.length } },
    });
    await matrix.waitUntil(() => matrix.texts(room).length === 1, 15_000, 'the answer');
    await h.idle(15_000, cid);

    expect(matrix.texts(room)).toEqual(['A chart.']);
    const content = lastUser(0).content;
    expect(content[0].text).toContain('what is this?');
    const url: string = content[1].image_url.url;
    expect(url.startsWith('data:image/png;base64,')).toBe(true);
    expect(Buffer.from(url.slice(url.indexOf(',') + 1), 'base64').equals(PNG)).toBe(true);
    expect(downloads()).toHaveLength(1);
    const received = await h.entries('message.received', cid);
    expect(received.map((e) => e.attachments)).toEqual([[{ kind: 'image', ref: mxc, name: 'chart.png', mime: 'image/png', size: PNG.length }]]);
  });

  it('gives an image to the model when its declared size understates it, within the limits', async () => {
    await start();
    ai.script([{ text: 'A chart.' }]);
    const mxc = matrix.media.add(PNG, 'image/png');
    // `info.size` is whatever the sender's client wrote.
    matrix.message(room, MATRIX_ALICE, 'what is this?', {
      msgtype: 'm.image',
      content: { url: mxc, filename: 'chart.png', info: { mimetype: 'image/png', size: 10 } },
    });
    await matrix.waitUntil(() => matrix.texts(room).length === 1, 15_000, 'the answer');
    await h.idle(15_000, cid);

    const url: string = lastUser(0).content[1].image_url.url;
    expect(Buffer.from(url.slice(url.indexOf(',') + 1), 'base64').equals(PNG)).toBe(true);
    expect(downloads()).toHaveLength(1);
  });

  it('transcribes a voice message for the model', async () => {
    await start({ transcriptionModel: (s: ModelSettings) => createTranscriptionModel({ ...s, baseURL: ai.url }, 'whisper-1') });
    ai.script([{ text: 'Noted.' }]);
    const VOICE = oggOpus(2000, 'a voice note');
    const mxc = matrix.media.add(VOICE, 'audio/ogg');
    matrix.message(room, MATRIX_ALICE, 'Voice message', {
      msgtype: 'm.audio',
      content: { url: mxc, info: { mimetype: 'audio/ogg', size: VOICE.length }, 'org.matrix.msc3245.voice': {}, 'org.matrix.msc1767.audio': {} },
    });
    await matrix.waitUntil(() => matrix.texts(room).length === 1, 15_000, 'the answer');
    await h.idle(15_000, cid);

    expect(matrix.texts(room)).toEqual(['Noted.']);
    expect(JSON.stringify(lastUser(0).content)).toContain('[voice message, transcribed: transcribed audio]');
    expect(ai.transcriptions).toHaveLength(1);
    expect(ai.transcriptions[0]!.includes(VOICE)).toBe(true);
  });

  it('ignores a media message whose mxc:// URI is off the grammar, and downloads nothing', async () => {
    await start();
    ai.script([{ text: 'Hello.' }]);
    matrix.message(room, MATRIX_ALICE, 'x.png', { msgtype: 'm.image', content: { url: 'mxc://fake.test/../../_synapse/admin/v1/users' } });
    matrix.message(room, MATRIX_ALICE, 'hello');
    await matrix.waitUntil(() => matrix.texts(room).length === 1, 15_000, 'the answer');
    await h.idle(15_000, cid);

    expect((await h.entries('message.received', cid)).map((e) => e.text)).toEqual(['hello']);
    expect(downloads()).toHaveLength(0);
  });

  it('refuses to fetch a bad mxc:// URI or a file over the size limit, requesting nothing past the limit', async () => {
    await start();
    const fetchAttachment = plugin!.outbound.fetchAttachment!;
    for (const ref of ['mxc://fake.test/..%2F..%2Fadmin', 'mxc://fake.test/a/b', 'mxc://evil.test:99999999/id', 'https://fake.test/x', 'mxc://fake.test/'])
      await expect(fetchAttachment({ kind: 'file', ref }, { maxBytes: 1000 })).rejects.toBeInstanceOf(InvalidInputError);
    expect(downloads()).toHaveLength(0);

    const mxc = matrix.media.add(Buffer.alloc(5000, 1), 'application/zip');
    await expect(fetchAttachment({ kind: 'file', ref: mxc, size: 5000 }, { maxBytes: 1000 })).rejects.toBeInstanceOf(InvalidInputError);
    expect(downloads()).toHaveLength(0); // the declared size was enough
    // The event's size may lie: the download stops past the limit.
    await expect(fetchAttachment({ kind: 'file', ref: mxc, size: 10 }, { maxBytes: 1000 })).rejects.toBeInstanceOf(InvalidInputError);
    expect(downloads()).toHaveLength(1);
    expect((await fetchAttachment({ kind: 'file', ref: mxc }, { maxBytes: 5000 })).data.byteLength).toBe(5000);
  });
});

describe('matrix spoken replies', () => {
  it('sends the answer as text, then once as an m.audio voice message reading it', async () => {
    const model = createSpeechModel(
      { provider: 'openai-compatible', name: 'm', baseURL: ai.url, apiKey: 'k', contextWindow: 128_000, outputReserve: 4000 },
      'gpt-4o-mini-tts',
      'agents.local-agent.voice.model',
    );
    await start({ voice: { model, voice: 'alloy', replies: 'always' } });
    ai.script([{ text: 'The meeting is at ten.' }]);
    matrix.message(room, MATRIX_ALICE, 'when is the meeting?');
    await matrix.waitUntil(() => matrix.sent.some((e) => e.content.msgtype === 'm.audio'), 15_000, 'the voice message');
    await h.idle(15_000, cid);

    expect(matrix.sent.map((e) => e.content.msgtype)).toEqual(['m.text', 'm.audio']);
    expect(matrix.sent[1]!.content).toMatchObject({ 'org.matrix.msc3245.voice': {}, 'org.matrix.msc1767.audio': {}, info: { mimetype: 'audio/ogg' } });
    expect(matrix.media.uploads).toHaveLength(1);
    expect(matrix.media.uploads[0]!.data.toString()).toBe('OggSThe meeting is at ten.');
  });
});
