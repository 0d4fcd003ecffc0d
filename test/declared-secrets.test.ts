/**
 * A setting declared `secret: true` is redacted because it is declared, not
 * because of its name: `signingKey` (which no list of secret key names knows)
 * never reaches check-config's output, a log line or an error message.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type SteerbotConfig, secretSettingsOf } from '../app/config.js';
import { redactConfig } from '../app/summary.js';
import { ChannelApiError } from '../src/errors.js';
import { createLogger, isSecretKey } from '../src/logger.js';
import { BUILD_WAIT_MS, builtCli, builtNodeArgs, packageBuilt } from './helpers/built-package.js';

const REPO = resolve(import.meta.dirname, '..');
const PLUGIN = './test/fixtures/plugins/signed-channel.ts';

/** A config file that loads the fixture plugin. */
function configFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'steerbot-declared-')), 'steerbot.json');
  writeFileSync(file, JSON.stringify({ plugins: [PLUGIN] }));
  return file;
}

function load(signingKey: string): Promise<SteerbotConfig> {
  return loadConfig({ file: configFile(), env: { ACME_SIGNING_KEY: signingKey } });
}

/** A logger as the CLI makes one for `config`, writing into memory. */
function logFor(config: SteerbotConfig): { logger: ReturnType<typeof createLogger>; raw: () => string } {
  const chunks: string[] = [];
  const logger = createLogger({ level: 'trace', secretPaths: secretSettingsOf(config), destination: { write: (s: string) => void chunks.push(s) } });
  return { logger, raw: () => chunks.join('') };
}

// The CLI runs as the package installs it, its TypeScript plugin as Node strips it (built once for the lane); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

describe('a setting declared secret under a name no list knows (signingKey)', () => {
  it('is not a secret by its name alone (what this test is about)', () => {
    expect(isSecretKey('signingKey')).toBe(false);
  });

  it('is printed as [set] by check-config, and its value nowhere', async () => {
    const value = 'acme-signing-key-check-config-7f3a9c';
    const child = spawn(process.execPath, [...(await builtNodeArgs(await builtCli())), 'check-config', '--config', configFile()], {
      cwd: REPO,
      env: { PATH: process.env.PATH ?? '', ACME_SIGNING_KEY: value },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(code, out).toBe(0);
    const printed = JSON.parse(out) as { channels: { acme: { signingKey: string; region: string } } };
    expect(printed.channels.acme).toEqual({ signingKey: '[set]', region: 'eu' });
    expect(out).not.toContain(value);
  }, 30_000);

  it('is redacted from the configuration as redactConfig returns it', async () => {
    const config = await load('acme-signing-key-redact-config-21bd');
    expect((redactConfig(config).channels as { acme: unknown }).acme).toEqual({ signingKey: '[set]', region: 'eu' });
  });

  it('never reaches a log line: the configuration logged as it is, the value in a message, in a field, in an error', async () => {
    const value = 'acme-signing-key-in-logs-90e1d5';
    const config = await load(value);
    const { logger, raw } = logFor(config);
    logger.info({ config }, 'effective configuration, unredacted');
    logger.warn({ header: `sig=${value}` }, 'signature computed with %s', value);
    logger.error({ err: new Error(`upstream refused key ${value}`) }, 'request failed');
    logger.info({ settings: (config.channels as Record<string, unknown>).acme }, 'plugin settings');
    expect(raw()).toContain('upstream refused key');
    expect(raw()).not.toContain(value);
  });

  it('is censored by its path in a logged configuration even when too short to scrub from text', async () => {
    const config = await load('k9');
    const { logger, raw } = logFor(config);
    logger.info({ config }, 'effective configuration, unredacted');
    const line = JSON.parse(raw()) as { config: { channels: { acme: { signingKey: string } } } };
    expect(line.config.channels.acme.signingKey).toBe('[redacted]');
  });

  it("is removed from a steerbot error's message when the error is built", async () => {
    const value = 'acme-signing-key-in-error-5c27aa';
    await load(value);
    expect(new ChannelApiError(`acme rejected the signature made with ${value}`).message).toBe('acme rejected the signature made with [redacted]');
  });
});
