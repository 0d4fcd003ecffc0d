/**
 * What a Feishu / Lark message says, by its type (pure): rich text read in
 * either shape, its elements, its bounds; voice, video and sticker
 * contents; and the warning a content off its shape leaves, with nothing
 * handed to the host.
 */
import { describe, expect, it } from 'vitest';
import { readBody, STICKER_TEXT } from '../../plugins/feishu/content.js';
import { messageEventSchema } from '../../plugins/feishu/event-schema.js';
import { FeishuInbound } from '../../plugins/feishu/inbound.js';
import { POST_MAX_ATTACHMENTS, readPost } from '../../plugins/feishu/post.js';
import type { ChannelHost } from '../../src/channel.js';
import { FEISHU_BOT_OPEN_ID, feishuMessageEvent } from '../../testing/fakes/feishu-events.js';
import { captureLogger } from './discord-harness.js';

const o = { messageId: 'om_1', mentions: [{ key: '@_user_1', openId: FEISHU_BOT_OPEN_ID, name: 'bot' }], botOpenId: FEISHU_BOT_OPEN_ID };

/** The `im.message.receive_v1` of a message of `type` with `content`, as the dispatcher hands it over. */
function event(type: string, content: unknown) {
  const e = feishuMessageEvent({ text: '', messageId: 'om_1', messageType: type, mentionBot: false });
  e.event.message.content = JSON.stringify(content);
  return messageEventSchema.parse({ ...e.header, ...e.event });
}

describe('feishu rich text', () => {
  // `/\n+$/` on a run of newlines not at the end took 7 s for 100 000 of them; the timeout fails when the thread is held.
  it('fences a code block of 200 000 newlines and a character at once, its trailing newlines trimmed', { timeout: 2000 }, () => {
    const text = `${'\n'.repeat(200_000)}x\n\n`;
    const body = { title: '', content: [[{ tag: 'code_block', language: 'sh', text }]] };
    expect(readPost(body, o)).toEqual({ text: `\`\`\`sh\n${'\n'.repeat(200_000)}x\n\`\`\`` });
  });

  it('reads the locale-wrapped shape (zh_cn first) as the unwrapped one', () => {
    const body = { title: 'T', content: [[{ tag: 'text', text: 'hello' }]] };
    expect(readPost(body, o)).toEqual({ text: 'T\nhello' });
    expect(readPost({ en_us: { title: 'E', content: [[{ tag: 'text', text: 'en' }]] }, zh_cn: body }, o)).toEqual({ text: 'T\nhello' });
    expect(readPost({ ja_jp: { content: [[{ tag: 'text', text: 'ja' }]] } }, o)).toEqual({ text: 'ja' });
  });

  it('shows a link by its text and URL (once when the text is the URL), @all, a rule, and skips tags it does not know', () => {
    const content = [
      [
        { tag: 'a', text: 'docs', href: 'https://x.test/d' },
        { tag: 'text', text: ' ' },
        { tag: 'a', text: 'https://x.test/e', href: 'https://x.test/e' },
        { tag: 'unknown', text: 'hidden' },
        { tag: 'at', user_id: 'all', user_name: 'Everyone' },
        { tag: 'at', user_id: '@_user_9', user_name: 'Line\nbreak' },
      ],
      [{ tag: 'hr' }],
      [{ tag: 'text', text: 'after' }],
    ];
    expect(readPost({ content }, o)).toEqual({ text: 'docs (https://x.test/d) https://x.test/e@all@Line break\n---\nafter' });
  });

  it(`keeps the first ${POST_MAX_ATTACHMENTS} images and videos of a post, videos as file resources`, () => {
    const images = Array.from({ length: POST_MAX_ATTACHMENTS + 3 }, (_, i) => [{ tag: 'img', image_key: `img_${i}` }]);
    const read = readPost({ content: [[{ tag: 'media', file_key: 'file_v', image_key: 'img_cover' }], ...images] }, o);
    expect(read).toMatchObject({ text: '' });
    const attachments = 'attachments' in read ? (read.attachments ?? []) : [];
    expect(attachments).toHaveLength(POST_MAX_ATTACHMENTS);
    expect(attachments[0]).toEqual({ kind: 'video', ref: 'om_1/file/file_v' });
    expect(attachments[1]).toEqual({ kind: 'image', ref: 'om_1/image/img_0' });
  });
});

describe('feishu voice, video and sticker contents', () => {
  it('reads a voice message as Ogg audio by its file key, a strange duration dropped rather than the message', () => {
    expect(readBody(event('audio', { file_key: 'file_a', duration: 1500 }), FEISHU_BOT_OPEN_ID)).toEqual({
      text: '',
      attachments: [{ kind: 'audio', ref: 'om_1/file/file_a', mime: 'audio/ogg' }],
      metadata: { durationMs: 1500 },
    });
    expect(readBody(event('audio', { file_key: 'file_a', duration: 'long' }), FEISHU_BOT_OPEN_ID)).not.toHaveProperty('metadata');
  });

  it('reads a video without a name as a video, and a sticker as its placeholder', () => {
    expect(readBody(event('media', { file_key: 'file_v' }), undefined)).toEqual({ text: '', attachments: [{ kind: 'video', ref: 'om_1/file/file_v' }] });
    expect(readBody(event('sticker', { file_key: 'file_s' }), undefined)).toEqual({ text: STICKER_TEXT });
  });

  it('names the problem of a content off its shape', () => {
    expect(readBody(event('audio', { duration: 3 }), undefined)).toEqual({ problem: expect.stringContaining('audio file_key') });
    expect(readBody(event('media', { file_key: 'a/b' }), undefined)).toEqual({ problem: 'media names a key off the grammar' });
    expect(readBody(event('post', [1]), undefined)).toEqual({ problem: 'post content is not a JSON object' });
  });
});

describe('feishu inbound', () => {
  it('logs a warning naming the problem of an unreadable content and hands nothing to the host', async () => {
    const { logger, lines } = captureLogger();
    const inbound = new FeishuInbound('feishu', logger, { redis: undefined as never, prefix: 'unused' });
    const received: unknown[] = [];
    const host = { receive: async (_c: string, m: unknown) => received.push(m) } as unknown as ChannelHost;
    const e = feishuMessageEvent({ text: '', messageType: 'post', mentionBot: false });
    e.event.message.content = JSON.stringify({ content: [[{ tag: 'img' }]] });
    expect(await inbound.handleMessage(host, { ...e.header, ...e.event })).toEqual({ ok: true, ignored: 'unreadable' });
    expect(received).toEqual([]);
    const warning = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'feishu message content unreadable; ignored');
    expect(warning).toMatchObject({ level: 40, reason: 'unreadable', problem: 'post img without a key of the grammar' });
  });
});
