/**
 * Rich text, voice, video and stickers on Feishu / Lark, through the whole
 * system: the event pushed over the fake's long connection → the real
 * plugin → the host → Redis → the runner with the local agent, which
 * downloads what the message names (the real SDK's `im.messageResource.get`)
 * and gives it to the fake model, or has the fake speech-to-text API
 * transcribe a voice message. A content off its type's shape is ignored,
 * with a warning, writing nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTranscriptionModel } from '../../runner/model.js';
import type { ModelSettings } from '../../runner/plugin.js';
import {
  FEISHU_ANN,
  FEISHU_BOB,
  FEISHU_BOT_OPEN_ID,
  FEISHU_DM,
  FEISHU_GROUP,
  type FeishuMessageOptions,
  feishuMessageEvent,
} from '../../testing/fakes/feishu-events.js';
import type { FakeFeishu } from '../../testing/fakes/feishu-server.js';
import type { FakeOpenAIServer } from '../../testing/fakes/openai-server.js';
import { oggOpus, PNG } from '../helpers/media.js';
import type { RunnerHarness } from '../runner/harness.js';
import { type FeishuAgentWorld, type FeishuResources, startFeishuAgentWorld } from './feishu-harness.js';

const DM = `feishu:${FEISHU_DM}`;
const GROUP = `feishu:${FEISHU_GROUP}`;

let ai: FakeOpenAIServer;
let feishu: FakeFeishu;
let resources: FeishuResources;
let h: RunnerHarness;
let boot: FeishuAgentWorld['boot'];
let close: FeishuAgentWorld['close'];

/** A message of `type` with `content` (JSON as given, or an object to serialize), and `mentions` (the event's, by key). */
function contentEvent(
  type: string,
  messageId: string,
  content: unknown,
  over: Partial<FeishuMessageOptions> & { mentions?: Array<{ key: string; openId: string; name: string }> } = {},
) {
  const { mentions, ...options } = over;
  const event = feishuMessageEvent({ text: '', messageId, messageType: type, mentionBot: false, ...options });
  event.event.message.content = typeof content === 'string' ? content : JSON.stringify(content);
  if (mentions) event.event.message.mentions = mentions.map((m) => ({ key: m.key, id: { open_id: m.openId }, name: m.name, tenant_key: 'tenant0' }));
  return event;
}

const texts = () => feishu.sent.map((m) => m.text);
const lastUser = (i: number) => ai.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').at(-1);
const userText = (i: number): string => {
  const content = lastUser(i).content;
  return typeof content === 'string' ? content : content.find((p: { type: string }) => p.type === 'text').text;
};

beforeEach(async () => {
  ({ ai, feishu, resources, h, boot, close } = await startFeishuAgentWorld());
});
afterEach(() => close());

describe('feishu rich text (post)', () => {
  it("answers a formatted post in a group that mentions the bot once, the agent seeing its title, text, link with its URL and the other member's name", async () => {
    await boot();
    ai.script([{ text: 'Will do.' }]);
    const post = {
      title: 'Weekly plan',
      content: [
        [
          { tag: 'at', user_id: '@_user_1', user_name: 'steerbot', style: [] },
          { tag: 'text', text: ' please ', style: [] },
          { tag: 'text', text: 'check', style: ['bold'] },
          { tag: 'text', text: ' ' },
          { tag: 'a', text: 'the doc', href: 'https://example.com/doc', style: ['underline'] },
          { tag: 'text', text: ' with ' },
          { tag: 'at', user_id: '@_user_2', user_name: 'Bob' },
          { tag: 'emotion', emoji_type: 'SMILE' },
        ],
        [],
        [{ tag: 'text', text: 'Due Friday.', style: ['italic'] }],
        [{ tag: 'code_block', language: 'PYTHON', text: 'print("hi")\n' }],
      ],
    };
    const mentions = [
      { key: '@_user_1', openId: FEISHU_BOT_OPEN_ID, name: 'steerbot' },
      { key: '@_user_2', openId: FEISHU_BOB, name: 'Bob' },
    ];
    const event = contentEvent('post', 'om_post1', post, { chatType: 'group', mentions });
    expect(await feishu.push(event)).toMatchObject({ code: 200, data: { ok: true, result: 'ingested' } });
    // The platform delivers again: still one answer.
    expect(await feishu.push(event)).toMatchObject({ code: 200 });
    await feishu.waitUntil(() => feishu.sent.length === 1, 15_000, 'the answer');
    await h.idle(15_000, GROUP);

    const said = 'Weekly plan\nplease check the doc (https://example.com/doc) with @Bob[SMILE]\n\nDue Friday.\n```python\nprint("hi")\n```';
    expect((await h.entries('message.received', GROUP)).map((e) => [e.text, e.attachments, e.group])).toEqual([[said, undefined, true]]);
    expect(texts()).toEqual(['Will do.']);
    expect(ai.requests).toHaveLength(1);
    const seen = userText(0);
    expect(seen).toContain('please check the doc (https://example.com/doc) with @Bob');
    expect(seen).toContain('Weekly plan');
    expect(seen).not.toContain('steerbot');
  });

  it('gives the model an image inline in a post, requested as an image resource, with the text beside it', async () => {
    await boot();
    resources.add('om_post2', 'image', 'img_v3_inline', { data: PNG, contentType: 'image/png' });
    ai.script([{ text: 'A chart.' }]);
    // The send API's locale-wrapped shape is read too.
    const post = {
      zh_cn: { title: '', content: [[{ tag: 'text', text: 'what is this?' }], [{ tag: 'img', image_key: 'img_v3_inline', width: 10, height: 10 }]] },
    };
    await feishu.push(contentEvent('post', 'om_post2', post));
    await feishu.waitUntil(() => feishu.sent.length === 1, 15_000, 'the answer');
    await h.idle(15_000, DM);

    const parts: Array<Record<string, any>> = lastUser(0).content;
    expect(parts[0]).toEqual({ type: 'text', text: 'what is this?\n[attachment: image]' });
    expect(parts.find((p) => p.type === 'image_url')?.image_url.url).toBe(`data:image/png;base64,${PNG.toString('base64')}`);
    expect(resources.requests).toEqual([{ messageId: 'om_post2', key: 'img_v3_inline', type: 'image', status: 200 }]);
    expect((await h.entries('message.received', DM)).map((e) => e.attachments)).toEqual([[{ kind: 'image', ref: 'om_post2/image/img_v3_inline' }]]);
  });

  it('ignores a post whose content is off the shape, or names a key off the grammar, answering 200 and writing nothing', async () => {
    await boot();
    const bad = [
      'not json',
      { content: 'not paragraphs' },
      { zh_cn: { title: 'no content' } },
      { content: [[{ tag: 'text', text: 42 }]] },
      { content: [[{ tag: 'img', image_key: '../../auth/v3/app_access_token' }]] },
      { content: Array.from({ length: 3 }, () => Array.from({ length: 2000 }, () => ({ tag: 'hr' }))) },
    ];
    for (const [i, content] of bad.entries())
      expect(await feishu.push(contentEvent('post', `om_bad${i}`, content))).toMatchObject({ code: 200, data: { ignored: 'unreadable' } });
    // A post that says nothing once the bot's mention is removed is not taken either.
    const onlyMention = { content: [[{ tag: 'at', user_id: '@_user_1' }]] };
    const mentions = [{ key: '@_user_1', openId: FEISHU_BOT_OPEN_ID, name: 'steerbot' }];
    expect(await feishu.push(contentEvent('post', 'om_empty', onlyMention, { chatType: 'group', mentions }))).toMatchObject({ data: { ignored: 'empty' } });

    expect(await h.redis.keys(`${h.prefix}:{c:*`)).toEqual([]);
    expect(resources.requests).toEqual([]);
    expect(ai.requests).toHaveLength(0);
  });
});

