/**
 * Files out on Teams: the real plugin, started on a host HTTP server (which
 * serves the signed file URLs), delivering through a run's delivery with the
 * Agents SDK's connector client against the fake Bot Connector. With
 * `filesUrl`, an image goes inline (an attachment by URL, the caption as the
 * text), any other file and a spoken reply as an Adaptive Card with a button
 * that opens the signed URL; too large, or without `filesUrl`, one clear
 * text message.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { createTeamsPlugin, type TeamsConfigInput } from '../../plugins/teams/channel.js';
import { fileActivity, TEAMS_INLINE_IMAGE_MAX_BYTES } from '../../plugins/teams/files.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import { createSpeechModel } from '../../runner/model.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { signedFileStore } from '../../src/plugin/files.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type FakeTeams, startFakeTeams } from '../../testing/fakes/teams-server.js';
import { PDF, PNG } from '../helpers/media.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';
import { postActivity, startTeamsSystem, teamsTestConfig } from './teams-harness.js';

const logger = createLogger({ level: 'silent' });
const CHAT = 'a:1alice-files-chat';
const CID = `teams:${CHAT}`;
const FILES_URL = 'https://bot.example.test';
const CARD = 'application/vnd.microsoft.card.adaptive';

let teams: FakeTeams;
let h: { url: string; plugin: ChannelPlugin; prefix: string; redis: Redis; http: HttpServer } | undefined;
const closers: Array<() => Promise<unknown>> = [];

async function start(config: Partial<TeamsConfigInput>): Promise<NonNullable<typeof h>> {
  const redis = new Redis(redisUrl());
  const prefix = testPrefix();
  const http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
  const plugin = createTeamsPlugin({ ...teamsTestConfig(teams), ...config }, { logger, redis, prefix });
  const { host } = ingestOnlyHost({ http, redis, prefix, logger, settings: () => ({}), outbound: () => plugin.outbound, access: () => ({ channels: {} }) });
  await plugin.start(host);
  h = { url: await listen(http, { host: '127.0.0.1', port: 0 }), plugin, prefix, redis, http };
  return h;
}

beforeEach(async () => {
  teams = await startFakeTeams();
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  if (h) {
    const { plugin, http, redis, prefix } = h;
    h = undefined;
    await plugin.stop();
    await http.close();
    await cleanupPrefix(redis, prefix);
    await redis.quit();
  }
  await teams.close();
});

const delivery = (s: NonNullable<typeof h>, runId: string) =>
  new RunDelivery({ client: s.redis, prefix: s.prefix, conversationId: CID, runId, resolve: () => s.plugin.outbound, logger, sleep: async () => undefined });
/** GETs a URL Teams was given from the local host (Teams reaches it at `filesUrl`). */
const download = async (hostUrl: string, url: string) => {
  const u = new URL(url);
  expect(u.origin).toBe(FILES_URL);
  const res = await fetch(`${hostUrl}${u.pathname}${u.search}`);
  return { status: res.status, type: res.headers.get('content-type'), bytes: Buffer.from(await res.arrayBuffer()) };
};
const messages = () => teams.sent.filter((s) => s.conversationId === CHAT && s.type === 'message');

