/**
 * A group member takes their messages out of the profile the operator bound
 * their room to by writing in a thread: a Matrix thread's conversation is
 * `<room's conversation>/<root event id>`, the root any event id the member
 * names, and a chat binding covered a room's conversation followed by `:`
 * only. Through the real Matrix plugin and channel host, the runner with the
 * profiles feature, and two fake model servers (the room's profile's and the
 * base model's).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runnerFeatures } from '../../app/features/index.js';
import type { HttpServer } from '../../host/http.js';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { startRunner } from '../../runner/main.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { loadProfiles } from '../../src/people/profiles.js';
import { type FakeMatrix, MATRIX_ALICE, MATRIX_BOB, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { waitFor } from '../../testing/wait.js';
import { matrixPlugin, startMatrixHost, untilSyncing } from '../channels/matrix-harness.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';

const ROOM_PROMPT = 'You answer this room in one line, without tools.';

let matrix: FakeMatrix;
let bound: FakeOpenAIServer;
let base: FakeOpenAIServer;
let h: RunnerHarness;
let plugin: ChannelPlugin | undefined;
let http: HttpServer | undefined;

beforeEach(async () => {
  [matrix, bound, base] = await Promise.all([startFakeMatrix(), startFakeOpenAI(), startFakeOpenAI()]);
  bound.script(() => ({ text: 'from the room profile' }));
  base.script(() => ({ text: 'from the base model' }));
  h = await RunnerHarness.start();
});

afterEach(async () => {
  await plugin?.stop();
  await http?.close();
  plugin = undefined;
  http = undefined;
  await h.close();
  await Promise.all([matrix.close(), bound.close(), base.close()]);
});

/** The room's bot: the room bound to a profile on `bound`, everything else on `base`. */
async function start(room: string): Promise<void> {
  const model = (url: string, name: string) => ({ provider: 'openai-compatible' as const, baseURL: url, name, contextWindow: 32_000 });
  const config = {
    ...h.ctx.config,
    model: { ...h.ctx.config.model, ...model(base.url, 'base-model') },
    profiles: { room: { model: model(bound.url, 'room-model'), systemPrompt: ROOM_PROMPT, tools: [] } },
    bindings: [{ profile: 'room', chat: `matrix:${room}` }],
  };
  const channel = matrixPlugin(h, matrix);
  plugin = channel;
  http = await startMatrixHost(h, channel);
  h.runners.push(
    await startRunner(
      { ...h.ctx, config },
      {
        plugin: createLocalAgentPlugin({ builtins: { currentTime: false }, maxRetries: 0 }),
        resolveOutbound: (cid) => (cid.startsWith('matrix:') ? channel.outbound : undefined),
        lockDurationMs: 2000,
        stalledIntervalMs: 500,
        features: runnerFeatures(),
      },
    ),
  );
  await untilSyncing(matrix);
}

describe('a thread of a room bound to a profile', () => {
  it('is answered under the room’s profile, whatever root a member names', async () => {
    const room = matrix.createRoom([matrix.userId, MATRIX_ALICE, MATRIX_BOB]);
    await start(room);
    matrix.message(room, MATRIX_BOB, `${matrix.userId} hello room`);
    await waitFor(() => bound.requests.length + base.requests.length >= 1, 15_000, 'the room message reaches a model');
    // A root no one posted: the member chooses it, and with it the thread's conversation id.
    const inThread = { rel_type: 'm.thread', event_id: '$made-up-root', is_falling_back: true, 'm.in_reply_to': { event_id: '$made-up-root' } };
    matrix.message(room, MATRIX_BOB, `${matrix.userId} hello thread`, { relatesTo: inThread });
    await waitFor(() => bound.requests.length + base.requests.length >= 2, 15_000, 'the thread message reaches a model');

    expect(base.requests).toEqual([]);
    expect(bound.requests.map((r) => r.body.model)).toEqual(['room-model', 'room-model']);
    expect(bound.requests.map((r) => r.body.messages[0])).toEqual([
      { role: 'system', content: ROOM_PROMPT },
      { role: 'system', content: ROOM_PROMPT },
    ]);
  });

  it('and a Teams channel thread (`;messageid=`) is bound as its channel is', async () => {
    const profiles = await loadProfiles({ provider: 'openai', name: 'gpt-4o-mini', contextWindow: 128_000, outputReserve: 4096 }, { room: {} }, [
      { profile: 'room', chat: 'teams:19:abc@thread.tacv2' },
    ]);
    expect(profiles.resolve('teams:19:abc@thread.tacv2;messageid=1699999999999').name).toBe('room');
    // A longer channel id is another channel, not a thread of this one.
    expect(profiles.resolve('teams:19:abc@thread.tacv2x').name).toBe('default');
  });
});

describe('a topic of a group whose tool policy denies a tool', () => {
  it('is denied it too: the group’s entry in `conversations` covers its topics and threads', async () => {
    const pay: AgentTool = { name: 'pay', description: 'pays', inputSchema: z.object({}), execute: async () => ({ paid: true }) };
    const policy = { conversations: { 'telegram:-100779': { tools: { pay: 'deny' as const } } } };
    await h.startRunner(createLocalAgentPlugin({ model: fakeModel(base.url), tools: [pay], builtins: { currentTime: false }, toolbox: { policy } }));
    // A member writes in a topic of the group (`:<topic>`), and in another group whose id merely starts the same.
    await h.ingest('pay me', { conversationId: 'telegram:-100779:7' });
    await base.waitForRequests(1, 10_000);
    await h.ingest('pay me', { conversationId: 'telegram:-1007790' });
    await base.waitForRequests(2, 10_000);
    const offered = base.requests.map((r) => (r.body.tools ?? []).map((t: { function: { name: string } }) => t.function.name).includes('pay'));
    expect(offered).toEqual([false, true]);
  });
});