describe('feishu voice, video and stickers', () => {
  it('transcribes a voice message for the model, downloaded as a file resource', async () => {
    await boot({ transcriptionModel: (s: ModelSettings) => createTranscriptionModel({ ...s, baseURL: ai.url }, 'whisper-1') });
    const voice = oggOpus(2000);
    resources.add('om_voice1', 'file', 'file_v3_voice', { data: voice, contentType: 'audio/ogg' });
    ai.script([{ text: 'Noted.' }]);
    await feishu.push(contentEvent('audio', 'om_voice1', { file_key: 'file_v3_voice', duration: 2000 }));
    await feishu.waitUntil(() => feishu.sent.length === 1, 15_000, 'the answer');
    await h.idle(15_000, DM);

    expect(texts()).toEqual(['Noted.']);
    expect(JSON.stringify(lastUser(0).content)).toContain('[voice message, transcribed: transcribed audio]');
    expect(ai.transcriptions).toHaveLength(1);
    expect(ai.transcriptions[0]!.includes(voice)).toBe(true);
    expect(resources.requests).toEqual([{ messageId: 'om_voice1', key: 'file_v3_voice', type: 'file', status: 200 }]);
    const [received] = await h.entries('message.received', DM);
    expect(received).toMatchObject({
      text: '',
      attachments: [{ kind: 'audio', ref: 'om_voice1/file/file_v3_voice', mime: 'audio/ogg' }],
      metadata: { durationMs: 2000 },
    });
  });

  it('records a video as a video attachment with its name and length, and answers with its placeholder', async () => {
    await boot();
    ai.script([{ text: 'A video.' }]);
    await feishu.push(contentEvent('media', 'om_video1', { file_key: 'file_v3_clip', image_key: 'img_v3_cover', file_name: 'clip.mp4', duration: 8000 }));
    await feishu.waitUntil(() => feishu.sent.length === 1, 15_000, 'the answer');
    await h.idle(15_000, DM);

    expect(lastUser(0).content).toBe('[attachment: video clip.mp4]');
    const [received] = await h.entries('message.received', DM);
    expect(received).toMatchObject({
      attachments: [{ kind: 'video', ref: 'om_video1/file/file_v3_clip', name: 'clip.mp4', mime: 'video/mp4' }],
      metadata: { durationMs: 8000 },
    });
  });

  it('answers a sticker, the model told "[sticker]" (the platform serves no sticker), and takes none in a group', async () => {
    await boot();
    ai.script([{ text: 'Nice one.' }]);
    await feishu.push(contentEvent('sticker', 'om_st1', { file_key: 'file_v3_sticker' }));
    await feishu.waitUntil(() => feishu.sent.length === 1, 15_000, 'the answer');
    await h.idle(15_000, DM);
    expect(lastUser(0).content).toBe('[sticker]');
    expect(texts()).toEqual(['Nice one.']);
    expect(resources.requests).toEqual([]);

    expect(await feishu.push(contentEvent('sticker', 'om_st2', { file_key: 'file_v3_sticker' }, { chatType: 'group' }))).toMatchObject({
      data: { ignored: 'not-addressed' },
    });
    expect(await h.entries('message.received', GROUP)).toEqual([]);
    expect((await h.entries('message.received', DM)).map((e) => e.sender.id)).toEqual([FEISHU_ANN]);
  });
});
