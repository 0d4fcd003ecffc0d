/**
 * The browser tests' world: steerbot started with `startApp` (the web chat
 * and the console on), the real OpenAI-compatible provider against the fake
 * model server, a slow tool, and a Chromium driven by playwright-core: the
 * build inside the @sparticuz/chromium package (no system browser needed), or
 * the one `CHROMIUM_PATH` names.
 */
import { execFileSync } from 'node:child_process';
import { createReadStream, createWriteStream, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createBrotliDecompress } from 'node:zlib';
import { type Browser, chromium } from 'playwright-core';
import { expect } from 'vitest';
import { loadConfig, type SteerbotConfig, startApp } from '../../app/index.js';
import { createLogger, type Logger } from '../../src/logger.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { type FakeOpenAIServer, type FakeTurn, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { cleanupPrefix, testPrefix } from '../../testing/redis.js';

/** `expect.poll` with a deadline for a loaded machine (pages poll and stream; the default 1 s is too tight). */
export const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 15_000, interval: 50 });

/** Unpacks `<pkg>/bin/<archive>.br` (brotli) to `target`, through a file of its own renamed into place. */
async function unbrotli(source: string, target: string, mode: number): Promise<void> {
  const partial = `${target}.${process.pid}.${Date.now()}.partial`;
  try {
    await pipeline(createReadStream(source), createBrotliDecompress(), createWriteStream(partial, { mode }));
    renameSync(partial, target);
  } finally {
    rmSync(partial, { force: true });
  }
}

/** A packaged Chromium: the binary, and the folder of the shared libraries it brings (NSS, NSPR, expat). */
interface PackagedChromium {
  executablePath: string;
  libDir: string;
}

/**
 * The Chromium build shipped (brotli-compressed) in @sparticuz/chromium,
 * unpacked once per machine and version into the temp folder, with the
 * shared libraries of its `al2023` archive, so a slim machine without
 * `libnss3` runs it too. Not the package's `executablePath()`: it writes
 * `/tmp/chromium` in place, so a test file in another worker (or another
 * run) could start a half-written binary. Here each unpacks to a file of its
 * own and renames it into place; the libraries go to a folder of their own,
 * renamed into place whole.
 */
async function packagedChromium(): Promise<PackagedChromium> {
  const require = createRequire(import.meta.url);
  const pkgDir = resolve(dirname(require.resolve('@sparticuz/chromium')), '..');
  const { version } = require(join(pkgDir, 'package.json')) as { version: string };
  const home = join(tmpdir(), `steerbot-chromium-${version}`);
  const executablePath = join(home, 'chromium');
  const libDir = join(home, 'lib');
  mkdirSync(home, { recursive: true });
  if (!existsSync(executablePath)) await unbrotli(join(pkgDir, 'bin', 'chromium.br'), executablePath, 0o755);
  if (!existsSync(libDir)) {
    const tar = join(home, `al2023.${process.pid}.tar`);
    const staging = mkdtempSync(join(home, 'al2023-'));
    try {
      await unbrotli(join(pkgDir, 'bin', 'al2023.tar.br'), tar, 0o644);
      execFileSync('tar', ['-xf', tar, '-C', staging]);
      if (!existsSync(libDir)) renameSync(join(staging, 'lib'), libDir);
    } finally {
      rmSync(tar, { force: true });
      rmSync(staging, { recursive: true, force: true });
    }
  }
  return { executablePath, libDir };
}

