/**
 * Files people send the bot on Feishu / Lark, through the whole system: an
 * image or file message pushed over the fake's long connection → the real
 * plugin → the host → Redis → the runner with the local agent, which
 * downloads the message's resource (the real SDK's `im.messageResource.get`,
 * with the tenant access token the fake issued) and gives it to the fake
 * model. A file over the agent's limit, a download the platform refuses and
 * a reference off the grammar are each handled without the bytes reaching
 * the model or the record.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AttachmentSettings } from '../../plugins/local-agent/attachments.js';
import { InvalidInputError } from '../../src/errors.js';
import { FEISHU_DM, type FeishuMessageOptions, feishuMessageEvent } from '../../testing/fakes/feishu-events.js';
import type { FakeFeishu } from '../../testing/fakes/feishu-server.js';
import type { FakeOpenAIServer } from '../../testing/fakes/openai-server.js';
import { PDF, PNG } from '../helpers/media.js';
import type { RunnerHarness } from '../runner/harness.js';
import { type FeishuAgentWorld, type FeishuResources, startFeishuAgentWorld } from './feishu-harness.js';

const CID = `feishu:${FEISHU_DM}`;

let ai: FakeOpenAIServer;
let feishu: FakeFeishu;
let resources: FeishuResources;
let h: RunnerHarness;
let start: FeishuAgentWorld['boot'];
let close: FeishuAgentWorld['close'];
const boot = (attachments: AttachmentSettings = {}) => start({ attachments });

/** Ann's image or file message `messageId` with `content` (`{ image_key }` or `{ file_key, file_name }`). */
function mediaEvent(type: 'image' | 'file', messageId: string, content: Record<string, string>, over: Partial<FeishuMessageOptions> = {}) {
  const event = feishuMessageEvent({ text: '', messageId, messageType: type, ...over });
  event.event.message.content = JSON.stringify(content);
  return event;
}

const texts = () => feishu.sent.map((m) => m.text);
const lastUser = (i: number) => ai.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').at(-1);
const base64 = (bytes: Buffer) => bytes.toString('base64');

beforeEach(async () => {
  ({ ai, feishu, resources, h, boot: start, close } = await startFeishuAgentWorld());
});
afterEach(() => close());

