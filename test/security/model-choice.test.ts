/**
 * `/model`: a conversation switches among the models its profile allows
 * (`models`, `profiles.<name>.models`), and nothing else. Black-box through
 * the whole app and the real grammY plugin against the fake Bot API, with
 * two fake model servers: a person switches and switches back; an unknown
 * name, a name another profile allows, a member of a group who is not an
 * admin, and a stored choice the config no longer allows all leave the
 * conversation on its own model, and the refused ones write nothing.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type RunningApp, startApp } from '../../app/index.js';
import { createLogger } from '../../src/logger.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type FakeTelegram, messageUpdate, startFakeTelegram, type TgUser } from '../../testing/fakes/telegram-server.js';
import { telegramAppEnv } from '../helpers/app-env.js';
import { cleanupPrefix, testPrefix } from '../helpers/redis.js';

const ALICE: TgUser = { id: 1, is_bot: false, first_name: 'Alice' };
const CHEAP: TgUser = { id: 5, is_bot: false, first_name: 'Cheap' };
const MEMBER: TgUser = { id: 2, is_bot: false, first_name: 'Member' };
const ADMIN: TgUser = { id: 9, is_bot: false, first_name: 'Admin' };
const GROUP = -100777;

const dir = mkdtempSync(join(tmpdir(), 'steerbot-model-'));
let tg: FakeTelegram;
let base: FakeOpenAIServer;
let big: FakeOpenAIServer;
let app: RunningApp;
const prefix = testPrefix();

beforeAll(async () => {
  [tg, base, big] = await Promise.all([startFakeTelegram(), startFakeOpenAI(), startFakeOpenAI()]);
  base.script(() => ({ text: 'from base' }));
  big.script(() => ({ text: 'from big' }));
  tg.chatMembers.set(`${GROUP}:${ADMIN.id}`, 'administrator');
  const file = join(dir, 'steerbot.json');
  writeFileSync(
    file,
    JSON.stringify({
      http: { host: '127.0.0.1' },
      channels: { telegram: { apiRoot: tg.apiRoot, mode: 'polling', registerCommands: false, pollTimeoutSeconds: 1, groups: 'always' } },
      agents: { 'local-agent': { currentTime: false } },
      models: { big: { provider: 'openai-compatible', baseURL: big.url, name: 'big-model', contextWindow: 100_000 } },
      profiles: { cheap: { models: [] } },
      bindings: [{ profile: 'cheap', chat: `telegram:${CHEAP.id}` }],
    }),
  );
  const config = await loadConfig({
    file,
    env: {
      ...telegramAppEnv({ prefix, modelUrl: base.url, model: 'base-model' }),
    },
  });
  app = await startApp({ config: { ...config, http: { ...config.http, port: 0 } }, logger: createLogger({ level: 'silent' }) });
});

afterAll(async () => {
  await cleanupPrefix(app.ctx.redis, prefix);
  await cleanupPrefix(app.ctx.redis, bullPrefixFor(prefix));
  await app.stop();
  await Promise.all([tg.close(), base.close(), big.close()]);
  rmSync(dir, { recursive: true, force: true });
});

/** Sends `text` from `from` in `chatId` and waits for the bot's next message there. */
async function say(from: TgUser, text: string, chatId = from.id): Promise<string> {
  const before = tg.sent.filter((m) => m.chatId === chatId).length;
  tg.pushUpdate(messageUpdate({ from, chatId, text }));
  const sent = await tg.waitUntil(
    () => {
      const mine = tg.sent.filter((m) => m.chatId === chatId);
      return mine.length > before && mine;
    },
    20_000,
    `an answer to "${text}"`,
  );
  return sent[before]!.text;
}

const choice = (chatId: number) => app.ctx.redis.hget(conversationKeys(prefix, `telegram:${chatId}`).meta, 'model');
const commands = async (chatId: number) =>
  (await readRange(app.ctx.redis, conversationKeys(prefix, `telegram:${chatId}`).log)).filter((e) => e.kind === 'command.received');

describe('/model', () => {
  it('lists the choices, switches this conversation to one, and back to the default', async () => {
    expect(await say(ALICE, 'hi')).toBe('from base');
    expect(await say(ALICE, '/model')).toBe('Model: the default (base-model). Choices: big, default (/model <name>).');
    expect(await say(ALICE, '/model big')).toBe('Model set to big: the next answer uses it.');
    expect(await say(ALICE, 'and now?')).toBe('from big');
    expect(big.requests.at(-1)!.body.model).toBe('big-model');
    expect(await say(ALICE, '/model')).toMatch(/^Model: big\./);
    expect(await say(ALICE, '/status')).toContain('Model: big (chosen with /model)');
    expect(await say(ALICE, '/model default')).toBe('Model reset to the default (base-model).');
    expect(await say(ALICE, 'and back?')).toBe('from base');
    expect(await say(ALICE, '/status')).toContain('Model: base-model (the default)');
    expect(await choice(ALICE.id)).toBeNull();
  });

  it('refuses an unknown name with the list, and writes nothing', async () => {
    const recorded = (await commands(ALICE.id)).length;
    expect(await say(ALICE, '/model gpt-9000')).toBe('Unknown model "gpt-9000". Choices: big, default.');
    expect(await say(ALICE, '/model __proto__')).toMatch(/^Unknown model "__proto__"/);
    expect(await choice(ALICE.id)).toBeNull();
    expect(await commands(ALICE.id)).toHaveLength(recorded);
  });

  it('refuses a model another profile allows: a conversation bound to a profile with none stays on its model', async () => {
    expect(await say(CHEAP, '/model big')).toBe('Unknown model "big". This conversation has no other models.');
    expect(await choice(CHEAP.id)).toBeNull();
    const asked = big.requests.length;
    expect(await say(CHEAP, 'hello')).toBe('from base');
    expect(big.requests).toHaveLength(asked);
  });

  it('in a group, is refused to a member who is not an admin; an admin may switch', async () => {
    expect(await say(MEMBER, '/model big', GROUP)).toBe('Only admins can use /model here.');
    expect(await choice(GROUP)).toBeNull();
    expect(await say(ADMIN, '/model big', GROUP)).toBe('Model set to big: the next answer uses it.');
    expect(await choice(GROUP)).toBe('big');
    expect(await say(MEMBER, 'what now?', GROUP)).toBe('from big');
  });

  it('does not use a stored choice the profile no longer allows (the config changed since)', async () => {
    // As if `big` had been allowed when it was chosen: the runner checks the choice again at every run.
    await app.ctx.redis.hset(conversationKeys(prefix, `telegram:${CHEAP.id}`).meta, 'model', 'big');
    const asked = big.requests.length;
    expect(await say(CHEAP, 'still cheap?')).toBe('from base');
    expect(big.requests).toHaveLength(asked);
  });
});
