/**
 * Export round trip, through the real channel host and the console: a person
 * talks (their conversations noted as they write), a runner answers, the
 * agent's memory, budgets and a schedule hold things for them, an account is
 * linked. The console downloads both exports; the conversation and the
 * person are purged; the files still hold everything Redis held, Redis holds
 * none of it but the conversation's budget counters (no one's words, kept so
 * a purge never resets a budget), and exporting again finds nothing. A missing, malformed or
 * unknown id gets a JSON error and no document.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AccessStore } from '../../host/access/store.js';
import type { HttpServer } from '../../host/http.js';
import { createChannelHost } from '../../host/receive.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin, InboundMessage } from '../../src/channel.js';
import { accessSchema } from '../../src/config/schema.js';
import { Budgets, conversationUsageKey } from '../../src/people/budget.js';
import { IdentityStore } from '../../src/people/identity.js';
import { MemoryStore } from '../../src/people/memory.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { type ConfiguredSchedules, schedulesFromConfig } from '../../src/schedules/from-config.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { CONSOLE_TOKEN, serveConsole } from '../helpers/console-api.js';
import { testHostFeatures } from '../helpers/host-features.js';
import { redisUrl } from '../helpers/redis.js';

const ALICE = 'telegram:1';
const CONVERSATION = 'telegram:1';

/** Answers `echo: <inputs>`. */
const echo: RunnerPlugin = {
  manifest: { name: 'echo', version: '1.0.0', capabilities: { steering: false, state: false } },
  async run(ctx) {
    await ctx.delivery.message(`echo: ${ctx.inputs.map((m) => m.text).join(' / ')}`);
    return { outcome: 'completed' };
  },
};

interface World {
  h: RunnerHarness;
  http: HttpServer;
  scheduling: ConfiguredSchedules;
  send(n: number, text: string): Promise<unknown>;
}

let world: World | undefined;
afterEach(async () => {
  await world?.http.close();
  await world?.scheduling.close();
  await world?.h.close();
  world = undefined;
});

/** The host's people parts (as `startHost` wires them), a runner, schedules and the console on one harness. */
async function start(): Promise<World> {
  const h = await RunnerHarness.start({ redisUrl: redisUrl(), plugin: echo });
  const config = { ...h.ctx.config, schedules: { ...h.ctx.config.schedules, enabled: true }, budgets: { identity: { tokensPerDay: 1_000_000 } } };
  const ctx = { ...h.ctx, config };
  const identities = new IdentityStore({ redis: h.redis, prefix: h.prefix });
  const scheduling = schedulesFromConfig(ctx, ['telegram'], 'steerbot-test-schedules', identities)!;
  const features = await testHostFeatures({ config, redis: h.redis, prefix: h.prefix, identities, schedules: scheduling });
  const host = createChannelHost({
    features,
    routes: { add: () => undefined },
    redis: h.redis,
    prefix: h.prefix,
    logger: ctx.logger,
    dispatch: h.dispatch,
    ingest: h.ingestService,
    enqueue: (c, r) => h.queue.enqueue(c, r),
    outbound: () => h.outbound,
  });
  const http = await serveConsole(h, {
    access: new AccessStore(h.redis, h.prefix, accessSchema.parse({}), identities),
    features,
    // The console finds a direct chat's person on the conversation's channel (only its id is read here).
    channels: [{ id: 'telegram' } as ChannelPlugin],
  });
  const send = (n: number, text: string) => {
    const message: InboundMessage = { conversationId: CONVERSATION, updateKey: `telegram:${n}`, chatId: '1', sender: { id: '1', name: 'Alice' }, text };
    return host.receive('telegram', message);
  };
  world = { h, http, scheduling, send };
  return world;
}

/** Downloads an export from the console into a file, as the button does; its status and path. */
async function download(http: HttpServer, path: string, dir: string, name: string): Promise<{ status: number; file: string }> {
  const res = await http.inject({ method: 'GET', url: `/console/api${path}`, headers: { authorization: `Bearer ${CONSOLE_TOKEN}` } });
  const file = join(dir, name);
  writeFileSync(file, res.body);
  return { status: res.statusCode, file };
}

/** Every key under the prefix, with what it holds (TTL'd dedupe keys hold only the seq an update became). */
async function everything(h: RunnerHarness): Promise<string> {
  const keys = (await h.redis.keys(`${h.prefix}:*`)).sort();
  const dump: string[] = [];
  for (const key of keys) {
    const type = await h.redis.type(key);
    if (type === 'string') dump.push(key, String(await h.redis.get(key)));
    else if (type === 'hash') dump.push(key, JSON.stringify(await h.redis.hgetall(key)));
    else if (type === 'set') dump.push(key, JSON.stringify(await h.redis.smembers(key)));
    else if (type === 'zset') dump.push(key, JSON.stringify(await h.redis.zrange(key, '0', '-1')));
    else if (type === 'list') dump.push(key, JSON.stringify(await h.redis.lrange(key, 0, -1)));
    else if (type === 'stream') dump.push(key, JSON.stringify(await h.redis.xrange(key, '-', '+')));
  }
  return dump.join('\n');
}

