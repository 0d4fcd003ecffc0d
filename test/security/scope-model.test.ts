/**
 * One scope model: `access` says who may talk, `bindings` → `profiles` what
 * they get. A configuration written with the old per-channel keys (a
 * Telegram `allowedUsers`, `admins`, `policy`, a local-agent persona) still
 * loads, is translated at load with a warning per old key, and behaves as
 * before through the real app, the real grammY client and the fake Bot API;
 * `steerbot check-config --migrate` prints a file that loads without
 * warnings and behaves the same; an old key and its new key that disagree
 * are refused before anything starts.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configDeprecations } from '../../app/config-migration.js';
import { loadConfig, type RunningApp, startApp } from '../../app/index.js';
import { ACCESS_NOTICES } from '../../host/access/gate.js';
import { ConfigError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type FakeTelegram, messageUpdate, startFakeTelegram, type TgUser } from '../../testing/fakes/telegram-server.js';
import { telegramAppEnv } from '../helpers/app-env.js';
import { BUILD_WAIT_MS, builtCli } from '../helpers/built-package.js';
import { cleanupPrefix, testPrefix } from '../helpers/redis.js';

const ONE: TgUser = { id: 1, is_bot: false, first_name: 'One' };
const STRANGER: TgUser = { id: 2, is_bot: false, first_name: 'Stranger' };
const ADMIN: TgUser = { id: 9, is_bot: false, first_name: 'Nine' };
const GROUP_OWNER: TgUser = { id: 3, is_bot: false, first_name: 'Owner' };
const PERSONA = 'You are Tess, the assistant of chat 1.';

/** The old-style file: who may talk and what they get, said in the channel section and the agent's personas. */
const OLD_STYLE = (apiRoot: string) => ({
  http: { host: '127.0.0.1' },
  channels: {
    telegram: { apiRoot, mode: 'polling', registerCommands: false, pollTimeoutSeconds: 1, allowedUsers: [1], admins: [9], policy: 'followup' },
  },
  agents: { 'local-agent': { currentTime: false, personas: { 'telegram:1': { systemPrompt: PERSONA } } } },
});

interface World {
  app: RunningApp;
  prefix: string;
  warnings: string[];
}

const dir = mkdtempSync(join(tmpdir(), 'steerbot-scope-'));
let tg: FakeTelegram;
let openai: FakeOpenAIServer;

const env = (prefix: string) => ({
  ...telegramAppEnv({ prefix, modelUrl: openai.url }),
});

function writeConfig(name: string, config: unknown): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(config, null, 2));
  return file;
}

/** The app from `file` on a fresh prefix; what it logged at warn level is collected. */
async function startWorld(file: string): Promise<World> {
  const prefix = testPrefix();
  const config = await loadConfig({ file, env: env(prefix) });
  const warnings: string[] = [];
  const logger = createLogger({ level: 'warn', destination: { write: (line: string) => void warnings.push(line) } });
  const app = await startApp({ config: { ...config, http: { ...config.http, port: 0 } }, logger });
  return { app, prefix, warnings };
}

async function stopWorld(w: World | undefined): Promise<void> {
  if (!w) return;
  await cleanupPrefix(w.app.ctx.redis, w.prefix);
  await cleanupPrefix(w.app.ctx.redis, bullPrefixFor(w.prefix));
  await w.app.stop();
}

