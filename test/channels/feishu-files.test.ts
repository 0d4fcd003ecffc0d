/**
 * Files, images, voice and status reactions on Feishu / Lark: the real
 * plugin's outbound side (unstarted, as a runner uses it) through the real
 * SDK's client against the fake open platform — the multipart upload, then
 * an image / file / audio message naming its key and the caption after it,
 * directly and through a run's delivery — and end to end through the whole
 * system (long connection → host → Redis → runner → delivery): a spoken
 * reply, and the reactions on the person's message. The record of the bot's
 * reactions is read back from Redis: bounded, and what keeps a repeated
 * status from adding a second reaction.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createFeishuPlugin, type FeishuConfigInput } from '../../plugins/feishu/channel.js';
import { FEISHU_FILE_MAX_BYTES, FEISHU_IMAGE_MAX_BYTES, uploadOf } from '../../plugins/feishu/files.js';
import { reactionsKey, reactionsOrderKey } from '../../plugins/feishu/keys.js';
import { uuidOf } from '../../plugins/feishu/outbound.js';
import { FEISHU_REACTIONS_KEPT } from '../../plugins/feishu/reactions.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import { createSpeechModel } from '../../runner/model.js';
import type { ChannelOutbound } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { FEISHU_DM, FEISHU_GROUP, FEISHU_TEST, feishuMessageEvent } from '../../testing/fakes/feishu-events.js';
import { type FakeFeishu, startFakeFeishu } from '../../testing/fakes/feishu-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { oggOpus, PDF, PNG } from '../helpers/media.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { fakeModel, RunnerHarness, waitFor } from '../runner/harness.js';
import { type FeishuSystem, startFeishuSystem } from './feishu-harness.js';

const logger = createLogger({ level: 'silent' });
const CID = `feishu:${FEISHU_DM}`;

describe('feishu files out (the outbound side)', () => {
  let feishu: FakeFeishu;
  let redis: Redis;
  let prefix: string;
  let outbound: ChannelOutbound;

  beforeEach(async () => {
    feishu = await startFakeFeishu();
    redis = new Redis(redisUrl());
    prefix = testPrefix();
    outbound = createFeishuPlugin({ ...FEISHU_TEST, domain: feishu.url, rateLimitRetryMs: 100 }, { logger, redis, prefix }).outbound;
  });
  afterEach(async () => {
    await feishu.close();
    await cleanupPrefix(redis, prefix);
    await redis.quit();
  });

  const delivery = (runId: string, conversationId = CID) =>
    new RunDelivery({ client: redis, prefix, conversationId, runId, resolve: () => outbound, logger, sleep: async () => undefined });
  const fileMessages = () => feishu.sent.filter((m) => m.media !== undefined);

  it('uploads a document as a pdf file and sends a file message naming its key, then the caption, each under its own uuid', async () => {
    const { messageId } = await outbound.sendFile!(
      CID,
      { name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF, caption: 'Q3 report' },
      { deliveryKey: 'r1:f:0' },
    );

    expect(feishu.uploads).toHaveLength(1);
    expect(feishu.uploads[0]).toMatchObject({ kind: 'file', fileType: 'pdf', fileName: 'report.pdf' });
    expect(feishu.uploads[0]!.data.equals(PDF)).toBe(true);
    expect(feishu.sent.map((m) => [m.msgType, m.text])).toEqual([
      ['file', ''],
      ['text', 'Q3 report'],
    ]);
    expect(feishu.sent[0]).toMatchObject({ id: messageId, chatId: FEISHU_DM, uuid: uuidOf('r1:f:0') });
    expect(feishu.sent[0]!.media!.key).toBe(feishu.uploads[0]!.key);
    expect(feishu.sent[1]!.uuid).toBe(uuidOf('r1:f:0:caption'));
    expect(outbound.maxFileBytes).toBe(FEISHU_FILE_MAX_BYTES);
  });

  it('uploads an image as a message image and sends an image message naming its image_key', async () => {
    await outbound.sendFile!(CID, { name: 'chart.png', mimeType: 'image/png', bytes: PNG });
    expect(feishu.uploads).toEqual([expect.objectContaining({ kind: 'image', imageType: 'message' })]);
    expect(fileMessages().map((m) => m.msgType)).toEqual(['image']);
    expect(fileMessages()[0]!.media!.data.equals(PNG)).toBe(true);
  });

  it('sends a spoken reply as an audio message of an opus upload with its duration in ms', async () => {
    const ogg = oggOpus(2500);
    await outbound.sendFile!(CID, { name: 'reply.ogg', mimeType: 'audio/ogg', bytes: ogg, voice: true });
    expect(feishu.uploads).toEqual([expect.objectContaining({ kind: 'file', fileType: 'opus', fileName: 'reply.ogg', duration: 2500 })]);
    expect(feishu.sent.map((m) => m.msgType)).toEqual(['audio']);
    expect(feishu.sent[0]!.media!.data.equals(ogg)).toBe(true);
  });

  it('types uploads by their media type, and sends an image over 10 MB or of a type the image API refuses as a file', () => {
    const file = (mimeType: string, size = 10) => ({ name: 'f', mimeType, bytes: new Uint8Array(size) });
    expect(uploadOf(file('application/vnd.openxmlformats-officedocument.wordprocessingml.document'))).toMatchObject({ fileType: 'doc' });
    expect(uploadOf(file('application/vnd.ms-excel'))).toMatchObject({ fileType: 'xls' });
    expect(uploadOf(file('application/vnd.openxmlformats-officedocument.presentationml.presentation'))).toMatchObject({ fileType: 'ppt' });
    expect(uploadOf(file('video/mp4'))).toMatchObject({ fileType: 'mp4', msgType: 'file' });
    expect(uploadOf(file('application/zip'))).toMatchObject({ fileType: 'stream', msgType: 'file' });
    expect(uploadOf(file('image/webp'))).toEqual({ kind: 'image' });
    expect(uploadOf(file('image/svg+xml'))).toMatchObject({ kind: 'file', fileType: 'stream' });
    expect(uploadOf(file('image/jpeg', FEISHU_IMAGE_MAX_BYTES + 1))).toMatchObject({ kind: 'file', fileType: 'stream' });
  });

  it('sends a file and its caption in a thread as replies in the thread to its root', async () => {
    feishu.rememberMessage(feishuMessageEvent({ text: 'root', chatType: 'group', messageId: 'om_root7' }));
    await outbound.sendFile!(`feishu:${FEISHU_GROUP}:om_root7`, { name: 'notes.pdf', mimeType: 'application/pdf', bytes: PDF, caption: 'the notes' });
    expect(feishu.sent.map((m) => ({ chatId: m.chatId, replyTo: m.replyTo, inThread: m.inThread, msgType: m.msgType }))).toEqual([
      { chatId: FEISHU_GROUP, replyTo: 'om_root7', inThread: true, msgType: 'file' },
      { chatId: FEISHU_GROUP, replyTo: 'om_root7', inThread: true, msgType: 'text' },
    ]);
  });

  it('retries an upload refused with 429, then a 500, through delivery and sends exactly one file message', async () => {
    feishu.failNext({ on: 'upload', status: 429, resetSeconds: 0 });
    feishu.failNext({ on: 'upload', status: 500 });
    const result = await delivery('run-429').file({ name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF }, { key: 'k_429' });
    expect(result).toEqual({ outcome: 'sent' });
    expect(feishu.calls.filter((c) => c.kind === 'upload').map((c) => c.status)).toEqual([429, 500, 200]);
    expect(fileMessages()).toHaveLength(1);
    expect(feishu.sent).toHaveLength(1);
  });

  it("reads a 200 upload answer's error code: a rate-limit code is a rate limit, another a refusal delivery does not retry", async () => {
    const png = { name: 'chart.png', mimeType: 'image/png', bytes: PNG };
    feishu.failNext({ on: 'upload', status: 200, code: 99991400 });
    await expect(outbound.sendFile!(CID, png)).rejects.toMatchObject({ status: 429, retryAfterMs: 100, platformCode: 99991400 });
    feishu.failNext({ on: 'upload', status: 200, code: 234001 });
    expect(await delivery('run-code').file(png, { key: 'k_code' })).toMatchObject({ outcome: 'failed' });
    expect(feishu.calls.filter((c) => c.kind === 'upload').map((c) => c.status)).toEqual([200, 200]);
    expect(feishu.sent).toHaveLength(0);
  });

  it('sends one clear message instead of a file over 30 MB, uploading nothing', async () => {
    const result = await delivery('run-big').file(
      { name: 'huge.zip', mimeType: 'application/zip', bytes: new Uint8Array(FEISHU_FILE_MAX_BYTES + 1) },
      { key: 'k_big' },
    );
    expect(result).toEqual({ outcome: 'too-large', maxBytes: FEISHU_FILE_MAX_BYTES });
    expect(feishu.uploads).toHaveLength(0);
    expect(feishu.sent.map((m) => m.text)).toEqual(["[file huge.zip could not be sent here: it is larger than this channel's limit of 30 MiB]"]);
  });

  it('makes a takeover resend under the same delivery key the same messages (an unused upload at most)', async () => {
    const file = { name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF, caption: 'again?' };
    const first = await outbound.sendFile!(CID, file, { deliveryKey: 'run-x:call-1:0' });
    const other = createFeishuPlugin({ ...FEISHU_TEST, domain: feishu.url }, { logger, redis, prefix }).outbound;
    const again = await other.sendFile!(CID, file, { deliveryKey: 'run-x:call-1:0', maybeSentSince: Date.now() - 1000 });

    expect(again.messageId).toBe(first.messageId);
    expect(feishu.uploads).toHaveLength(2);
    expect(feishu.sent.map((m) => m.msgType)).toEqual(['file', 'text']);
  });
});

describe('feishu status reactions (the outbound side)', () => {
  let feishu: FakeFeishu;
  let redis: Redis;
  let prefix: string;
  let outbound: ChannelOutbound;

  beforeEach(async () => {
    feishu = await startFakeFeishu();
    redis = new Redis(redisUrl());
    prefix = testPrefix();
    outbound = createFeishuPlugin({ ...FEISHU_TEST, domain: feishu.url, reactions: true }, { logger, redis, prefix }).outbound;
  });
  afterEach(async () => {
    await feishu.close();
    await cleanupPrefix(redis, prefix);
    await redis.quit();
  });

  /** Ann's messages the platform knows, by id. */
  const messages = (ids: string[]) => {
    for (const messageId of ids) feishu.rememberMessage(feishuMessageEvent({ text: 'hi', messageId }));
    return ids;
  };
  const reactionCalls = () => feishu.calls.filter((c) => c.kind === 'react' || c.kind === 'unreact').length;

  it('keeps the record of the bot’s reactions bounded however many messages are answered, the newest kept', async () => {
    const ids = messages(Array.from({ length: FEISHU_REACTIONS_KEPT + 30 }, (_, i) => `om_many${String(i).padStart(3, '0')}`));
    for (const id of ids) {
      await outbound.react!(CID, id, 'taken');
      await outbound.react!(CID, id, 'answered');
    }

    expect(ids.filter((id) => feishu.reactionsOn(id).join() !== 'DONE')).toEqual([]);
    const fields = Object.keys(await redis.hgetall(reactionsKey(prefix, CID))).sort();
    // Each answer takes its OnIt off after adding DONE: one field under the bound is left.
    expect(fields).toEqual(ids.slice(-(FEISHU_REACTIONS_KEPT - 1)).map((id) => `${id}:DONE`));
    expect((await redis.zrange(reactionsOrderKey(prefix, CID), '0', '-1')).sort()).toEqual(fields);
  });

  it('adds nothing for a repeated status, from this process or a takeover’s, and still takes a failure off when answered', async () => {
    const [done, failing] = messages(['om_repeat1', 'om_repeat2']) as [string, string];
    await outbound.react!(CID, done, 'taken');
    await outbound.react!(CID, done, 'answered');
    const before = reactionCalls();
    const takeover = createFeishuPlugin({ ...FEISHU_TEST, domain: feishu.url, reactions: true }, { logger, redis, prefix }).outbound;
    await takeover.react!(CID, done, 'answered');
    await outbound.react!(CID, done, 'answered');
    expect(reactionCalls()).toBe(before);
    expect(feishu.reactionsOn(done)).toEqual(['DONE']);

    for (const status of ['taken', 'taken', 'failed', 'failed', 'taken', 'answered'] as const) await takeover.react!(CID, failing, status);
    expect(feishu.reactionsOn(failing)).toEqual(['DONE']);
    expect(Object.keys(await redis.hgetall(reactionsKey(prefix, CID))).sort()).toEqual([`${done}:DONE`, `${failing}:DONE`]);
  });
});

