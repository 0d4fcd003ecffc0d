/**
 * Attachments reach the model: a Telegram photo is fetched through the real
 * Telegram outbound (getFile + file download via `apiRoot`) from the fake
 * Bot API, and the fake model receives it as an image part with its bytes;
 * the record keeps the reference only; a file is fetched once; a file too
 * large or of a type the model does not take gets the configured policy.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AttachmentSettings } from '../../plugins/local-agent/attachments.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { RUN_REASON } from '../../plugins/local-agent/outcomes.js';
import { createTranscriptionModel } from '../../runner/model.js';
import type { ModelSettings } from '../../runner/plugin.js';
import type { ChannelOutbound } from '../../src/channel.js';
import type { Attachment } from '../../src/record/entries.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeTelegram, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { fetchFromTelegram } from '../channels/telegram-harness.js';
import { oggOpus } from '../helpers/media.js';
import { CID, fakeModel, perTestModel, RunnerHarness } from '../runner/harness.js';

const t = perTestModel();
let tg: FakeTelegram;
beforeEach(async () => {
  tg = await startFakeTelegram();
});
afterEach(async () => {
  await tg.close();
});

/** A small PNG: its signature, then bytes that only have to survive the trip. */
const PHOTO = Uint8Array.from({ length: 3000 }, (_, i) => (i < 8 ? [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a][i]! : (i * 7) % 256));

/** The local agent with the harness's outbound able to fetch files from the fake Telegram. */
async function start(attachments?: AttachmentSettings, transcription?: string): Promise<RunnerHarness> {
  const h = await RunnerHarness.start();
  t.h = h;
  fetchFromTelegram(h, tg);
  await h.startRunner(
    createLocalAgentPlugin({
      model: fakeModel(t.fake.url),
      builtins: { currentTime: false },
      maxRetries: 0,
      ...(attachments && { attachments }),
      // Through the runner's factory, from the harness's model settings (provider openai), at the fake.
      ...(transcription && { transcriptionModel: (s: ModelSettings) => createTranscriptionModel({ ...s, baseURL: t.fake.url }, transcription) }),
    }),
  );
  return h;
}

let updates = 0;
/** Sends a message with attachments and waits for its run to end. */
async function send(h: RunnerHarness, text: string, attachments: Attachment[]) {
  const r = (await h.ingestService.ingest({
    conversationId: CID,
    updateKey: `telegram:att-${++updates}`,
    sender: { id: 'u1', name: 'Ann' },
    text,
    attachments,
  })) as { runId: string };
  const ended = await h.runEnded(r.runId);
  await h.idle();
  return ended;
}

const lastUser = (i: number) => t.fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').at(-1);