describe('teams files out', () => {
  it('sends an image inline: one message with the image attached by its signed URL and the caption as its text', async () => {
    const s = await start({ filesUrl: FILES_URL });
    expect(await delivery(s, 'run1').file({ name: 'chart.png', mimeType: 'image/png', bytes: PNG, caption: 'Sales' }, { key: 'k_1' })).toEqual({
      outcome: 'sent',
    });
    expect(messages()).toHaveLength(1);
    const { activity } = messages()[0]!;
    expect(activity.text).toBe('Sales');
    expect(activity.attachments).toEqual([{ contentType: 'image/png', contentUrl: expect.any(String), name: 'chart.png' }]);
    const url = activity.attachments[0].contentUrl as string;
    expect(url).toMatch(new RegExp(`^${FILES_URL}/teams/files/teams%3Aa%3A1alice-files-chat/[0-9a-f]{32}\\?expires=\\d+&sig=[0-9a-f]{64}$`));
    expect(teams.files(CHAT)).toEqual([expect.objectContaining({ kind: 'inline', name: 'chart.png', url })]);
    const got = await download(s.url, url);
    expect(got).toMatchObject({ status: 200, type: 'image/png' });
    expect(got.bytes.equals(PNG)).toBe(true);
  });

  it('sends a PDF as an Adaptive Card naming it, its size and type, with a Download button whose URL serves the bytes', async () => {
    const s = await start({ filesUrl: FILES_URL });
    await delivery(s, 'run2').file({ name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF, caption: 'Q3 report' }, { key: 'k_2' });
    expect(messages()).toHaveLength(1);
    const [attachment] = messages()[0]!.activity.attachments;
    expect(attachment).toMatchObject({ contentType: CARD, name: 'report.pdf' });
    expect(attachment.content.body).toEqual([
      { type: 'TextBlock', text: 'Q3 report', wrap: true },
      {
        type: 'FactSet',
        facts: [
          { title: 'File', value: 'report.pdf' },
          { title: 'Size', value: `${PDF.byteLength} B` },
          { title: 'Type', value: 'application/pdf' },
        ],
      },
    ]);
    expect(teams.texts(CHAT)).toEqual(['Q3 report']);
    const [file] = teams.files(CHAT);
    expect(file).toMatchObject({ kind: 'link', name: 'report.pdf', title: 'Download' });
    const got = await download(s.url, file!.url);
    expect(got).toMatchObject({ status: 200, type: 'application/pdf' });
    expect(got.bytes.equals(PDF)).toBe(true);
  });

  it('refuses an altered URL (403) and the genuine one once it has expired (404)', async () => {
    const s = await start({ filesUrl: FILES_URL, fileTtlSeconds: 600 });
    await delivery(s, 'run3').file({ name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF }, { key: 'k_3' });
    const url = new URL(teams.files(CHAT)[0]!.url);
    const expires = Number(url.searchParams.get('expires'));
    expect(expires * 1000 - Date.now()).toBeLessThanOrEqual(600_000);

    const altered = new URL(url);
    altered.searchParams.set('expires', String(expires + 3600));
    expect((await download(s.url, altered.href)).status).toBe(403);
    const otherFile = new URL(url);
    otherFile.pathname = otherFile.pathname.replace(/[0-9a-f]{32}$/, '0'.repeat(32));
    expect((await download(s.url, otherFile.href)).status).toBe(403);

    // The genuine URL once its time is up: the route as it answers then (the key it checks with is the one the plugin signed with, kept in Redis).
    const later = signedFileStore({ redis: s.redis, prefix: s.prefix, path: '/teams/files', ttlSeconds: 600, now: () => (expires + 1) * 1000 }).route();
    const answer = await later.handle({
      method: 'GET',
      path: url.pathname,
      params: { conversation: CID, id: url.pathname.split('/').at(-1)! },
      query: Object.fromEntries(url.searchParams),
      headers: {},
      body: Buffer.alloc(0),
      signal: new AbortController().signal,
    });
    expect(answer.status).toBe(404);
  });

  it('a download URL answers 404 after /purge of its conversation, and its bytes are gone from Redis', async () => {
    const s = await start({ filesUrl: FILES_URL });
    await delivery(s, 'run4').file({ name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF }, { key: 'k_4' });
    const url = teams.files(CHAT)[0]!.url;
    expect((await download(s.url, url)).status).toBe(200);

    expect(await postActivity(teams, `${s.url}/api/messages`, teams.message({ conversationId: CHAT, text: '/purge' })).then((r) => r.status)).toBe(200);
    await teams.waitUntil(() => (teams.texts(CHAT).length > 1 ? true : undefined), 10_000, 'the /purge answer');
    expect((await download(s.url, url)).status).toBe(404);
    expect(await s.redis.keys(`${s.prefix}:{c:${CID}}:file*`)).toEqual([]);
  });

  it('sends one clear text message instead of a file over maxFileBytes, and keeps nothing', async () => {
    const s = await start({ filesUrl: FILES_URL, maxFileBytes: 4096 });
    const result = await delivery(s, 'run5').file({ name: 'huge.zip', mimeType: 'application/zip', bytes: new Uint8Array(5000) }, { key: 'k_5' });
    expect(result).toEqual({ outcome: 'too-large', maxBytes: 4096 });
    expect(teams.texts(CHAT)).toEqual(["[file huge.zip could not be sent here: it is larger than this channel's limit of 4 KB]"]);
    expect(teams.files(CHAT)).toEqual([]);
    expect(await s.redis.keys(`${s.prefix}:{c:${CID}}:file*`)).toEqual([]);
  });

  it('retries a send refused with 429, then 503, and shows the file once, at one URL', async () => {
    const s = await start({ filesUrl: FILES_URL });
    teams.failNext('send', { status: 429, retryAfterSeconds: 1 });
    teams.failNext('send', { status: 503 });
    expect(await delivery(s, 'run6').file({ name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF }, { key: 'k_6' })).toEqual({ outcome: 'sent' });
    const sends = teams.calls.filter((c) => c.kind === 'send' && c.conversationId === CHAT);
    expect(sends.map((c) => c.status)).toEqual([429, 503, 200]);
    // Every attempt named the same kept file (each signs its URL anew: the expiry may move by a second).
    expect(new Set(sends.map((c) => new URL(c.body.attachments[0].content.actions[0].url).pathname)).size).toBe(1);
    expect(messages()).toHaveLength(1);
    expect(await s.redis.zcard(`${s.prefix}:{c:${CID}}:files`)).toBe(1);
  });

  it('without filesUrl takes no files: one clear text message', async () => {
    const s = await start({});
    expect(s.plugin.outbound.sendFile).toBeUndefined();
    expect(await delivery(s, 'run7').file({ name: 'chart.png', mimeType: 'image/png', bytes: PNG }, { key: 'k_7' })).toEqual({ outcome: 'unsupported' });
    expect(teams.texts(CHAT)).toEqual(['[file chart.png could not be sent here: this channel does not take files]']);
    expect(teams.files(CHAT)).toEqual([]);
  });

  it('sends an image over 4 MB, or one Teams does not show inline, as a card with a Download button', () => {
    const url = `${FILES_URL}/teams/files/x/y`;
    const big = fileActivity({ name: 'big.png', mimeType: 'image/png', bytes: new Uint8Array(TEAMS_INLINE_IMAGE_MAX_BYTES + 1) }, url);
    const webp = fileActivity({ name: 'a.webp', mimeType: 'image/webp', bytes: new Uint8Array(10) }, url);
    for (const activity of [big, webp]) {
      const [attachment] = activity.attachments as Array<Record<string, any>>;
      expect(attachment).toMatchObject({ contentType: CARD, content: { actions: [{ type: 'Action.OpenUrl', title: 'Download', url }] } });
    }
    expect((big.attachments as Array<Record<string, any>>)[0]!.content.body[0].facts[1]).toEqual({ title: 'Size', value: '4.2 MB' });
  });
});