describe('feishu end to end: voice replies and status reactions', () => {
  let ai: FakeOpenAIServer;
  let feishu: FakeFeishu;
  let h: RunnerHarness;
  let system: FeishuSystem | undefined;

  beforeEach(async () => {
    ai = await startFakeOpenAI();
    feishu = await startFakeFeishu();
    h = await RunnerHarness.start({ followUpsOnFailure: 0 });
    system = undefined;
  });
  afterEach(async () => {
    await system?.plugin.stop();
    await system?.http.close();
    await h.close();
    await feishu.close();
    await ai.close();
  });

  async function boot(config: Partial<FeishuConfigInput>, voice = false): Promise<void> {
    const settings = { provider: 'openai-compatible' as const, name: 'm', baseURL: ai.url, apiKey: 'k', contextWindow: 128_000, outputReserve: 4000 };
    const agent = createLocalAgentPlugin({
      model: fakeModel(ai.url),
      builtins: { currentTime: false },
      maxRetries: 0,
      ...(voice && { voice: { model: createSpeechModel(settings, 'gpt-4o-mini-tts', 'agents.local-agent.voice.model'), voice: 'alloy', replies: 'always' } }),
    });
    system = await startFeishuSystem({ h, feishu, agent, config });
    await feishu.connected();
  }

  /** Ann's message `messageId`; resolves with its run's outcome. */
  async function ask(text: string, messageId: string): Promise<string> {
    const before = (await h.entries('run.started', CID)).length;
    expect(await feishu.push(feishuMessageEvent({ text, messageId }))).toMatchObject({ code: 200 });
    const started = await waitFor(
      async () => {
        const all = await h.entries('run.started', CID);
        return all.length > before && all.at(-1);
      },
      15_000,
      'run started',
    );
    return (await h.runEnded(started.run, 15_000, CID)).outcome;
  }

  it('answers as text, then once as an audio message of an opus upload reading it', async () => {
    await boot({}, true);
    ai.script([{ text: 'The train leaves at nine.' }]);
    expect(await ask('when does the train leave?', 'om_voice1')).toBe('completed');
    await feishu.waitUntil(() => feishu.sent.some((m) => m.msgType === 'audio'), 15_000, 'the audio message');
    await h.idle(15_000, CID);

    expect(feishu.sent.map((m) => m.msgType)).toEqual(['text', 'audio']);
    expect(feishu.sent[0]!.text).toBe('The train leaves at nine.');
    expect(feishu.uploads).toEqual([expect.objectContaining({ kind: 'file', fileType: 'opus', fileName: 'reply.ogg' })]);
    expect(feishu.sent[1]!.media!.data.toString()).toBe('OggSThe train leaves at nine.');
    expect(ai.speeches).toHaveLength(1);
  });

  it('shows OnIt when a run takes the message, then DONE alone once the answer was sent', async () => {
    await boot({ reactions: true });
    ai.script([{ text: 'Hello Ann.' }]);
    expect(await ask('hi', 'om_react1')).toBe('completed');
    // The answer's reaction is added first, then the taken one is taken off.
    await feishu.waitUntil(() => feishu.calls.some((c) => c.kind === 'unreact'), 10_000, 'the taken reaction taken off');

    expect(feishu.reactionsOn('om_react1')).toEqual(['DONE']);
    const order = feishu.calls.map((c) => c.kind).filter((k) => k !== 'upload');
    expect(order).toEqual(['react', 'send', 'react', 'unreact']);
    // After the run the record holds the answer's reaction alone, in its order too.
    await waitFor(async () => (await h.redis.zcard(reactionsOrderKey(h.prefix, CID))) === 1, 10_000, 'the taken reaction forgotten');
    expect(Object.keys(await h.redis.hgetall(reactionsKey(h.prefix, CID)))).toEqual(['om_react1:DONE']);
  });

  it('shows the configured emoji type when the run fails without an answer', async () => {
    await boot({ reactions: { failed: 'CRY' } });
    ai.script([{ error: { status: 400, message: 'bad request', type: 'invalid_request_error' } }]);
    expect(await ask('hi', 'om_react2')).toBe('failed');
    await feishu.waitUntil(() => feishu.calls.some((c) => c.kind === 'unreact'), 10_000, 'the taken reaction taken off');
    expect(feishu.reactionsOn('om_react2')).toEqual(['CRY']);
    expect(feishu.calls.filter((c) => c.kind === 'react' || c.kind === 'unreact').map((c) => c.kind)).toEqual(['react', 'react', 'unreact']);
  });

  it('are best effort: a refused reaction does not stop the answer', async () => {
    await boot({ reactions: true });
    feishu.failNext({ on: 'reaction', status: 400, code: 231001 }, 2);
    ai.script([{ text: 'Answered anyway.' }]);
    expect(await ask('hi', 'om_react4')).toBe('completed');
    await feishu.waitUntil(() => feishu.calls.filter((c) => c.kind === 'react').length >= 2, 10_000, 'both reactions tried');
    expect(feishu.sent.map((m) => m.text)).toEqual(['Answered anyway.']);
    expect(feishu.reactionsOn('om_react4')).toEqual([]);
  });

  it('are off unless configured', async () => {
    await boot({});
    ai.script([{ text: 'Plain.' }]);
    expect(await ask('hi', 'om_react3')).toBe('completed');
    await feishu.waitUntil(() => feishu.sent.length >= 1, 10_000, 'the reply');
    expect(feishu.calls.filter((c) => c.kind === 'react' || c.kind === 'unreact')).toEqual([]);
  });
});