/** `steerbot check-config` run as a person runs it (dist/app/cli.js). */
function cli(args: string[], prefix = testPrefix()): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [cliJs, 'check-config', ...args], {
    env: { PATH: process.env.PATH ?? '', ...env(prefix) },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const record = (w: World, conversationId: string) => readRange(w.app.ctx.redis, conversationKeys(w.prefix, conversationId).log);
/** Texts the bot sent to `chatId`, from the `from`th message the fake saw on (each world starts with a mark). */
const sentTo = (chatId: number, from = mark) =>
  tg.sent
    .slice(from)
    .filter((m) => m.chatId === chatId)
    .map((m) => m.text);
let mark = 0;
const systemOf = (i: number): string => openai.requests[i]!.body.messages.find((m: { role: string }) => m.role === 'system')?.content;

/**
 * What the old-style file did, checked black-box through Telegram: user 1 is answered with the
 * persona's prompt, under `followup`; user 2 gets the access notice, nothing recorded, no model
 * call; the admin outside the allow-list (who could not talk before) is kept out too.
 */
async function expectOldBehaviour(w: World): Promise<void> {
  mark = tg.sent.length;
  const before = openai.requests.length;
  tg.pushUpdate(messageUpdate({ from: ONE, text: 'hello' }));
  await tg.waitUntil(() => sentTo(ONE.id).includes('answer to hello'), 15_000, 'the answer to user 1');
  expect(systemOf(before)).toBe(PERSONA);

  tg.pushUpdate(messageUpdate({ from: ONE, text: '/status' }));
  const status = await tg.waitUntil(() => sentTo(ONE.id).find((t) => t.includes('Queue mode')), 15_000, 'the /status reply');
  expect(status).toContain('Queue mode: followup');

  for (const outsider of [STRANGER, ADMIN]) {
    tg.pushUpdate(messageUpdate({ from: outsider, text: 'let me in' }));
    await tg.waitUntil(() => sentTo(outsider.id).includes(ACCESS_NOTICES.notAllowed), 15_000, `the notice to ${outsider.id}`);
    expect(await record(w, `telegram:${outsider.id}`)).toEqual([]);
  }
  // A stranger's own group is not a way in either (another stranger: a refused person is told once per window).
  const mention = `@${tg.bot.username}`;
  tg.pushUpdate(
    messageUpdate({
      from: GROUP_OWNER,
      chatId: -500,
      chatType: 'group',
      text: `${mention} hi everyone`,
      entities: [{ type: 'mention', offset: 0, length: mention.length }],
    }),
  );
  await tg.waitUntil(() => sentTo(-500).includes(ACCESS_NOTICES.groupNotAllowed), 15_000, 'the notice in the group');
  expect(await record(w, 'telegram:-500')).toEqual([]);
  // Only user 1's message reached the model (the /status command does not).
  expect(openai.requests.length - before).toBe(1);
}

let cliJs = '';
// The CLI as the package installs it (dist/app/cli.js, built once for the lane); the wait has its own timeout.
beforeAll(async () => void (cliJs = await builtCli()), BUILD_WAIT_MS);

beforeAll(async () => {
  [tg, openai] = await Promise.all([startFakeTelegram(), startFakeOpenAI()]);
  openai.script((req: { messages: Array<{ role: string; content: unknown }> }) => ({
    text: `answer to ${String(req.messages.filter((m) => m.role === 'user').at(-1)?.content)}`,
  }));
}, 30_000);
afterAll(async () => {
  await Promise.all([tg.close(), openai.close()]);
  rmSync(dir, { recursive: true, force: true });
});

describe('one scope model', () => {
  describe('an old-style configuration', () => {
    let w: World | undefined;
    afterAll(() => stopWorld(w));

    it('answers its listed user with the persona under followup, refuses everyone else with nothing recorded, and warns per old key', async () => {
      const file = writeConfig('old.json', OLD_STYLE(tg.apiRoot));
      w = await startWorld(file);
      const warned = w.warnings.join('\n');
      for (const [oldKey, newKey] of [
        ['channels.telegram.allowedUsers', 'access.channels.telegram.users'],
        ['channels.telegram.admins', 'access.channels.telegram.admins'],
        ['channels.telegram.policy', 'inputPolicy'],
        ['agents.local-agent.personas.telegram:1', 'systemPrompt'],
      ]) {
        expect(warned).toContain(oldKey);
        expect(warned).toContain(newKey);
      }
      await expectOldBehaviour(w);
    }, 60_000);
  });

  describe('check-config --migrate', () => {
    let w: World | undefined;
    afterAll(() => stopWorld(w));

    it('prints a file without old keys that loads without warnings and behaves the same', async () => {
      const file = writeConfig('old-for-cli.json', OLD_STYLE(tg.apiRoot));
      const r = cli(['--config', file, '--migrate']);
      expect(r.status, r.stderr).toBe(0);
      const migrated = JSON.parse(r.stdout);
      expect(migrated.channels.telegram).not.toHaveProperty('allowedUsers');
      expect(migrated.channels.telegram).not.toHaveProperty('admins');
      expect(migrated.channels.telegram).not.toHaveProperty('policy');
      expect(migrated.agents['local-agent']).not.toHaveProperty('personas');
      expect(migrated.access.channels.telegram).toEqual({ policy: 'allowlist', users: ['1'] });
      const file2 = writeConfig('migrated.json', migrated);
      expect(configDeprecations(await loadConfig({ file: file2, env: env(testPrefix()) }))).toEqual([]);
      // The CLI names nothing deprecated for the migrated file.
      expect(cli(['--config', file2]).stderr).not.toContain('deprecated');

      w = await startWorld(file2);
      expect(w.warnings.join('\n')).not.toContain('deprecated');
      await expectOldBehaviour(w);
    }, 90_000);
  });

  describe('an old key and its new key that disagree', () => {
    it('is a ConfigError naming the new key, and --migrate prints nothing and leaves the file alone', async () => {
      const config = { ...OLD_STYLE(tg.apiRoot), access: { channels: { telegram: { policy: 'allowlist', users: ['2'] } } } };
      const file = writeConfig('conflict.json', config);
      const err = await loadConfig({ file, env: env(testPrefix()) }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues.map((i) => i.path)).toContain('access.channels.telegram.users');
      expect((err as ConfigError).message).toMatch(/keep one of the two/);

      const before = readFileSync(file, 'utf8');
      const r = cli(['--config', file, '--migrate']);
      expect(r.status).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain('access.channels.telegram.users');
      expect(readFileSync(file, 'utf8')).toBe(before);
    }, 60_000);

    it('refuses a channel policy that a profile bound to the same channel contradicts', async () => {
      const config = {
        ...OLD_STYLE(tg.apiRoot),
        profiles: { support: { inputPolicy: 'steer' } },
        bindings: [{ profile: 'support', channel: 'telegram' }],
      };
      const err = await loadConfig({ file: writeConfig('conflict-policy.json', config), env: env(testPrefix()) }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues.map((i) => i.path)).toContain('profiles.support.inputPolicy');
    });
  });
});