describe('teams spoken replies', () => {
  it('the answer as text, then once as a card with a Play button whose URL serves the OGG audio', async () => {
    const ai = await startFakeOpenAI();
    closers.push(() => ai.close());
    ai.script([{ text: 'The train leaves at nine.' }]);
    const settings = { provider: 'openai-compatible' as const, name: 'm', baseURL: ai.url, apiKey: 'k', contextWindow: 128_000, outputReserve: 4000 };
    const model = createSpeechModel(settings, 'gpt-4o-mini-tts', 'agents.local-agent.voice.model');
    const agent = createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false }, voice: { model, voice: 'alloy', replies: 'always' } });
    const rh = await RunnerHarness.start();
    closers.push(() => rh.close());
    const system = await startTeamsSystem({ h: rh, teams, agent, config: { filesUrl: FILES_URL } });
    closers.push(
      () => system.http.close(),
      () => system.plugin.stop(),
    );

    expect(await system.deliver(teams.message({ conversationId: CHAT, text: 'when does the train leave?' }))).toBe(200);
    const [file] = await teams.waitUntil(() => (teams.files(CHAT).length > 0 ? teams.files(CHAT) : undefined), 15_000, 'the audio card');
    await rh.idle(15_000, CID);
    expect(teams.texts(CHAT)).toEqual(['The train leaves at nine.', '']);
    expect(teams.files(CHAT)).toHaveLength(1);
    expect(file).toMatchObject({ kind: 'link', contentType: CARD, name: 'reply.ogg', title: 'Play' });
    const got = await download(system.url.replace(/\/api\/messages$/, ''), file!.url);
    expect(got).toMatchObject({ status: 200, type: 'audio/ogg' });
    expect(got.bytes.toString()).toBe('OggSThe train leaves at nine.');
    expect(ai.speeches).toEqual([expect.objectContaining({ input: 'The train leaves at nine.', response_format: 'opus' })]);
  });
});
