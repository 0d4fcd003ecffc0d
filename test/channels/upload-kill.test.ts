/**
 * `kill -9` during a file upload, against the platform: a runner process
 * whose outbound is the real channel plugin (its real client library) sends
 * a file the model asks for; the fake platform does the send and holds its
 * answer, so the platform has the file and the runner does not know; the
 * runner is killed there and a second one takes the run over. What the
 * platform then shows is each channel's documented duplicate window
 * (docs/channels.md, each channel's *Replies*): Telegram and WhatsApp take
 * no idempotency key, so the file shows twice (never more); Feishu / Lark and
 * Discord dedupe the resend by the delivery key's uuid / nonce, so once.
 * The text answer shows once on every channel.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../plugins/feishu/outbound.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { FakeDiscord } from '../../testing/fakes/discord-server.js';
import { FEISHU_DM } from '../../testing/fakes/feishu-events.js';
import { startFakeFeishu } from '../../testing/fakes/feishu-server.js';
import type { HeldAnswer } from '../../testing/fakes/held-answers.js';
import { startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { ALICE, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { startFakeWhatsApp, WA_ALICE } from '../../testing/fakes/whatsapp-server.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { waitFor } from '../../testing/wait.js';
import { crashRunnerSettings, type RunnerProcess, startRunnerProcess } from '../fixtures/runner-processes.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { redisUrl } from '../helpers/redis.js';
import { CHANNEL, guild, TOKEN } from './discord-harness.js';

const SCRIPT = fileURLToPath(new URL('../fixtures/channel-runner.ts', import.meta.url));
const PDF = Buffer.from('%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n');
const ANSWER = 'Sent you the report.';

/** What one crash run left: the run's id and the fields of the conversation's outbox. */
interface Crash {
  runId: string;
  outboxKeys: string[];
}

/**
 * Asks for the report in `conversationId` with a runner on `channel` (the fake at `url`), waits until the
 * platform did the held file send, kills that runner with SIGKILL, starts another and waits for the run's end.
 */
async function crashDuringUpload(o: { channel: string; url: string; conversationId: string; held: HeldAnswer; env?: Record<string, string> }): Promise<Crash> {
  // Everything the case starts is its own (model, harness, processes): the cases run at once.
  const fake = await startFakeOpenAI();
  const procs: RunnerProcess[] = [];
  let h: RunnerHarness | undefined;
  const workspace = await mkdtemp(join(tmpdir(), 'steerbot-upload-kill-'));
  try {
    await writeFile(join(workspace, 'report.pdf'), PDF);
    // A request ending with the user's message asks for the file; one ending with its result, for the answer.
    fake.script((req) =>
      req.messages.at(-1).role === 'user' ? { toolCalls: [{ name: 'send_file', args: { path: 'report.pdf', caption: 'Q3' } }] } : { text: ANSWER },
    );
    h = await RunnerHarness.start({ redisUrl: redisUrl() });
    const settings = crashRunnerSettings(redisUrl(), h.prefix, fake.url, {
      script: SCRIPT,
      env: { CHANNEL: o.channel, PLATFORM_URL: o.url, SEND_FILE_WORKSPACE: workspace, ...o.env },
    });
    let held = false;
    void o.held.done.then(() => (held = true));
    const first = await startRunnerProcess(settings);
    procs.push(first);
    const r = (await h.ingest('send me the report', { conversationId: o.conversationId })) as { runId: string };
    // The platform has the file; its answer never reaches the runner.
    await waitFor(() => held, 15_000, 'the file send held by the platform');
    await first.kill9();

    const second = await startRunnerProcess(settings);
    procs.push(second);
    expect((await h.runEnded(r.runId, 20_000, o.conversationId)).outcome).toBe('completed');
    // The model was asked for the step once: the takeover finished it from the record.
    expect(fake.requests).toHaveLength(2);
    return { runId: r.runId, outboxKeys: await h.ctx.redis.hkeys(conversationKeys(h.prefix, o.conversationId).outbox) };
  } finally {
    await Promise.all(procs.map((p) => p.kill9()));
    await h?.close();
    await fake.close();
    await rm(workspace, { recursive: true, force: true });
  }
}

// The runner processes run on the package built once for the lane; the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

