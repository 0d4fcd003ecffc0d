/**
 * The Slack channel's inbound side over the Events API: the real plugin and
 * the real channel host ingesting into Redis (runs recorded, not executed),
 * signed requests POSTed to its routes, the real Web API client against the
 * fake Slack. Signatures, bad bodies, retries, which messages are addressed
 * to the bot, threads, files, and Redis down.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../src/errors.js';
import { eventCallback, SLACK_BOT_USER, SLACK_SIGNING_SECRET, signedSlackHeaders } from '../../testing/fakes/slack-server.js';
import { postClick, type SlackHarness, startSlackHarness } from './slack-harness.js';

const DM = 'D0000DM1';
const CHAN = 'C0000CH1';
const ANN = 'U0000ANN';
const BOB = 'U0000BOB';

let h: SlackHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const start = async (...args: Parameters<typeof startSlackHarness>) => {
  h = await startSlackHarness(...args);
  return h;
};
const dm = (text: string, ts: string, over: Record<string, unknown> = {}) => eventCallback({ channel: DM, ts, user: ANN, text, ...over });
const logOf = async (hh: SlackHarness, conversationId: string) => (await hh.keys()).filter((k) => k.includes(`{c:${conversationId}}`) && k.endsWith(':log'));

describe('slack events api: signatures and bodies', () => {
  it('answers the URL check with its challenge', async () => {
    const hh = await start();
    expect(await hh.post({ type: 'url_verification', challenge: 'ch4llenge', token: 'x' })).toEqual({ status: 200, body: { challenge: 'ch4llenge' } });
  });

  it('refuses a bad, missing or stale signature with 401 and writes nothing', async () => {
    const hh = await start();
    const body = JSON.stringify(dm('hi', '1700000001.000100'));
    const wrong = signedSlackHeaders(body, 'anotherSigningSecret0123456789');
    const stale = signedSlackHeaders(body, SLACK_SIGNING_SECRET, Math.floor(Date.now() / 1000) - 600);
    const tampered = signedSlackHeaders(body.replace('hi', 'ho'));
    for (const headers of [wrong, stale, tampered, {}]) expect((await hh.post(body, headers)).status).toBe(401);
    expect((await postClick(hh.http, { type: 'block_actions' }, wrong)).status).toBe(401);
    expect(hh.host.received).toEqual([]);
    expect(await hh.keys()).toEqual([]);
  });

  it('answers a malformed body 400, naming the problem, and writes nothing', async () => {
    const hh = await start();
    expect(await hh.post('{not json')).toEqual({ status: 400, body: { error: 'body is not valid JSON' } });
    expect((await hh.post({ type: 'event_callback' })).status).toBe(400);
    const badTs = await hh.post(dm('hi', 'yesterday'));
    expect(badTs).toEqual({ status: 400, body: { error: expect.stringContaining('bad event: ts') } });
    expect((await postClick(hh.http, { type: 'block_actions', user: { id: ANN }, actions: [] })).status).toBe(400);
    expect(hh.host.received).toEqual([]);
    expect(await hh.keys()).toEqual([]);
  });

  it('answers 503 when the host cannot reach Redis, so Slack retries, and writes nothing', async () => {
    const dead = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
    dead.on('error', () => undefined); // the refused connection is the point of the test
    const hh = await start({}, { hostRedis: dead });
    try {
      expect(await hh.post(dm('hi', '1700000001.000100'))).toEqual({ status: 503, body: { error: 'redis unreachable' } });
      expect(await hh.keys()).toEqual([]);
    } finally {
      dead.disconnect();
    }
  });
});

describe('slack events api: messages', () => {
  it('ingests a DM once however often Slack retries it (X-Slack-Retry-Num)', async () => {
    const hh = await start();
    const body = JSON.stringify(dm('hello bot', '1700000001.000100'));
    const answers = [];
    for (let retry = 0; retry < 3; retry++) {
      const headers = { ...signedSlackHeaders(body), ...(retry > 0 && { 'x-slack-retry-num': String(retry), 'x-slack-retry-reason': 'http_timeout' }) };
      answers.push(await hh.post(body, headers));
    }
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(hh.host.results.map((r) => (r.kind === 'ingested' ? r.result.kind : r.kind))).toEqual(['new-run', 'duplicate', 'duplicate']);
    expect(hh.host.received[0]).toMatchObject({
      conversationId: `slack:${DM}`,
      updateKey: `slack:${DM}:1700000001.000100`,
      chatId: DM,
      sender: { id: ANN },
      text: 'hello bot',
    });
    expect(hh.host.received[0]?.group).toBeUndefined();
    const [log] = await logOf(hh, `slack:${DM}`);
    expect(await hh.redis.xlen(log!)).toBe(1);
  });

  it('makes one update of a mention that arrives as app_mention and as message, and starts a thread with it', async () => {
    const hh = await start();
    const ts = '1700000002.000200';
    const text = `<@${SLACK_BOT_USER}> what is &lt;this&gt;? see <https://example.com|the page>`;
    expect((await hh.post(eventCallback({ type: 'app_mention', channel: CHAN, ts, user: ANN, text }))).status).toBe(200);
    expect((await hh.post(eventCallback({ channel: CHAN, channelType: 'channel', ts, user: ANN, text }))).status).toBe(200);
    expect(hh.host.results.map((r) => (r.kind === 'ingested' ? r.result.kind : r.kind))).toEqual(['new-run', 'duplicate']);
    expect(hh.host.received[0]).toMatchObject({
      conversationId: `slack:${CHAN}:${ts}`,
      updateKey: `slack:${CHAN}:${ts}`,
      text: 'what is <this>? see the page (https://example.com)',
      group: true,
    });
  });

  it('reads at once messages of 40 000 crafted characters of unclosed links, mentions and channels', { timeout: 2500 }, async () => {
    const hh = await start();
    const units = ['<http:a', '<mailto:a', '<https:a|b', '<@U|', '<#C|', '<@U0|a'];
    const crafted = (n: number) => units.map((u, i) => `${u.repeat(Math.floor(n / u.length))} ${i} <https://example.com|the page>`);
    // Slack's own limit: read whole, then refused for the host's 16 000.
    for (const [i, text] of [...crafted(39_900), ...crafted(39_900)].entries()) {
      expect(await hh.post(dm(text, `1700000009.${String(i).padStart(6, '0')}`))).toEqual({
        status: 400,
        body: { error: expect.stringContaining('longer than 16000') },
      });
    }
    const short = crafted(15_900);
    for (const [i, text] of short.entries()) expect((await hh.post(dm(text, `1700000010.${String(i).padStart(6, '0')}`))).status).toBe(200);
    // Nothing in the crafted runs is an entity; the link after them still is.
    const read = hh.host.received.slice(-short.length).map((m) => m.text);
    const expected = short.map((t) => t.replace('<https://example.com|the page>', 'the page (https://example.com)'));
    expect(read.map((t, i) => t === expected[i])).toEqual(short.map(() => true));
  });

  it('answers later messages of a thread it is in without a mention, and only those', async () => {
    const hh = await start();
    const root = '1700000003.000100';
    // A message in a thread the bot is not in: nothing written.
    await hh.post(eventCallback({ channel: CHAN, channelType: 'channel', ts: '1700000003.000200', threadTs: root, user: BOB, text: 'chatting' }));
    expect(hh.host.received).toEqual([]);
    expect(await hh.keys()).toEqual([]);

    await hh.post(eventCallback({ type: 'app_mention', channel: CHAN, ts: root, user: ANN, text: `<@${SLACK_BOT_USER}> help` }));
    const reply = await hh.post(eventCallback({ channel: CHAN, channelType: 'channel', ts: '1700000003.000300', threadTs: root, user: BOB, text: 'more' }));
    expect(reply).toEqual({ status: 200, body: { ok: true, result: 'ingested' } });
    expect(hh.host.received.map((m) => [m.conversationId, m.text])).toEqual([
      [`slack:${CHAN}:${root}`, 'help'],
      [`slack:${CHAN}:${root}`, 'more'],
    ]);
  });

  it('ignores channel messages without a mention, bot messages, edits and deletions, writing nothing', async () => {
    const hh = await start();
    const ignored = [
      eventCallback({ channel: CHAN, channelType: 'channel', ts: '1700000004.000100', user: ANN, text: 'just talking' }),
      dm('from a bot', '1700000004.000200', { botId: 'B0000XYZ' }),
      dm('me', '1700000004.000300', { user: SLACK_BOT_USER }),
      dm('edited', '1700000004.000400', { subtype: 'message_changed' }),
      dm('', '1700000004.000500', { subtype: 'message_deleted' }),
      { type: 'event_callback', event_id: 'Ev1', event: { type: 'reaction_added', user: ANN } },
    ];
    const answers = [];
    for (const body of ignored) answers.push(await hh.post(body));
    expect(answers.map((a) => [a.status, a.body.ignored])).toEqual([
      [200, 'not-addressed'],
      [200, 'from-a-bot'],
      [200, 'from-a-bot'],
      [200, 'not-a-message'],
      [200, 'not-a-message'],
      [200, 'event-type'],
    ]);
    expect(hh.host.received).toEqual([]);
    expect(await hh.keys()).toEqual([]);
  });

  it('refuses /stop in a channel thread from someone who is not an admin, and takes it from a configured admin', async () => {
    const hh = await start({ admins: [ANN] });
    const root = '1700000005.000100';
    await hh.post(eventCallback({ type: 'app_mention', channel: CHAN, ts: root, user: ANN, text: `<@${SLACK_BOT_USER}> start` }));
    await hh.post(
      eventCallback({ type: 'app_mention', channel: CHAN, ts: '1700000005.000200', threadTs: root, user: BOB, text: `<@${SLACK_BOT_USER}> /stop` }),
    );
    await hh.post(
      eventCallback({ type: 'app_mention', channel: CHAN, ts: '1700000005.000300', threadTs: root, user: ANN, text: `<@${SLACK_BOT_USER}> /stop` }),
    );
    expect(hh.host.results.slice(1)).toMatchObject([
      { kind: 'command', command: 'stop', reply: 'Only admins can use /stop here.' },
      { kind: 'command', command: 'stop', duplicate: false },
    ]);
    // Replies go into the thread.
    const texts = hh.fake.messages.filter((m) => m.channel === CHAN && m.threadTs === root).map((m) => m.text);
    expect(texts[0]).toBe('Only admins can use /stop here.');
    expect(texts).toHaveLength(2);
  });
});

describe('slack events api: files', () => {
  it('records a shared file as an attachment and fetches it with the bot token, and sends the token to no other host', async () => {
    const hh = await start({ filesOrigins: [] });
    const file = hh.fake.addFile('notes.txt', 'text/plain', Buffer.from('file body'));
    await hh.post(dm('', '1700000006.000100', { subtype: 'file_share', files: [file] }));
    const [message] = hh.host.received;
    expect(message?.attachments).toEqual([{ kind: 'file', ref: file.url_private_download, name: 'notes.txt', mime: 'text/plain', size: 9 }]);

    const fetched = await hh.plugin.outbound.fetchAttachment!(message!.attachments![0]!, { maxBytes: 1024 });
    expect(Buffer.from(fetched.data).toString()).toBe('file body');
    await expect(hh.plugin.outbound.fetchAttachment!({ kind: 'file', ref: file.url_private_download }, { maxBytes: 4 })).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    await expect(hh.plugin.outbound.fetchAttachment!({ kind: 'file', ref: 'https://evil.example/steal' }, { maxBytes: 1024 })).rejects.toThrow(
      /not one of Slack's/,
    );
  });
});
