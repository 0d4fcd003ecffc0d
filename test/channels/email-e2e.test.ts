/**
 * End to end through the whole system against real mail servers: alice's
 * mail → OpenSMTPD → the bot's maildir → dovecot → IMAP IDLE → the real
 * email plugin → the real channel host → Redis → BullMQ → the runner with
 * the local agent (fake model) → delivery → SMTP → alice's INBOX.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { threadKey } from '../../plugins/email/keys.js';
import { idPart } from '../../plugins/email/normalize.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type MailServers, startMailServers } from '../../testing/fakes/mail-servers.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { fakeModel, gatedTool, RunnerHarness, waitFor } from '../runner/harness.js';
import { AUTHSERV, appendTo, mailToBot, passedAuth, rawMail, repliesIn, startEmailSystem, untilReplies } from './email-harness.js';

let servers: MailServers;
let ai: FakeOpenAIServer;
let h: RunnerHarness;
let http: HttpServer | undefined;
let plugin: ChannelPlugin | undefined;
let lookup: ReturnType<typeof gatedTool>;

const conversation = (root: string) => `email:${idPart(root)}`;
const agent = () => createLocalAgentPlugin({ model: fakeModel(ai.url), tools: [lookup.tool], builtins: { currentTime: false } });

async function start(config: Parameters<typeof startEmailSystem>[0]['config'] = {}): Promise<void> {
  ({ http, plugin } = await startEmailSystem({ h, servers, agent: agent(), config }));
}

async function stop(): Promise<void> {
  await plugin?.stop();
  await http?.close();
  plugin = undefined;
  http = undefined;
}

beforeAll(async () => {
  servers = await startMailServers();
});

afterAll(async () => {
  await servers?.stop();
});

beforeEach(async () => {
  ai = await startFakeOpenAI();
  h = await RunnerHarness.start();
  lookup = gatedTool();
});

afterEach(async () => {
  await stop();
  await h.close();
  await ai.close();
});

describe('email end to end', () => {
  it('answers a mail in its thread: In-Reply-To, References, Re: subject, to the authenticated From, not its Reply-To', async () => {
    await start();
    ai.script([{ text: 'Hello Alice, **how** can I help?' }]);
    const id = await mailToBot(servers, { subject: 'Opening hours', text: 'When are you open?', replyTo: 'victim@example.test' });
    const [reply] = await untilReplies(servers, id, 1);
    expect(reply!.text?.trim()).toBe('Hello Alice, **how** can I help?');
    expect(reply!.subject).toBe('Re: Opening hours');
    expect(reply!.inReplyTo).toBe(id);
    expect(reply!.references).toBe(id);
    expect(reply!.to && !Array.isArray(reply!.to) && reply!.to.value[0]?.address).toBe(servers.alice.address);
    expect(reply!.messageId).toMatch(/^<sb\.[A-Za-z0-9_-]{32}@example\.test>$/);
    expect(reply!.headers.get('auto-submitted')).toBe('auto-replied');
    await h.idle(15_000, conversation(id));
    expect(await h.entries('message.received', conversation(id))).toMatchObject([
      { updateKey: `email:${idPart(id)}`, text: 'When are you open?', sender: { id: servers.alice.address } },
    ]);
  });

  it('keeps a reply to the reply in the same conversation, with the quoted history cut off', async () => {
    await start();
    ai.script([{ text: 'First answer.' }, { text: 'Second answer.' }]);
    const root = await mailToBot(servers, { subject: 'Order', text: 'Where is my order?' });
    const [first] = await untilReplies(servers, root, 1);
    const quoted = `It is 4711.\n\nOn Mon, 7 Dec 2026 at 10:00, Bot <bot@example.test> wrote:\n> First answer.\n`;
    await mailToBot(servers, { subject: 'Re: Order', text: quoted, inReplyTo: first!.messageId!, references: [root, first!.messageId!] });
    const replies = await untilReplies(servers, root, 2, 'the second reply');
    expect(replies.map((r) => r.text?.trim())).toEqual(['First answer.', 'Second answer.']);
    expect(replies[1]!.inReplyTo).not.toBe(root);
    await h.idle(15_000, conversation(root));
    expect((await h.entries('message.received', conversation(root))).map((e) => e.text)).toEqual(['Where is my order?', 'It is 4711.']);
  });

  // Cutting off the trailing quote copied the list of lines once per line, and every header of one name copied the
  // list of its values: some 25 s of the one thread for this mail. The timeout is what fails when the thread is held.
  it('answers at once a mail of 15 000 headers of one name whose quoted history is 100 000 `>` lines, with the person’s own text', {
    timeout: 12_000,
  }, async () => {
    await start();
    ai.script([{ text: 'Got it.' }]);
    const root = await mailToBot(servers, {
      text: `My answer.\n\n${'> q\n'.repeat(100_000)}`,
      headers: { 'Authentication-Results': passedAuth(servers.alice.address), 'X-Flood': Array.from({ length: 15_000 }, (_, i) => String(i)) },
    });
    const [reply] = await untilReplies(servers, root, 1);
    expect(reply!.text?.trim()).toBe('Got it.');
    expect((await h.entries('message.received', conversation(root))).map((e) => e.text)).toEqual(['My answer.']);
  });

  // Finding the code fences of a reply tried a line of backticks broken by a `\r` with every shorter run of them:
  // about 30 s of the one thread for this reply. The timeout is what fails when the thread is held.
  it('sends at once a crafted reply (a line of 199 998 backticks broken by a carriage return) split into mails of at most 100 000 characters', {
    timeout: 20_000,
  }, async () => {
    await start();
    const crafted = `${'`'.repeat(199_998)}\rx`;
    ai.script([{ text: crafted }]);
    const root = await mailToBot(servers, { text: 'Repeat after me.' });
    const replies = await untilReplies(servers, root, 2, 'both parts');
    // Two mails sent one after the other may reach the mailbox in either order (SMTP promises none).
    expect(replies.map((r) => (r.text ?? '').replace(/\s/g, '')).sort()).toEqual(['`'.repeat(100_000), `${'`'.repeat(99_998)}x`].sort());
  });

  it('answers the same mail delivered three times once', async () => {
    await start();
    ai.script([{ text: 'Only once.' }, { text: 'Barrier answer.' }]);
    const { raw, messageId } = await rawMail(servers, { text: 'Are you there?' });
    for (let i = 0; i < 3; i++) await appendTo(servers, servers.bot, raw);
    await untilReplies(servers, messageId, 1);
    // A later mail: once it is answered, the copies before it were handled.
    const barrier = await mailToBot(servers, { text: 'and now?' });
    await untilReplies(servers, barrier, 1, 'the barrier reply');
    await h.idle(15_000, conversation(messageId));
    expect(await repliesIn(servers, messageId)).toHaveLength(1);
    expect(await h.entries('message.received', conversation(messageId))).toHaveLength(1);
    expect(ai.requests).toHaveLength(2);
  });

  it('ignores a forged From: no Authentication-Results, or one from another authserv-id, or a failed check → nothing written', async () => {
    await start();
    ai.script([{ text: 'Barrier answer.' }]);
    const forged = [
      await mailToBot(servers, { text: 'I am alice, refund me', headers: {} }),
      await mailToBot(servers, { text: 'I am alice too', headers: { 'Authentication-Results': passedAuth(servers.alice.address, 'mx.attacker.test') } }),
      await mailToBot(servers, {
        text: 'dkim of another domain',
        headers: { 'Authentication-Results': `${AUTHSERV}; dkim=pass header.d=attacker.test; spf=fail smtp.mailfrom=x@attacker.test` },
      }),
    ];
    const barrier = await mailToBot(servers, { text: 'the real alice' });
    await untilReplies(servers, barrier, 1, 'the barrier reply');
    await h.idle(15_000, conversation(barrier));
    for (const id of forged) {
      expect(await h.entries('message.received', conversation(id))).toEqual([]);
      expect(await h.ctx.redis.keys(`${h.prefix}:{c:${conversation(id)}}*`)).toEqual([]);
    }
    expect(ai.requests).toHaveLength(1);
  });

  it('refuses a pass the sender wrote below the receiving server’s own Authentication-Results, which says fail', async () => {
    await start();
    ai.script([{ text: 'Barrier answer.' }]);
    const alice = servers.alice.address;
    const forged = await mailToBot(servers, {
      text: 'I am alice, refund me',
      headers: { 'Authentication-Results': passedAuth(alice) },
      receivedAuth: `${AUTHSERV}; dkim=fail header.d=example.test; spf=fail smtp.mailfrom=${alice}`,
    });
    const barrier = await mailToBot(servers, { text: 'the real alice' });
    await untilReplies(servers, barrier, 1, 'the barrier reply');
    await h.idle(15_000, conversation(barrier));
    expect(await h.entries('message.received', conversation(forged))).toEqual([]);
    expect(await h.ctx.redis.keys(`${h.prefix}:{c:${conversation(forged)}}*`)).toEqual([]);
    expect(ai.requests).toHaveLength(1);
  });

  it('ignores a signed mail that names the bot in neither To nor Cc (alice’s mail to someone else, sent on unchanged): nothing written', async () => {
    await start();
    ai.script([{ text: 'Barrier answer.' }]);
    const sentOn = await mailToBot(servers, { to: 'eve@attacker.test', subject: 'Refund', text: 'please refund order 4711 to my new account' });
    // A mail that names the bot in Cc only is answered.
    const barrier = await mailToBot(servers, { to: 'colleague@example.org', cc: servers.bot.address, text: 'a question, bot in Cc' });
    await untilReplies(servers, barrier, 1, 'the barrier reply');
    await h.idle(15_000, conversation(barrier));
    expect(await h.entries('message.received', conversation(sentOn))).toEqual([]);
    expect(await h.ctx.redis.keys(`${h.prefix}:{c:${conversation(sentOn)}}*`)).toEqual([]);
    expect(ai.requests).toHaveLength(1);
  });

  it('keeps a thread to the address that started it: another sender naming its root gets a conversation of their own, and the pending reply still goes to its person', async () => {
    await start();
    ai.script([{ toolCalls: [{ id: 'call_1', name: 'lookup', args: {} }] }, { text: 'Answer to eve.' }, { text: 'Order 4711 ships today, Alice.' }]);
    const root = await mailToBot(servers, { subject: 'My order', text: 'where is order 4711? I live at Main St 1' });
    await lookup.started;
    const victim = await h.ctx.redis.hgetall(threadKey(h.prefix, conversation(root)));
    const eve = 'eve@attacker.test';
    await mailToBot(servers, { from: eve, subject: 'Re: My order', text: 'what did I ask you?', inReplyTo: root, references: [root] });
    const own = `${conversation(root)}:${eve}`;
    await waitFor(async () => ai.requests.length === 2 && (await h.entries('message.received', own)).length === 1, 15_000, 'eve’s run in her own conversation');
    expect(await h.ctx.redis.hgetall(threadKey(h.prefix, conversation(root)))).toEqual(victim);
    lookup.release('SHIPS TODAY');
    const [reply] = await untilReplies(servers, root, 1);
    expect(reply!.text?.trim()).toBe('Order 4711 ships today, Alice.');
    expect(reply!.to && !Array.isArray(reply!.to) && reply!.to.value[0]?.address).toBe(servers.alice.address);
    await h.idle(15_000, conversation(root));
    await h.idle(15_000, own);
    expect((await h.entries('message.received', conversation(root))).map((e) => e.sender.id)).toEqual([servers.alice.address]);
    expect(await h.ctx.redis.hget(threadKey(h.prefix, conversation(root)), 'to')).toBe(servers.alice.address);
    expect(await h.ctx.redis.hget(threadKey(h.prefix, own), 'to')).toBe(eve);
    // Eve's run saw her mail only, none of alice's.
    const eveRun = ai.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: unknown }) => m.content);
    expect(eveRun).toEqual(['what did I ask you?']);
    expect(JSON.stringify(ai.requests[1]!.body)).not.toContain('Main St');
    expect(await repliesIn(servers, root)).toHaveLength(1);
  });

  it('ignores a signed mail sent again after the dedupe window: its Date is older than the window', async () => {
    await start();
    ai.script([{ text: 'Barrier answer.' }]);
    const replayed = await mailToBot(servers, { text: 'refund me, as two days ago', date: new Date(Date.now() - 2 * 86_400_000) });
    const barrier = await mailToBot(servers, { text: 'a fresh question' });
    await untilReplies(servers, barrier, 1, 'the barrier reply');
    await h.idle(15_000, conversation(barrier));
    expect(await h.entries('message.received', conversation(replayed))).toEqual([]);
    expect(ai.requests).toHaveLength(1);
  });

  it('ignores auto-replies and bounces', async () => {
    await start();
    ai.script([{ text: 'Barrier answer.' }]);
    const auth = { 'Authentication-Results': passedAuth(servers.alice.address) };
    const automatic = [
      await mailToBot(servers, { text: 'I am out of office', headers: { ...auth, 'Auto-Submitted': 'auto-replied' } }),
      await mailToBot(servers, { text: 'Vacation', headers: { ...auth, 'X-Autoreply': 'yes' } }),
      await mailToBot(servers, { text: 'Newsletter', headers: { ...auth, Precedence: 'bulk' } }),
      await mailToBot(servers, {
        from: 'MAILER-DAEMON@example.test',
        text: 'Delivery failed',
        headers: { 'Authentication-Results': passedAuth('MAILER-DAEMON@example.test') },
      }),
    ];
    const barrier = await mailToBot(servers, { text: 'a real question' });
    await untilReplies(servers, barrier, 1, 'the barrier reply');
    await h.idle(15_000, conversation(barrier));
    for (const id of automatic) expect(await h.entries('message.received', conversation(id))).toEqual([]);
    expect(ai.requests).toHaveLength(1);
  });

  it('picks up mail that arrived while it was down after a restart, exactly once', async () => {
    await start();
    ai.script([{ text: 'Before the restart.' }, { text: 'After the restart.' }]);
    const before = await mailToBot(servers, { text: 'first' });
    await untilReplies(servers, before, 1);
    await h.idle(15_000, conversation(before));
    await stop();
    const during = await mailToBot(servers, { text: 'written while the bot was down' });
    await start();
    await untilReplies(servers, during, 1, 'the reply after the restart');
    await h.idle(15_000, conversation(during));
    expect(await repliesIn(servers, before)).toHaveLength(1);
    expect(await repliesIn(servers, during)).toHaveLength(1);
    expect(ai.requests).toHaveLength(2);
  });

  it('steers a mail written while the agent works into the same run', async () => {
    await start();
    ai.script([{ toolCalls: [{ id: 'call_1', name: 'lookup', args: {} }] }, { text: 'Schedule, weekend included.' }]);
    const root = await mailToBot(servers, { subject: 'Schedule', text: 'look up the schedule' });
    await lookup.started;
    await mailToBot(servers, { subject: 'Re: Schedule', text: 'also the weekend please', inReplyTo: root, references: [root] });
    const [steered] = await waitFor(
      async () => {
        const e = await h.entries('steering.queued', conversation(root));
        return e.length > 0 && e;
      },
      15_000,
      'steering.queued',
    );
    lookup.release('SCHEDULE');
    const [reply] = await untilReplies(servers, root, 1);
    await h.idle(15_000, conversation(root));
    expect(reply!.text?.trim()).toBe('Schedule, weekend included.');
    const users = ai.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: unknown }) => m.content);
    expect(users).toEqual(['look up the schedule', 'also the weekend please']);
    expect((await h.entries('run.started', conversation(root))).map((e) => e.run)).toEqual([steered!.run]);
    expect(await repliesIn(servers, root)).toHaveLength(1);
  });
});
