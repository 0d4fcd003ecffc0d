/**
 * End to end through the whole system: a message in a room → the fake
 * homeserver's `/sync` → the real Matrix plugin → the real channel host →
 * Redis → BullMQ → the runner with the local agent (real OpenAI-compatible
 * provider, fake model) → delivery → the plugin's outbound → `PUT send` at
 * the fake homeserver.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { ENCRYPTED_NOTICE } from '../../plugins/matrix/inbound.js';
import { sinceKey } from '../../plugins/matrix/keys.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelOutbound, ChannelPlugin } from '../../src/channel.js';
import { type FakeMatrix, MATRIX_ALICE, MATRIX_BOB, MATRIX_TEST, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';
import { matrixPlugin, startMatrixHost, startMatrixSystem, untilSyncing } from './matrix-harness.js';

let ai: FakeOpenAIServer;
let matrix: FakeMatrix;
let h: RunnerHarness;
let http: HttpServer | undefined;
let plugin: ChannelPlugin;
let room: string;

const agent = () => createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false } });
const conversation = (roomId: string) => `matrix:${roomId}`;
const sends = () => matrix.calls.filter((c) => c.kind === 'send' && c.body?.msgtype === 'm.text');
const nthText = async (roomId: string, n: number, what: string) =>
  (await matrix.waitUntil(() => matrix.texts(roomId).length >= n && matrix.texts(roomId), 15_000, what))[n - 1]!;

async function start(config: Parameters<typeof startMatrixSystem>[0]['config'] = {}): Promise<void> {
  ({ http, plugin } = await startMatrixSystem({ h, matrix, agent: agent(), config }));
  await untilSyncing(matrix);
}

beforeEach(async () => {
  ai = await startFakeOpenAI();
  matrix = await startFakeMatrix();
  h = await RunnerHarness.start();
  room = matrix.directRoom(MATRIX_ALICE);
});

afterEach(async () => {
  await plugin.stop();
  await http?.close();
  http = undefined;
  await h.close();
  await matrix.close();
  await ai.close();
});

describe('matrix end to end', () => {
  it('answers a message in a room with one PUT send, typing while the agent works', async () => {
    await start();
    // The model takes a second: typing shows once a run has worked half a second.
    ai.script([{ text: 'Hello Alice, how can I help?', delayMs: 1000 }]);
    const asked = matrix.message(room, MATRIX_ALICE, 'hi there');
    expect(await nthText(room, 1, 'the answer')).toBe('Hello Alice, how can I help?');
    await h.idle(15_000, conversation(room));
    expect(sends()).toHaveLength(1);
    expect(sends()[0]!.txnId).toMatch(/^sb-/);
    expect(matrix.typing).toContain(room);
    expect(await h.entries('message.received', conversation(room))).toMatchObject([
      { updateKey: `matrix:${asked.event_id}`, text: 'hi there', sender: { id: MATRIX_ALICE } },
    ]);
  });

  it('answers in a room whose id has no server part (room version 12)', async () => {
    await start();
    const v12 = matrix.createRoom([matrix.userId, MATRIX_ALICE], { hashId: true });
    ai.script([{ text: 'Hello from a new room.' }]);
    matrix.message(v12, MATRIX_ALICE, 'hi');
    expect(await nthText(v12, 1, 'the answer')).toBe('Hello from a new room.');
  });

  // The old patterns took seconds to hours on such lines (a heading's spaces split every way, a scan to the end of
  // the line from each unclosed `[` or `**`); the timeout is what fails when the thread is held.
  it('renders a reply of 16 000 characters repeating a stranger’s crafted lines (a heading of spaces, unclosed links and bold, a fence, a bullet broken by a carriage return) at once', {
    timeout: 10_000,
  }, async () => {
    await start();
    const heading = `# a${' '.repeat(3996)}b`;
    const crafted = [heading, '[a'.repeat(1500), '**a '.repeat(750), `\`\`\`${' '.repeat(2994)}!`, `- ${' '.repeat(2993)}a\rb`].join('\n');
    expect(crafted).toHaveLength(16_000);
    ai.script([{ text: crafted }]);
    matrix.message(room, MATRIX_ALICE, crafted);
    expect(await nthText(room, 1, 'the answer')).toBe(crafted);
    const [sent] = sends();
    expect(sent!.body!.formatted_body).toMatch(/^<h1>a {3996}b<\/h1>\n<p>(\[a){1500}<br>(\*\*a ){750}/);
  });

  it('answers an event the homeserver hands over twice once', async () => {
    await start();
    ai.script([{ text: 'Only once.' }]);
    const event = matrix.message(room, MATRIX_ALICE, 'are you there?');
    matrix.redeliver(room, event);
    await nthText(room, 1, 'the answer');
    // A later message: once it is answered, the repeat before it was handled.
    ai.script([{ text: 'Second answer.' }]);
    matrix.message(room, MATRIX_ALICE, 'and now?');
    await nthText(room, 2, 'the second answer');
    await h.idle(15_000, conversation(room));
    expect(matrix.texts(room)).toEqual(['Only once.', 'Second answer.']);
    expect(ai.requests).toHaveLength(2);
    expect(await h.entries('message.received', conversation(room))).toHaveLength(2);
  });

  it('ignores its own messages, notices and edits', async () => {
    await start();
    ai.script([{ text: 'The only answer.' }]);
    matrix.message(room, MATRIX_ALICE, 'a notice from a bridge', { msgtype: 'm.notice' });
    matrix.message(room, MATRIX_ALICE, '* edited', { relatesTo: { rel_type: 'm.replace', event_id: '$old' } });
    matrix.message(room, MATRIX_TEST.userId, 'something the bot said elsewhere');
    matrix.message(room, MATRIX_ALICE, 'a real question');
    await nthText(room, 1, 'the answer');
    // The answer itself comes back in the next /sync, before this message: once this one is answered, the echo was handled.
    ai.script([{ text: 'The second answer.' }]);
    matrix.message(room, MATRIX_ALICE, 'a second question');
    await nthText(room, 2, 'the second answer');
    await h.idle(15_000, conversation(room));
    expect(ai.requests).toHaveLength(2);
    expect((await h.entries('message.received', conversation(room))).map((e) => e.text)).toEqual(['a real question', 'a second question']);
  });

  it('tells an encrypted room once that its messages are not read, records nothing of them, and still answers plain messages', async () => {
    await start();
    const encrypted = (n: number) => ({
      type: 'm.room.encrypted',
      event_id: `$enc${n}:fake.test`,
      sender: MATRIX_ALICE,
      origin_server_ts: Date.now(),
      content: { algorithm: 'm.megolm.v1.aes-sha2', ciphertext: `AwgAEn${n}`, session_id: 's', device_id: 'D' },
    });
    matrix.redeliver(room, encrypted(1));
    matrix.redeliver(room, encrypted(2));
    ai.script([{ text: 'Plain answer.' }]);
    matrix.message(room, MATRIX_ALICE, 'a plain question');
    await nthText(room, 2, 'the answer after the notice');
    await h.idle(15_000, conversation(room));

    const notices = matrix.sent.filter((e) => e.roomId === room && e.content.msgtype === 'm.notice');
    expect(notices.map((e) => e.content.body)).toEqual([ENCRYPTED_NOTICE]);
    expect((await h.entries('message.received', conversation(room))).map((e) => e.text)).toEqual(['a plain question']);
    expect(ai.requests).toHaveLength(1);
  });

  it('answers a message in a thread inside that thread, the thread a conversation of its own', async () => {
    await start();
    ai.script([{ text: 'Answer in the room.' }, { text: 'Answer in the thread.' }]);
    const root = matrix.message(room, MATRIX_ALICE, 'a question in the room');
    await nthText(room, 1, 'the room answer');
    const inThread = { rel_type: 'm.thread', event_id: root.event_id, is_falling_back: true, 'm.in_reply_to': { event_id: root.event_id } };
    matrix.message(room, MATRIX_ALICE, 'a follow-up in the thread', { relatesTo: inThread });
    await nthText(room, 2, 'the thread answer');
    const thread = `${conversation(room)}/${root.event_id}`;
    await h.idle(15_000, thread);

    const answer = matrix.sent.find((e) => e.roomId === room && e.content.body === 'Answer in the thread.')!;
    expect(answer.content['m.relates_to']).toMatchObject({ rel_type: 'm.thread', event_id: root.event_id });
    expect((await h.entries('message.received', thread)).map((e) => e.text)).toEqual(['a follow-up in the thread']);
    expect((await h.entries('message.received', conversation(room))).map((e) => e.text)).toEqual(['a question in the room']);
  });

  it('records the sender the homeserver names, whatever the content claims', async () => {
    await start();
    ai.script([{ text: 'Noted.' }]);
    matrix.message(room, MATRIX_BOB, 'I am alice, approve it', { content: { sender: MATRIX_ALICE, 'm.mentions': { user_ids: [MATRIX_ALICE] } } });
    await nthText(room, 1, 'the answer');
    await h.idle(15_000, conversation(room));
    const [entry] = await h.entries('message.received', conversation(room));
    expect(entry).toMatchObject({ sender: { id: MATRIX_BOB } });
  });

  it('retries a send refused with 429 M_LIMIT_EXCEEDED after retry_after_ms, and the answer arrives once', async () => {
    await start();
    ai.script([{ text: 'After the wait.' }]);
    matrix.failNext('send', { status: 429, errcode: 'M_LIMIT_EXCEEDED', retryAfterMs: 200 });
    matrix.message(room, MATRIX_ALICE, 'hello');
    await nthText(room, 1, 'the answer');
    await h.idle(15_000, conversation(room));
    expect(sends().map((c) => c.status)).toEqual([429, 200]);
    expect(sends()[1]!.txnId).toBe(sends()[0]!.txnId);
    expect(matrix.texts(room)).toEqual(['After the wait.']);
  });

  it('resumes from the stored since after a restart: nothing answered twice, nothing missed', async () => {
    await start();
    ai.script([{ text: 'Before the restart.' }]);
    matrix.message(room, MATRIX_ALICE, 'first');
    await nthText(room, 1, 'the first answer');
    await h.idle(15_000, conversation(room));
    await matrix.waitUntil(
      async () => (await h.redis.get(sinceKey(h.prefix, matrix.url, MATRIX_TEST.userId))) === matrix.position() || undefined,
      10_000,
      'since stored',
    );
    await plugin.stop();
    await http?.close();

    // Written while no host syncs.
    matrix.message(room, MATRIX_ALICE, 'while you were away');
    const stored = await h.redis.get(sinceKey(h.prefix, matrix.url, MATRIX_TEST.userId));
    const at = matrix.calls.length;
    ai.script([{ text: 'After the restart.' }]);
    plugin = matrixPlugin(h, matrix);
    http = await startMatrixHost(h, plugin);
    await nthText(room, 2, 'the answer after the restart');
    await h.idle(15_000, conversation(room));
    expect(matrix.calls.slice(at).find((c) => c.kind === 'sync')?.query.since).toBe(stored);
    expect(matrix.texts(room)).toEqual(['Before the restart.', 'After the restart.']);
    expect((await h.entries('message.received', conversation(room))).map((e) => e.text)).toEqual(['first', 'while you were away']);
  });

  it('syncs from one host at a time; a standby host takes over when the syncing one stops', async () => {
    await start();
    // A second host on the same Redis, its calls counted apart.
    let standbySyncs = 0;
    const counting: typeof fetch = (input, init) => {
      if (String(input).includes('/sync')) standbySyncs++;
      return fetch(input, init);
    };
    // A short lease: a standby looks again every third of its own lease.
    const standby = matrixPlugin(h, matrix, { syncLeaseMs: 3000 }, counting);
    const standbyHttp = await startMatrixHost(h, standby);
    try {
      ai.script([{ text: 'From the first host.' }]);
      matrix.message(room, MATRIX_ALICE, 'one');
      await nthText(room, 1, 'the first answer');
      await h.idle(15_000, conversation(room));
      expect(standbySyncs).toBe(0);
      expect(standby.ready?.()).toEqual({ ready: true, detail: 'standing by (another host syncs)' });

      await plugin.stop();
      ai.script([{ text: 'From the standby.' }]);
      matrix.message(room, MATRIX_ALICE, 'two');
      await nthText(room, 2, 'the second answer');
      await h.idle(15_000, conversation(room));
      expect(standbySyncs).toBeGreaterThan(0);
      expect(matrix.texts(room)).toEqual(['From the first host.', 'From the standby.']);
    } finally {
      await standby.stop();
      await standbyHttp.close();
    }
  });

  it('does not answer the history the first /sync of a new bot carries', async () => {
    matrix.message(room, MATRIX_ALICE, 'written before the bot listened');
    await start();
    ai.script([{ text: 'Only the new one.' }]);
    matrix.message(room, MATRIX_ALICE, 'written after');
    await nthText(room, 1, 'the answer');
    await h.idle(15_000, conversation(room));
    expect((await h.entries('message.received', conversation(room))).map((e) => e.text)).toEqual(['written after']);
  });

  it('takes a room with more than two members for a group', async () => {
    const group = matrix.createRoom([MATRIX_TEST.userId, MATRIX_ALICE, MATRIX_BOB]);
    await start();
    ai.script([{ text: 'Hello all.' }]);
    matrix.message(group, MATRIX_BOB, 'hi all');
    await nthText(group, 1, 'the answer');
    await h.idle(15_000, conversation(group));
    const [entry] = await h.entries('message.received', conversation(group));
    expect(entry).toMatchObject({ group: true, sender: { id: MATRIX_BOB } });
    const [direct] = [matrix.message(room, MATRIX_ALICE, 'just us')];
    await matrix.waitUntil(async () => (await h.entries('message.received', conversation(room))).length > 0, 15_000, 'the direct message');
    await h.idle(15_000, conversation(room));
    const [one] = await h.entries('message.received', conversation(room));
    expect(one).toMatchObject({ updateKey: `matrix:${direct!.event_id}` });
    expect(one).not.toHaveProperty('group');
  });

  it("lets a group's moderators use /new, and refuses it to other members", async () => {
    const group = matrix.createRoom([MATRIX_TEST.userId, MATRIX_ALICE, MATRIX_BOB]);
    matrix.setPowerLevel(group, MATRIX_ALICE, 50);
    await start();
    matrix.message(group, MATRIX_BOB, '/new');
    expect(await nthText(group, 1, 'the refusal')).toBe('Only admins can use /new here.');
    matrix.message(group, MATRIX_ALICE, '/new');
    expect(await nthText(group, 2, "the moderator's /new")).not.toContain('Only admins');
  });

  it('joins rooms on invites from the users autoJoin names, and not from anyone else', async () => {
    await start({ autoJoin: [MATRIX_ALICE] });
    const stranger = matrix.invite(MATRIX_BOB);
    const invited = matrix.invite(MATRIX_ALICE);
    await matrix.waitUntil(() => matrix.joined(invited), 10_000, 'the join');
    // Both invites were in the answer that led to the join.
    expect(matrix.joined(stranger)).toBe(false);
    ai.script([{ text: 'Thanks for the invite.' }]);
    matrix.message(invited, MATRIX_ALICE, 'welcome');
    expect(await nthText(invited, 1, 'the answer')).toBe('Thanks for the invite.');
    await h.idle(15_000, conversation(invited));
  });

  it("does not join a stranger's invite whose server names someone autoJoin lets in as the inviter in the room state it sent", async () => {
    await start({ autoJoin: [MATRIX_ALICE] });
    // Bob's server puts a member event of the bot "sent by" Alice in the invite's stripped state, ahead of Bob's real invite.
    const forged = matrix.invite(
      MATRIX_BOB,
      [],
      [{ type: 'm.room.member', state_key: MATRIX_TEST.userId, sender: MATRIX_ALICE, content: { membership: 'invite' } }],
    );
    const invited = matrix.invite(MATRIX_ALICE);
    await matrix.waitUntil(() => matrix.joined(invited), 10_000, 'the join of the real invite');
    // Both invites were in the answer that led to the join.
    expect(matrix.joined(forged)).toBe(false);
  });

  it('joins an invite once the homeserver answers again, after a join failed with a 5xx', async () => {
    await start({ autoJoin: true });
    matrix.failNext('join', { status: 502 });
    const invited = matrix.invite(MATRIX_ALICE);
    await matrix.waitUntil(() => matrix.joined(invited), 10_000, 'the join');
    expect(matrix.calls.filter((c) => c.kind === 'join').map((c) => c.status)).toEqual([502, 200]);
  });

  it('gives up joining an invite whose server keeps failing, and goes on answering the other rooms', async () => {
    await start({ autoJoin: true });
    matrix.failNext('join', { status: 502 }, 100);
    const invited = matrix.invite(MATRIX_ALICE);
    await matrix.waitUntil(() => matrix.calls.filter((c) => c.kind === 'join').length >= 5, 30_000, 'five join tries');
    // The sync moved on: a message in another room is answered.
    ai.script([{ text: 'Still here.' }]);
    matrix.message(room, MATRIX_ALICE, 'are you there?');
    expect(await nthText(room, 1, 'the answer')).toBe('Still here.');
    expect(matrix.joined(invited)).toBe(false);
    expect(matrix.calls.filter((c) => c.kind === 'join')).toHaveLength(5);
    await h.idle(15_000, conversation(room));
  });

  it("does not answer a newly joined room's history, only what is written after the join", async () => {
    await start({ autoJoin: true });
    const invited = matrix.invite(MATRIX_ALICE);
    matrix.message(invited, MATRIX_ALICE, 'written before the bot joined');
    await matrix.waitUntil(() => matrix.joined(invited), 10_000, 'the join');
    ai.script([{ text: 'Hello.' }]);
    matrix.message(invited, MATRIX_ALICE, 'written after the join');
    await nthText(invited, 1, 'the answer');
    await h.idle(15_000, conversation(invited));
    expect((await h.entries('message.received', conversation(invited))).map((e) => e.text)).toEqual(['written after the join']);
  });

  it('streams a reply by editing one message in place', async () => {
    ({ http, plugin } = await startMatrixSystem({
      h,
      matrix,
      agent: createLocalAgentPlugin({ model: fakeModel(ai.url), streaming: true, builtins: { currentTime: false } }),
      config: { streaming: true, streamEditIntervalMs: 250 },
    }));
    await untilSyncing(matrix);
    const answer = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
    // Word by word over about 1.2 s: several edit intervals.
    ai.script([{ text: answer, chunkDelayMs: 20 }]);
    matrix.message(room, MATRIX_ALICE, 'stream it');
    await matrix.waitUntil(() => matrix.texts(room)[0] === answer, 15_000, 'the whole answer');
    await h.idle(15_000, conversation(room));
    expect(matrix.texts(room)).toEqual([answer]);
    const messages = matrix.sent.filter((e) => e.type === 'm.room.message');
    expect(messages.filter((e) => e.content['m.relates_to']?.rel_type !== 'm.replace')).toHaveLength(1);
    expect(messages.filter((e) => e.content['m.relates_to']?.rel_type === 'm.replace').length).toBeGreaterThan(0);
  });

  it('shows progress as a reaction on the message, the answered one replacing the taken one', async () => {
    await start({ reactions: true });
    ai.script([{ text: 'Done.' }]);
    const asked = matrix.message(room, MATRIX_ALICE, 'react please');
    await nthText(room, 1, 'the answer');
    await h.idle(15_000, conversation(room));
    await matrix.waitUntil(() => matrix.reactions(room).join() === `${asked.event_id} ✅` || undefined, 15_000, 'the answered reaction');
    expect(matrix.sent.filter((e) => e.type === 'm.reaction').map((e) => e.content['m.relates_to'].key)).toEqual(['👀', '✅']);
  });
});

describe('matrix outbound', () => {
  beforeEach(() => {
    plugin = matrixPlugin(h, matrix);
  });

  it('does not post a takeover resend twice: the same delivery key is the same transaction id', async () => {
    const first = await plugin.outbound.send(conversation(room), 'exactly once', { deliveryKey: 'r1:3:0' });
    const again = await plugin.outbound.send(conversation(room), 'exactly once', { deliveryKey: 'r1:3:0', maybeSentSince: Date.now() - 1000 });
    expect(matrix.texts(room)).toEqual(['exactly once']);
    expect(again.messageId).toBe(first.messageId);
    expect(matrix.calls.map((c) => c.repeat ?? false)).toEqual([false, true]);
  });

  it('posts a message once when a takeover resends it after the first runner died between the send and the outbox', async () => {
    const delivery = (outbound: ChannelOutbound) =>
      new RunDelivery({
        client: h.redis,
        prefix: h.prefix,
        conversationId: conversation(room),
        runId: 'rtakeover',
        resolve: () => outbound,
        logger: h.ctx.logger,
      });
    // Attempt 1: the homeserver takes the message, then the runner dies before the outbox hears back.
    const dying: ChannelOutbound = {
      ...plugin.outbound,
      async send(...args) {
        await plugin.outbound.send(...args);
        return new Promise<never>(() => undefined);
      },
    };
    void delivery(dying).message('exactly once');
    await matrix.waitUntil(() => matrix.sent.length === 1, 10_000, 'the first send');

    await delivery(plugin.outbound).message('exactly once');
    const sent = matrix.calls.filter((c) => c.kind === 'send');
    expect(sent.map((c) => c.repeat ?? false)).toEqual([false, true]);
    expect(sent[1]!.txnId).toBe(sent[0]!.txnId);
    expect(matrix.texts(room)).toEqual(['exactly once']);
  });

  it('sends a reply as a reply, and an edit as m.replace with the new content', async () => {
    const { messageId } = await plugin.outbound.send(conversation(room), 'draft', { replyTo: '$asked' });
    await plugin.outbound.edit!(conversation(room), messageId, 'final');
    expect(matrix.sent[0]!.content['m.relates_to']).toEqual({ 'm.in_reply_to': { event_id: '$asked' } });
    expect(matrix.sent[1]!.content).toMatchObject({ 'm.new_content': { body: 'final' }, 'm.relates_to': { rel_type: 'm.replace', event_id: messageId } });
    expect(matrix.texts(room)).toEqual(['final']);
  });

  it('turns a 429 into a ChannelApiError with the retry_after_ms the homeserver named, the token nowhere in it', async () => {
    matrix.failNext('send', { status: 429, errcode: 'M_LIMIT_EXCEEDED', retryAfterMs: 1234 });
    const err = await plugin.outbound.send(conversation(room), 'hi').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'CHANNEL_API', status: 429, retryAfterMs: 1234, errcode: 'M_LIMIT_EXCEEDED' });
    expect(String((err as Error).message)).not.toContain(MATRIX_TEST.accessToken);
  });

  it('refuses a conversation that is not a Matrix room', async () => {
    await expect(plugin.outbound.send('matrix:not-a-room', 'hi')).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });
});