describe.concurrent('a kill -9 during a file upload, against the platform', () => {
  it('telegram: the document shows twice, the same file both times, never a third; the answer once', async () => {
    const tg = await startFakeTelegram();
    try {
      const held = tg.holdAnswer('sendDocument');
      await crashDuringUpload({ channel: 'telegram', url: tg.apiRoot, conversationId: `telegram:${ALICE.id}`, held });

      // The documented window: the Bot API takes no idempotency key, so the takeover's resend is a second message.
      expect(tg.callsOf('sendDocument')).toHaveLength(2);
      expect(tg.sentFiles.map((f) => [f.method, f.chatId, f.name, f.caption])).toEqual([
        ['sendDocument', ALICE.id, 'report.pdf', 'Q3'],
        ['sendDocument', ALICE.id, 'report.pdf', 'Q3'],
      ]);
      expect(tg.sentFiles.every((f) => f.bytes.equals(PDF))).toBe(true);
      expect(tg.sent.map((m) => m.text)).toEqual([ANSWER]);
    } finally {
      await tg.close();
    }
  }, 60_000);

  it('whatsapp: the document shows twice, uploaded twice, the same file and caption both times, never a third; the answer once', async () => {
    const wa = await startFakeWhatsApp();
    try {
      // The first message the run sends is the document naming the upload.
      const held = wa.holdAnswer('send');
      await crashDuringUpload({ channel: 'whatsapp', url: wa.graphUrl, conversationId: `whatsapp:${WA_ALICE.waId}`, held });

      // The documented window: the Cloud API takes no idempotency key, so the takeover's resend is a second message.
      const documents = wa.sent.filter((m) => m.type === 'document');
      expect(documents.map((m) => [m.to, m.text, m.media?.filename])).toEqual([
        [WA_ALICE.waId, 'Q3', 'report.pdf'],
        [WA_ALICE.waId, 'Q3', 'report.pdf'],
      ]);
      expect(documents.every((m) => m.media!.data.equals(PDF))).toBe(true);
      // Each send named its own upload: the takeover uploaded the bytes again.
      expect(wa.uploads).toHaveLength(2);
      expect(new Set(documents.map((m) => m.media!.id)).size).toBe(2);
      expect(wa.sent.filter((m) => m.type === 'text').map((m) => m.text)).toEqual([ANSWER]);
    } finally {
      await wa.close();
    }
  }, 60_000);

  it('feishu: the file message shows once (the resend carries the same uuid); the upload is repeated, unshown; caption and answer once', async () => {
    const feishu = await startFakeFeishu();
    try {
      // The first message the run sends is the file message naming the upload.
      const held = feishu.holdAnswer('POST', /^\/open-apis\/im\/v1\/messages$/);
      const { runId, outboxKeys } = await crashDuringUpload({ channel: 'feishu', url: feishu.url, conversationId: `feishu:${FEISHU_DM}`, held });

      const files = feishu.sent.filter((m) => m.msgType === 'file');
      expect(files).toHaveLength(1);
      expect(files[0]!.media?.data.equals(PDF)).toBe(true);
      // Its uuid is the file's delivery key's, one of the run's.
      expect(outboxKeys.filter((k) => k.startsWith(`${runId}:`)).map(uuidOf)).toContain(files[0]!.uuid);
      // The takeover uploaded the bytes again (an unused key on the platform) and sent under the same uuid.
      expect(feishu.uploads).toHaveLength(2);
      expect(feishu.uploads.every((u) => u.data.equals(PDF) && u.fileName === 'report.pdf')).toBe(true);
      expect(feishu.calls.filter((c) => c.kind === 'send' && c.uuid === files[0]!.uuid)).toHaveLength(2);
      expect(feishu.sent.filter((m) => m.msgType === 'text').map((m) => m.text)).toEqual(['Q3', ANSWER]);
    } finally {
      await feishu.close();
    }
  }, 60_000);

  it('discord: the attachment shows once (the resend carries the same nonce); the answer once', async () => {
    const discord = await FakeDiscord.start({ token: TOKEN });
    try {
      discord.addGuild(guild);
      const held = discord.holdAnswer('POST', new RegExp(`^/channels/${CHANNEL}/messages$`));
      await crashDuringUpload({ channel: 'discord', url: discord.apiBase, conversationId: `discord:${CHANNEL}`, held, env: { PLATFORM_TOKEN: TOKEN } });

      const messages = [...discord.messages.values()];
      const withFiles = messages.filter((m) => (m.files ?? []).length > 0);
      expect(withFiles).toHaveLength(1);
      expect(withFiles[0]!.files!.map((f) => [f.filename, f.data.equals(PDF)])).toEqual([['report.pdf', true]]);
      const posts = discord.calls.filter((c) => c.method === 'POST' && c.path === `/channels/${CHANNEL}/messages`);
      expect(posts.filter((c) => c.body?.nonce === withFiles[0]!.nonce)).toHaveLength(2);
      expect(messages.filter((m) => m.content === ANSWER)).toHaveLength(1);
    } finally {
      await discord.close();
    }
  }, 60_000);
});
