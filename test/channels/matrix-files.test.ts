/**
 * Files and formatted text out on Matrix: the real plugin's outbound side
 * (unstarted, as a runner uses it) against the fake homeserver: the media
 * upload, then an `m.file` / `m.image` / `m.audio` event under the delivery
 * key's transaction id, directly and through a run's delivery; the
 * homeserver's upload limit; Markdown as `formatted_body`.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMatrixPlugin } from '../../plugins/matrix/channel.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelOutbound } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { type FakeMatrix, MATRIX_TEST, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import { waitFor } from '../../testing/wait.js';
import { oggOpus, PDF, PNG } from '../helpers/media.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const logger = createLogger({ level: 'silent' });

let matrix: FakeMatrix;
let redis: Redis;
let prefix: string;
let outbound: ChannelOutbound;
let room: string;
let cid: string;

beforeEach(async () => {
  matrix = await startFakeMatrix();
  redis = new Redis(redisUrl());
  prefix = testPrefix();
  room = matrix.directRoom();
  cid = `matrix:${room}`;
  outbound = createMatrixPlugin({ ...MATRIX_TEST, homeserverUrl: matrix.url, maxFileBytes: 4096 }, { logger, redis, prefix }).outbound;
});
afterEach(async () => {
  await matrix.close();
  await cleanupPrefix(redis, prefix);
  await redis.quit();
});

const delivery = (runId: string) =>
  new RunDelivery({ client: redis, prefix, conversationId: cid, runId, resolve: () => outbound, logger, sleep: async () => undefined });
const fileEvents = () => matrix.sent.filter((e) => e.content.url !== undefined);

describe('matrix files out', () => {
  it('uploads a document and sends m.file with its name, type and size, under the delivery key', async () => {
    const { messageId } = await outbound.sendFile!(
      cid,
      { name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF, caption: 'Q3 report' },
      { deliveryKey: 'r1:f:0' },
    );

    expect(matrix.media.uploads).toHaveLength(1);
    expect(matrix.media.uploads[0]).toMatchObject({ contentType: 'application/pdf', filename: 'report.pdf' });
    expect(matrix.media.uploads[0]!.data.equals(PDF)).toBe(true);
    expect(matrix.sent).toHaveLength(1);
    expect(matrix.sent[0]).toMatchObject({ event_id: messageId, roomId: room });
    expect(matrix.sent[0]!.content).toEqual({
      msgtype: 'm.file',
      body: 'Q3 report',
      filename: 'report.pdf',
      url: matrix.media.uploads[0]!.mxc,
      info: { mimetype: 'application/pdf', size: PDF.length },
      'com.beeper.linkpreviews': [],
      'm.mentions': {},
    });
  });

  it('sends an image as m.image with its mimetype and size, the file name as body without a caption', async () => {
    await outbound.sendFile!(cid, { name: 'chart.png', mimeType: 'image/png', bytes: PNG });
    expect(matrix.sent[0]!.content).toMatchObject({ msgtype: 'm.image', body: 'chart.png', info: { mimetype: 'image/png', size: PNG.length } });
    expect(matrix.media.get(matrix.sent[0]!.content.url)!.data.equals(PNG)).toBe(true);
  });

  it('sends a spoken reply as an m.audio voice message with its duration', async () => {
    const ogg = oggOpus(2500);
    await outbound.sendFile!(cid, { name: 'reply.ogg', mimeType: 'audio/ogg', bytes: ogg, voice: true });
    expect(matrix.sent[0]!.content).toMatchObject({
      msgtype: 'm.audio',
      info: { mimetype: 'audio/ogg', size: ogg.length, duration: 2500 },
      'org.matrix.msc1767.audio': { duration: 2500 },
      'org.matrix.msc3245.voice': {},
    });
  });

  it("takes the homeserver's m.upload.size over the configured limit, and sends one clear message instead of a larger file", async () => {
    matrix.media.uploadLimit = 1000;
    expect(outbound.maxFileBytes).toBe(4096); // until the homeserver answered
    await outbound.typing!(cid);
    await waitFor(() => outbound.maxFileBytes === 1000, 5000, 'the media config read');

    const result = await delivery('run-big').file({ name: 'huge.zip', mimeType: 'application/zip', bytes: new Uint8Array(1001) }, { key: 'k_big' });
    expect(result).toEqual({ outcome: 'too-large', maxBytes: 1000 });
    expect(matrix.media.uploads).toHaveLength(0);
    expect(matrix.texts(room)).toEqual(["[file huge.zip could not be sent here: it is larger than this channel's limit of 1 KB]"]);
  });

  it('learns a lowered upload limit from a 413 M_TOO_LARGE at once', async () => {
    matrix.media.uploadLimit = 3000;
    await outbound.typing!(cid);
    await waitFor(() => outbound.maxFileBytes === 3000, 5000, 'the media config read');
    matrix.media.uploadLimit = 100;

    await expect(outbound.sendFile!(cid, { name: 'a.pdf', mimeType: 'application/pdf', bytes: new Uint8Array(200) })).rejects.toMatchObject({ status: 413 });
    await waitFor(() => outbound.maxFileBytes === 100, 5000, 'the lowered limit');
    expect(matrix.sent).toHaveLength(0);
  });

  it('retries an upload refused with 429 through delivery and sends exactly one file message', async () => {
    matrix.failNext('upload', { status: 429, errcode: 'M_LIMIT_EXCEEDED', retryAfterMs: 20 });
    expect(await delivery('run-429').file({ name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF }, { key: 'k_429' })).toEqual({ outcome: 'sent' });
    expect(matrix.calls.filter((c) => c.kind === 'upload').map((c) => c.status)).toEqual([429, 200]);
    expect(fileEvents()).toHaveLength(1);
  });

  it('retries a send refused with 429 after its upload without uploading again', async () => {
    matrix.failNext('send', { status: 429, errcode: 'M_LIMIT_EXCEEDED', retryAfterMs: 20 });
    expect(await delivery('run-send').file({ name: 'chart.png', mimeType: 'image/png', bytes: PNG }, { key: 'k_send' })).toEqual({ outcome: 'sent' });
    expect(matrix.media.uploads).toHaveLength(1);
    expect(matrix.calls.filter((c) => c.kind === 'send').map((c) => c.status)).toEqual([429, 200]);
    expect(fileEvents()).toHaveLength(1);
  });

  it('makes a retried send with the same delivery key the same event (an orphan upload at most)', async () => {
    const file = { name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF };
    const first = await outbound.sendFile!(cid, file, { deliveryKey: 'run-x:call-1:0' });
    // A takeover runs the call again in another process: it knows nothing of the first upload.
    const other = createMatrixPlugin({ ...MATRIX_TEST, homeserverUrl: matrix.url }, { logger, redis, prefix }).outbound;
    const again = await other.sendFile!(cid, file, { deliveryKey: 'run-x:call-1:0', maybeSentSince: Date.now() - 1000 });
    const text = [await outbound.send(cid, 'done', { deliveryKey: 'run-x:1:0' }), await other.send(cid, 'done', { deliveryKey: 'run-x:1:0' })];

    expect(again.messageId).toBe(first.messageId);
    expect(text[1]!.messageId).toBe(text[0]!.messageId);
    expect(matrix.sent).toHaveLength(2);
    expect(matrix.calls.filter((c) => c.kind === 'send').map((c) => c.repeat ?? false)).toEqual([false, true, false, true]);
    expect(matrix.media.uploads).toHaveLength(2);
  });
});

describe('matrix formatted text', () => {
  it('renders Markdown to formatted_body, escaping HTML in the text, and keeps the plain body', async () => {
    const text = '**Done.** Run `ls <dir>`\n\n<script>alert(1)</script>\n- [docs](https://example.org/a?b=1&c=2)\n- [bad](javascript:alert(1))';
    await outbound.send(cid, text, { format: 'markdown' });
    const content = matrix.sent[0]!.content;
    expect(content.body).toBe(text);
    expect(content.format).toBe('org.matrix.custom.html');
    expect(content.formatted_body).toBe(
      [
        '<p><strong>Done.</strong> Run <code>ls &lt;dir&gt;</code></p>',
        '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>',
        '<ul><li><a href="https://example.org/a?b=1&amp;c=2">docs</a></li><li>[bad](javascript:alert(1))</li></ul>',
      ].join('\n'),
    );
  });

  it('sends plain text as body alone, and a streaming edit carries the formatted body in m.new_content', async () => {
    const { messageId } = await outbound.send(cid, 'working…');
    await outbound.edit!(cid, messageId, '# Result\n*all* green', { format: 'markdown' });
    expect(matrix.sent[0]!.content).toEqual({ msgtype: 'm.text', body: 'working…', 'm.mentions': {}, 'com.beeper.linkpreviews': [] });
    expect(matrix.sent[1]!.content['m.new_content']).toEqual({
      msgtype: 'm.text',
      body: '# Result\n*all* green',
      'm.mentions': {},
      'com.beeper.linkpreviews': [],
      format: 'org.matrix.custom.html',
      formatted_body: '<h1>Result</h1>\n<p><em>all</em> green</p>',
    });
  });
});
