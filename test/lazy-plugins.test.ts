/**
 * A bot loads a platform's library only when that platform's channel is
 * configured: a webhook-only bot started by the CLI never loads discord.js,
 * grammY, the LINE, Feishu / Lark and Teams SDKs, the email libraries or the MCP SDK (each costs start time and live heap).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../src/redis/local.js';
import { spawnCaptured } from './helpers/cli.js';
import { redisUrl, testPrefix } from './helpers/redis.js';

const REPO = resolve(import.meta.dirname, '..');
const HOOK = join(REPO, 'test/fixtures/loaded-packages.ts');
const PLATFORM_LIBRARIES = [
  'discord.js',
  'grammy',
  '@line/bot-sdk',
  '@larksuiteoapi/node-sdk',
  '@microsoft/agents-hosting',
  'imapflow',
  'nodemailer',
  'mailparser',
  '@modelcontextprotocol/sdk',
];

interface Run {
  /** Resolves once stdout contains `text`; rejects when the process exits first. */
  printed(text: string): Promise<void>;
  kill(signal: NodeJS.Signals): void;
  /** The packages the process loaded, read from the hook's line at exit. */
  loaded(): Promise<string[]>;
}

/** Runs `node --import tsx --import <hook> <args>` in the repository with only `env` (and PATH). */
function runWithHook(args: string[], env: Record<string, string> = {}): Run {
  const { child, stdout, stderr, exited } = spawnCaptured(['--import', 'tsx', '--import', HOOK, ...args], env, REPO);
  return {
    printed: (text) =>
      new Promise((ok, fail) => {
        const check = () => stdout().includes(text) && ok();
        child.stdout!.on('data', check);
        check();
        void exited.then(() => fail(new Error(`exited before printing ${text}; stderr:\n${stderr()}\nstdout:\n${stdout()}`)));
      }),
    kill: (signal) => child.kill(signal),
    loaded: async () => {
      await exited;
      const line = /^loaded-packages (.*)$/m.exec(stderr());
      if (!line) throw new Error(`no loaded-packages line; stderr:\n${stderr()}`);
      return JSON.parse(line[1]!) as string[];
    },
  };
}

describe('platform libraries', () => {
  it('are not loaded by a bot whose only channel is a webhook', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'steerbot-lazy-'));
    const file = join(dir, 'steerbot.json');
    writeFileSync(file, JSON.stringify({ channels: { webhooks: { crm: { secret: 'whsec-lazy-plugins-0123456789' } } } }));
    const run = runWithHook(['app/cli.ts', 'start', '--config', file], {
      REDIS_URL: redisUrl(),
      PORT: String(await freePort()),
      HOST: '127.0.0.1',
      STEERBOT_PREFIX: testPrefix(),
      STEERBOT_WEB: 'false',
      LOG_FORMAT: 'json',
    });
    try {
      await run.printed('"msg":"steerbot started"');
    } finally {
      run.kill('SIGTERM');
    }
    const loaded = await run.loaded();
    // The hook saw the process's own libraries: an empty list would prove nothing.
    expect(loaded).toEqual(expect.arrayContaining(['ioredis', 'fastify', 'bullmq']));
    for (const library of PLATFORM_LIBRARIES) expect(loaded).not.toContain(library);
  }, 60_000);

  it("are loaded with their plugin's channel module (what a configured channel imports)", async () => {
    const discord = runWithHook(['plugins/discord/channel.ts']);
    const telegram = runWithHook(['plugins/telegram/channel.ts']);
    const line = runWithHook(['plugins/line/channel.ts']);
    const email = runWithHook(['plugins/email/channel.ts']);
    expect(await discord.loaded()).toContain('discord.js');
    expect(await telegram.loaded()).toContain('grammy');
    expect(await line.loaded()).toContain('@line/bot-sdk');
    expect(await email.loaded()).toEqual(expect.arrayContaining(['imapflow', 'nodemailer', 'mailparser']));
  }, 60_000);
});