/** The browser: `CHROMIUM_PATH` when set (its own libraries), else the packaged build with the packaged libraries first. */
async function chromiumLaunch(): Promise<{ executablePath: string; env?: Record<string, string> }> {
  if (process.env.CHROMIUM_PATH) return { executablePath: process.env.CHROMIUM_PATH };
  const { executablePath, libDir } = await packagedChromium();
  const ld = process.env.LD_LIBRARY_PATH;
  const env = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
  return { executablePath, env: { ...env, LD_LIBRARY_PATH: ld ? `${libDir}:${ld}` : libDir } };
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    ...(await chromiumLaunch()),
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

const textOf = (m: { content?: unknown }): string =>
  typeof m.content === 'string' ? m.content : Array.isArray(m.content) ? m.content.map((p: { text?: string }) => p.text ?? '').join('') : '';

/** What the fake model answers to a message containing "stream": 40 words, one every 40 ms. */
export const LONG_ANSWER = Array.from({ length: 40 }, (_, i) => `word${i + 1}`).join(' ');

/** The text of the last user message of a chat-completions request. */
export function lastUserText(req: any): string {
  const messages: Array<{ role: string; content?: unknown }> = req.messages ?? [];
  const last = [...messages].reverse().find((m) => m.role === 'user');
  return last ? textOf(last) : '';
}

/**
 * The fake model: a user message containing "slow" gets a `slow_tool` call;
 * one containing "stream" gets `LONG_ANSWER`, slowly; otherwise it answers `reply to: <the user messages since its last text answer>`.
 */
export function modelScript(req: any): FakeTurn {
  const messages: Array<{ role: string; content?: unknown; tool_calls?: unknown[] }> = req.messages ?? [];
  const last = messages.at(-1);
  if (last?.role === 'user' && /slow/i.test(textOf(last))) return { toolCalls: [{ name: 'slow_tool', args: {} }] };
  if (last?.role === 'user' && /stream/i.test(textOf(last))) return { text: LONG_ANSWER, chunkDelayMs: 40 };
  const since: string[] = [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === 'assistant' && !m.tool_calls && textOf(m)) break;
    if (m.role === 'user') since.unshift(textOf(m));
  }
  return { text: `reply to: ${since.join(' + ')}`, chunkDelayMs: 5 };
}

/** A started world. */
export interface World {
  app: Awaited<ReturnType<typeof startApp>>;
  ai: FakeOpenAIServer;
  prefix: string;
  config: SteerbotConfig;
  /** What the start printed for the operator to log in (the one-time login links), when no console token is set. */
  printed: string[];
  stop(): Promise<void>;
}

/**
 * Starts steerbot for the browser tests; `env` is added to the test Redis and prefix, `opts.config` to the
 * config file (channels, access, budgets). The pages let this machine in without a login
 * (`STEERBOT_CONSOLE_ALLOW_LOOPBACK=true`) unless `env` says otherwise: the browser tests are about the
 * pages, test/web/access.test.ts and test/security/console-and-web.test.ts about who gets in.
 */
export async function startWorld(
  redisUrl: string,
  env: Record<string, string> = {},
  opts: {
    prefix?: string;
    ai?: FakeOpenAIServer;
    noModel?: boolean;
    agent?: Record<string, unknown>;
    config?: Record<string, unknown>;
    /** Where the app logs. Default: `TEST_LOG_LEVEL` (silent when unset), to stdout. */
    logger?: Logger;
  } = {},
): Promise<World> {
  const ai = opts.ai ?? (await startFakeOpenAI());
  if (!opts.ai) ai.script(modelScript);
  const prefix = opts.prefix ?? testPrefix();
  const dir = mkdtempSync(join(tmpdir(), 'steerbot-web-'));
  const file = join(dir, 'steerbot.json');
  writeFileSync(
    file,
    JSON.stringify({
      http: { host: '127.0.0.1' },
      ...(!opts.noModel && { model: { provider: 'openai-compatible', baseURL: ai.url, name: 'fake-model', contextWindow: 128_000 } }),
      agents: { 'local-agent': { toolModules: [resolve('test/web/slow-tool.ts')], currentTime: false, ...opts.agent } },
      ...opts.config,
    }),
  );
  const loaded = await loadConfig({ file, env: { REDIS_URL: redisUrl, STEERBOT_PREFIX: prefix, STEERBOT_CONSOLE_ALLOW_LOOPBACK: 'true', ...env } });
  const config: SteerbotConfig = { ...loaded, http: { ...loaded.http, port: 0 } };
  const printed: string[] = [];
  const app = await startApp({
    config,
    logger: opts.logger ?? createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    printLogin: (text) => void printed.push(text),
  });
  return {
    app,
    ai,
    prefix,
    config,
    printed,
    async stop() {
      const redis = app.ctx.redis;
      await cleanupPrefix(redis, prefix).catch(() => undefined);
      await cleanupPrefix(redis, bullPrefixFor(prefix)).catch(() => undefined);
      await app.stop();
      if (!opts.ai) await ai.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