describe('attachments', () => {
  it('reach the model as an image part with the file’s bytes, fetched once; the record keeps the reference only', async () => {
    tg.addFile('photo-1', PHOTO, { mime: 'image/png' });
    const h = await start();
    t.fake.script([{ text: 'A nice chart.' }, { text: 'Same chart.' }]);

    expect(await send(h, 'what is this?', [{ kind: 'image', ref: 'photo-1' }])).toMatchObject({ outcome: 'completed' });
    const content = lastUser(0).content;
    expect(content[0]).toEqual({ type: 'text', text: 'what is this?\n[attachment: image]' });
    expect(content[1].type).toBe('image_url');
    const url: string = content[1].image_url.url;
    expect(url.startsWith('data:image/png;base64,')).toBe(true);
    expect(Buffer.from(url.slice(url.indexOf(',') + 1), 'base64')).toEqual(Buffer.from(PHOTO));

    // The same file again (a forward): served from the cache; the earlier turn is its placeholder now.
    await send(h, 'and this one?', [{ kind: 'image', ref: 'photo-1' }]);
    const second = t.fake.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'user');
    expect(second[0].content).toBe('what is this?\n[attachment: image]');
    expect(second[1].content[1].type).toBe('image_url');
    expect(tg.callsOf('getFile')).toHaveLength(1);
    expect(tg.fileDownloads).toEqual(['files/photo-1']);

    const received = await h.entries('message.received');
    expect(received.map((e) => e.attachments)).toEqual([[{ kind: 'image', ref: 'photo-1' }], [{ kind: 'image', ref: 'photo-1' }]]);
    expect(JSON.stringify(await h.record())).not.toContain(Buffer.from(PHOTO).toString('base64').slice(0, 40));
  });

  it('fetches the files of one prompt concurrently, each once, and keeps their order', async () => {
    // A JPEG's signature (FF D8 FF), then bytes.
    const other = Uint8Array.from({ length: 2000 }, (_, i) => (i < 3 ? [0xff, 0xd8, 0xff][i]! : (i * 11) % 256));
    tg.addFile('photo-a', PHOTO, { mime: 'image/png' });
    tg.addFile('photo-b', other, { mime: 'image/jpeg' });
    const h = await start();
    const outbound = h.outbound as ChannelOutbound;
    const fetchOne = outbound.fetchAttachment!;
    let inFlight = 0;
    let most = 0;
    outbound.fetchAttachment = async (a, o) => {
      most = Math.max(most, ++inFlight);
      try {
        return await fetchOne(a, o);
      } finally {
        inFlight--;
      }
    };
    t.fake.script([{ text: 'Two charts.' }]);

    const files: Attachment[] = [
      { kind: 'image', ref: 'photo-a' },
      { kind: 'image', ref: 'photo-b' },
      { kind: 'image', ref: 'photo-a' },
    ];
    expect(await send(h, 'compare', files)).toMatchObject({ outcome: 'completed' });
    expect(most).toBe(2); // both files at once; the repeated one waits for the first fetch of it
    expect(tg.fileDownloads.sort()).toEqual(['files/photo-a', 'files/photo-b']);
    const images = lastUser(0).content.slice(1) as Array<{ image_url: { url: string } }>;
    expect(images.map((p) => p.image_url.url.slice(0, p.image_url.url.indexOf(';')))).toEqual(['data:image/png', 'data:image/jpeg', 'data:image/png']);
    const bytes = (p: { image_url: { url: string } }) => Buffer.from(p.image_url.url.slice(p.image_url.url.indexOf(',') + 1), 'base64');
    expect(images.map(bytes)).toEqual([Buffer.from(PHOTO), Buffer.from(other), Buffer.from(PHOTO)]);
  });

  it('with the error policy, an oversized file ends the run telling the user, without calling the model', async () => {
    tg.addFile('big-1', new Uint8Array(5000), { mime: 'image/png' });
    const h = await start({ maxBytes: 2048, policy: 'error' });

    expect(await send(h, 'look', [{ kind: 'image', ref: 'big-1', name: 'scan.png' }])).toMatchObject({
      outcome: 'failed',
      reason: RUN_REASON.attachmentUnsupported,
    });
    expect(t.fake.requests).toHaveLength(0);
    expect(h.outbound.texts).toEqual([expect.stringContaining("can't read `scan.png`")]);
    expect(tg.fileDownloads).toEqual([]); // refused from getFile's size, before downloading
  });

  it('with the text policy, an oversized file is a placeholder naming it; with omit, a type the model does not take is left out', async () => {
    tg.addFile('big-2', new Uint8Array(5000), { mime: 'image/png' });
    let h = await start({ maxBytes: 2048, policy: 'text' });
    t.fake.script([{ text: 'ok' }]);
    await send(h, 'look', [{ kind: 'image', ref: 'big-2', name: 'scan.png' }]);
    expect(lastUser(0).content).toBe('look\n[attachment: image scan.png]'); // one text part goes as a string
    await h.close();

    h = await start({ policy: 'omit' });
    t.fake.script([{ text: 'ok' }]);
    await send(h, 'the report', [{ kind: 'file', ref: 'doc-1', name: 'report.pdf', mime: 'application/pdf' }]);
    expect(lastUser(1).content).toBe('the report');
    expect(tg.callsOf('getFile')).toHaveLength(1); // only big-2's: a type not accepted is never fetched
  });

  it('transcribes a voice note once when a transcription model is configured, and keeps the transcript in conversation state', async () => {
    const VOICE = oggOpus(2000, 'fake opus voice note');
    tg.addFile('voice-1', VOICE, { mime: 'audio/ogg' });
    const h = await start(undefined, 'whisper-1');
    t.fake.script([{ text: 'Got it.' }, { text: 'Still got it.' }]);

    await send(h, 'listen', [{ kind: 'audio', ref: 'voice-1', mime: 'audio/ogg' }]);
    expect(lastUser(0).content).toBe('listen\n[voice message, transcribed: transcribed audio]');
    expect(t.fake.transcriptions).toHaveLength(1);
    expect(t.fake.transcriptions[0]!.includes(VOICE)).toBe(true);
    expect(t.fake.transcriptions[0]!.toString('latin1')).toContain('whisper-1');

    // The same note again (forwarded): the stored transcript, no second download or transcription.
    await send(h, 'again', [{ kind: 'audio', ref: 'voice-1', mime: 'audio/ogg' }]);
    expect(lastUser(1).content).toBe('again\n[voice message, transcribed: transcribed audio]');
    expect(t.fake.transcriptions).toHaveLength(1);
    expect(tg.fileDownloads).toEqual(['files/voice-1']);
    const state = await h.ctx.redis.hgetall(conversationKeys(h.prefix, CID).state);
    const keys = Object.keys(state).filter((k) => k.startsWith('local-agent.transcript.'));
    expect(keys).toHaveLength(1);
    expect(JSON.parse(state[keys[0]!]!)).toMatchObject({ text: 'transcribed audio' });
  });
});