describe('export round trip', () => {
  it('export, purge: the export still holds what was stored, Redis no longer does, and a second export finds nothing', async () => {
    const { h, http, scheduling, send } = await start();
    await send(1, 'my order number is 4711');
    await h.idle(10_000, CONVERSATION);
    await send(2, 'and please call me Ally');
    await h.idle(10_000, CONVERSATION);
    const identities = new IdentityStore({ redis: h.redis, prefix: h.prefix });
    await identities.link('discord:11', ALICE);
    await new MemoryStore({ redis: h.redis, prefix: h.prefix }).save(ALICE, 'prefers to be called Ally');
    const budgets = new Budgets({ client: h.redis, prefix: h.prefix, settings: { identity: { tokensPerDay: 1000 }, conversation: { tokensPerDay: 1000 } } });
    await budgets.charge({ identity: ALICE, conversationId: CONVERSATION }, 321);
    const schedule = await scheduling.schedules.create(CONVERSATION, { in: '1h', prompt: 'remind Ally of order 4711' }, { createdBy: '1', owner: ALICE });
    const stored = await h.record(CONVERSATION);
    expect(stored.map((e) => e.kind)).toEqual(expect.arrayContaining(['message.received', 'run.started', 'run.ended']));

    const dir = mkdtempSync(join(tmpdir(), 'steerbot-export-'));
    const conv = await download(http, `/conversations/${encodeURIComponent(CONVERSATION)}/export`, dir, 'conversation.json');
    const person = await download(http, `/people/export?id=${encodeURIComponent('discord:11')}`, dir, 'person.json');
    expect([conv.status, person.status]).toEqual([200, 200]);

    const purge = await http.inject({
      method: 'POST',
      url: `/console/api/conversations/${encodeURIComponent(CONVERSATION)}/actions`,
      headers: { authorization: `Bearer ${CONSOLE_TOKEN}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ action: 'purge', arg: 'stop' }),
    });
    expect(purge.statusCode).toBe(200);
    const purgePerson = await http.inject({
      method: 'POST',
      url: '/console/api/access/purge',
      headers: { authorization: `Bearer ${CONSOLE_TOKEN}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ identity: ALICE }),
    });
    expect(purgePerson.statusCode).toBe(200);

    // The files hold all of it: the record exactly as stored, the runs, the counters, the schedule; the person's notes and accounts.
    const c = JSON.parse(readFileSync(conv.file, 'utf8'));
    const asStored = stored.map(({ seq, ...e }) => ({ seq, ...e }));
    expect(c.record).toEqual(asStored);
    expect(c.runs.map((r: { outcome: string }) => r.outcome)).toEqual(['completed', 'completed']);
    expect(c.usage.tokens).toEqual(expect.objectContaining({ [new Date().toISOString().slice(0, 10)]: 321 }));
    expect(c.schedules).toEqual([expect.objectContaining({ id: schedule.id, prompt: 'remind Ally of order 4711', owner: ALICE })]);
    expect(c.memoryOf).toBe(ALICE);
    const p = JSON.parse(readFileSync(person.file, 'utf8'));
    expect(p).toMatchObject({ identity: ALICE, query: 'discord:11', accounts: ['discord:11', ALICE] });
    expect(p.memory.map((n: { text: string }) => n.text)).toEqual(['prefers to be called Ally']);
    expect(Object.values(p.usage.tokens)).toContain(321);
    expect(p.schedules).toEqual([expect.objectContaining({ id: schedule.id })]);
    expect(p.conversations).toEqual([expect.objectContaining({ conversation: CONVERSATION, scope: 'full', record: asStored })]);

    // Redis holds none of it: no text, note, schedule, link or person's counter; the BullMQ timer is gone too.
    const left = await everything(h);
    for (const gone of ['4711', 'Ally', 'discord:11']) expect(left).not.toContain(gone);
    expect(await h.redis.keys(`${h.prefix}:{i:*`)).toEqual([]);
    // Only the conversation's budget counters stay (no one's words), so a purge never resets its budget.
    expect(left.split('\n').filter((line) => line.includes('"t:'))).toEqual([
      JSON.stringify(await h.redis.hgetall(conversationUsageKey(h.prefix, CONVERSATION))),
    ]);
    expect(await scheduling.schedules.queue.getDelayed()).toEqual([]);
    expect(await h.redis.keys(`${bullPrefixFor(h.prefix)}:steerbot-schedules:*`)).not.toContain(expect.stringContaining(schedule.id));

    // A second export finds nothing, and says why.
    const again = await http.inject({
      method: 'GET',
      url: `/console/api/conversations/${encodeURIComponent(CONVERSATION)}/export`,
      headers: { authorization: `Bearer ${CONSOLE_TOKEN}` },
    });
    expect([again.statusCode, again.json()]).toEqual([404, { error: `conversation ${CONVERSATION} was purged: nothing is stored for it` }]);
    const againPerson = await http.inject({
      method: 'GET',
      url: `/console/api/people/export?id=${ALICE}`,
      headers: { authorization: `Bearer ${CONSOLE_TOKEN}` },
    });
    expect([againPerson.statusCode, againPerson.json()]).toEqual([404, { error: `nothing is stored for identity ${ALICE}` }]);
  });

  it('answers 400 for a missing or malformed id and 404 for an id with nothing stored, with no document', async () => {
    const { http } = await start();
    const ask = async (path: string) => {
      const res = await http.inject({ method: 'GET', url: `/console/api${path}`, headers: { authorization: `Bearer ${CONSOLE_TOKEN}` } });
      expect(res.headers['content-disposition']).toBeUndefined();
      return [res.statusCode, res.json().error];
    };
    expect(await ask('/people/export')).toEqual([400, 'id: expected an identity or account id (`<channel id>:<user id>`)']);
    expect(await ask(`/people/export?id=${encodeURIComponent('a {b}')}`)).toEqual([400, expect.stringContaining('identity id must be')]);
    expect(await ask(`/conversations/${encodeURIComponent('a{b}')}/export`)).toEqual([400, expect.stringContaining('conversation id must be')]);
    expect(await ask('/conversations/telegram%3A404/export')).toEqual([404, 'nothing is stored for conversation telegram:404']);
    expect(await ask('/people/export?id=telegram%3A404')).toEqual([404, 'nothing is stored for identity telegram:404']);
  });
});