describe('feishu files in', () => {
  it('gives a PDF a person sends to the model with its bytes, name (on one line) and type, downloaded once as a file resource', async () => {
    await boot({ accept: ['image/*', 'application/pdf'] });
    resources.add('om_pdf1', 'file', 'file_v3_report', { data: PDF, contentType: 'application/octet-stream' });
    ai.script([{ text: 'A short report.' }]);
    expect(await feishu.push(mediaEvent('file', 'om_pdf1', { file_key: 'file_v3_report', file_name: ' Q3\nreport.pdf' }))).toMatchObject({ code: 200 });
    await feishu.waitUntil(() => feishu.sent.length === 1, 15_000, 'the answer');
    await h.idle(15_000, CID);

    expect(texts()).toEqual(['A short report.']);
    const parts: Array<Record<string, any>> = lastUser(0).content;
    expect(parts[0]).toEqual({ type: 'text', text: '[attachment: file Q3 report.pdf]' });
    const file = parts.find((p) => p.type === 'file');
    // The platform served no type: the one its name says.
    expect(file?.file).toEqual({ filename: 'Q3 report.pdf', file_data: `data:application/pdf;base64,${base64(PDF)}` });
    expect(resources.requests).toEqual([{ messageId: 'om_pdf1', key: 'file_v3_report', type: 'file', status: 200 }]);
    const received = await h.entries('message.received', CID);
    expect(received.map((e) => e.attachments)).toEqual([
      [{ kind: 'file', ref: 'om_pdf1/file/file_v3_report', name: 'Q3 report.pdf', mime: 'application/pdf' }],
    ]);
    expect(JSON.stringify(await h.record(CID))).not.toContain(base64(PDF).slice(0, 16));
  });

  it('gives an image to the model as an image part of the type the platform serves, requested as an image resource', async () => {
    await boot();
    resources.add('om_img1', 'image', 'img_v3_chart', { data: PNG, contentType: 'image/png' });
    ai.script([{ text: 'A chart.' }]);
    await feishu.push(mediaEvent('image', 'om_img1', { image_key: 'img_v3_chart' }));
    await feishu.waitUntil(() => feishu.sent.length === 1, 15_000, 'the answer');
    await h.idle(15_000, CID);

    const parts: Array<Record<string, any>> = lastUser(0).content;
    expect(parts.find((p) => p.type === 'image_url')?.image_url.url).toBe(`data:image/png;base64,${base64(PNG)}`);
    expect(resources.requests).toEqual([{ messageId: 'om_img1', key: 'img_v3_chart', type: 'image', status: 200 }]);
    expect((await h.entries('message.received', CID)).map((e) => e.attachments)).toEqual([[{ kind: 'image', ref: 'om_img1/image/img_v3_chart' }]]);
  });

  it('answers a file over the limit with a clear message, without calling the model, its bytes nowhere in the record', async () => {
    await boot({ maxBytes: 4096, accept: ['application/pdf'], policy: 'error' });
    const big = Buffer.concat([PDF, Buffer.alloc(20_000, 1)]);
    resources.add('om_big1', 'file', 'file_v3_big', { data: big, contentType: 'application/pdf' });
    await feishu.push(mediaEvent('file', 'om_big1', { file_key: 'file_v3_big', file_name: 'big.pdf' }));
    await feishu.waitUntil(() => feishu.sent.length === 1, 15_000, 'the reply');
    await h.idle(15_000, CID);

    expect(texts()).toEqual([expect.stringContaining("can't read `big.pdf` (`application/pdf`)")]);
    expect(ai.requests).toHaveLength(0);
    // Asked for, and refused by its size: the platform answered, the bytes were not taken.
    expect(resources.requests).toEqual([{ messageId: 'om_big1', key: 'file_v3_big', type: 'file', status: 200 }]);
    expect((await h.entries('run.ended', CID)).map((e) => e.outcome)).toEqual(['failed']);
    expect(JSON.stringify(await h.record(CID))).not.toContain(base64(big.subarray(0, 12)));
  });

  it('gives the model the placeholder naming the file when the platform fails the download, and answers', async () => {
    await boot({ accept: ['application/pdf'] });
    resources.add('om_gone1', 'file', 'file_v3_gone', { data: PDF, contentType: 'application/pdf' });
    resources.failNext(500, 1);
    ai.script([{ text: 'I could not open it.' }]);
    await feishu.push(mediaEvent('file', 'om_gone1', { file_key: 'file_v3_gone', file_name: 'notes.pdf' }));
    await feishu.waitUntil(() => feishu.sent.length === 1, 15_000, 'the answer');
    await h.idle(15_000, CID);

    expect(resources.requests.map((r) => r.status)).toEqual([500]);
    expect(lastUser(0).content).toBe('[attachment: file notes.pdf]');
    expect(texts()).toEqual(['I could not open it.']);
  });

  it('ignores a file message whose key is off the grammar, or one in a group (it cannot mention the bot), recording nothing', async () => {
    await boot();
    expect(await feishu.push(mediaEvent('file', 'om_bad1', { file_key: '../../auth/v3/app_access_token', file_name: 'x.pdf' }))).toMatchObject({
      code: 200,
      data: { ignored: 'unreadable' },
    });
    expect(await feishu.push(mediaEvent('image', 'om_grp1', { image_key: 'img_v3_x' }, { chatType: 'group', mentionBot: false }))).toMatchObject({
      code: 200,
      data: { ignored: 'not-addressed' },
    });
    expect(await h.entries('message.received', CID)).toEqual([]);
    expect(resources.requests).toEqual([]);
  });
});

describe('feishu fetchAttachment', () => {
  it('refuses a reference off the grammar before any request, and a file over the limit by its declared length or once the download passes it', async () => {
    const system = await boot();
    const fetchAttachment = system.plugin.outbound.fetchAttachment!;
    for (const ref of ['om_a/file/../x', 'om_a/audio/file_v3_a', 'om_a/file', 'https://open.feishu.cn/x', 'om_a/file/file v3', 'om_a/image/img/extra'])
      await expect(fetchAttachment({ kind: 'file', ref }, { maxBytes: 1000 })).rejects.toBeInstanceOf(InvalidInputError);
    expect(resources.requests).toEqual([]);

    const data = Buffer.alloc(5000, 7);
    resources.add('om_a', 'file', 'file_v3_declared', { data, contentType: 'application/zip' });
    resources.add('om_a', 'file', 'file_v3_streamed', { data, contentType: 'application/zip', declareLength: false });
    // Refused by its declared length, and, without one, once the download passes the limit.
    await expect(fetchAttachment({ kind: 'file', ref: 'om_a/file/file_v3_declared' }, { maxBytes: 1000 })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(fetchAttachment({ kind: 'file', ref: 'om_a/file/file_v3_streamed' }, { maxBytes: 1000 })).rejects.toBeInstanceOf(InvalidInputError);
    const got = await fetchAttachment({ kind: 'file', ref: 'om_a/file/file_v3_streamed' }, { maxBytes: 5000 });
    expect(Buffer.from(got.data).equals(data)).toBe(true);
    expect(got.mediaType).toBe('application/zip');
  });
});
