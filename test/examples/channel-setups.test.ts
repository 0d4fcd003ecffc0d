/**
 * The channel setup examples (`examples/<channel>/`): every `steerbot.json`
 * loads through the real configuration loader, and each holds the settings
 * its README tells the platform's console.
 */
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { PermissionsBitField } from 'discord.js';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../app/config.js';
import { emailConfigSchema } from '../../plugins/email/config.js';
import { lineConfigSchema } from '../../plugins/line/config.js';
import { matrixConfigSchema } from '../../plugins/matrix/config.js';
import { SIGNATURE_HEADER, sign, TIMESTAMP_HEADER } from '../../src/http/signature.js';

const read = (dir: string, name: string) => readFileSync(new URL(`../../examples/${dir}/${name}`, import.meta.url), 'utf8');
const section = (dir: string) => JSON.parse(read(dir, 'steerbot.json')).channels[dir];

describe('the channel setup examples', () => {
  it('LINE: a section the schema accepts, whose webhook path and files URL the README gives the console', () => {
    const parsed = lineConfigSchema.safeParse(section('line'));
    expect(parsed.error).toBeUndefined();
    const readme = read('line', 'README.md');
    expect(readme).toContain(`${parsed.data!.filesUrl}${parsed.data!.webhookPath}`);
  });

  it('Matrix: a section the schema accepts, and a login script for the token it needs', () => {
    const parsed = matrixConfigSchema.safeParse(section('matrix'));
    expect(parsed.error).toBeUndefined();
    expect(parsed.data).toMatchObject({ userId: '@steerbot:example.org', autoJoin: ['@you:example.org'] });
    expect(read('matrix', 'login.sh')).toContain('/_matrix/client/v3/login');
  });

  it('email: a section the schema accepts, whose authServId the README shows how to find', () => {
    const parsed = emailConfigSchema.safeParse(section('email'));
    expect(parsed.error).toBeUndefined();
    expect(parsed.data).toMatchObject({ requireAuthenticated: true });
    expect(read('email', 'README.md')).toContain(`Authentication-Results: ${parsed.data!.authServId};`);
  });

  it('every example config loads through the configuration loader, naming its channel', async () => {
    const channels = {
      telegram: 'telegram',
      discord: 'discord',
      whatsapp: 'whatsapp',
      line: 'line',
      matrix: 'matrix',
      email: 'email',
      webhook: 'webhooks',
      web: 'web',
    };
    for (const [dir, section] of Object.entries(channels)) {
      const config = await loadConfig({ file: new URL(`../../examples/${dir}/steerbot.json`, import.meta.url).pathname, env: {} });
      expect((config.channels as Record<string, unknown>)[section], dir).toBeDefined();
    }
  });

  it('Telegram: the commands for BotFather are chat commands steerbot answers, as docs/channels.md lists them', () => {
    const names = read('telegram', 'botfather-commands.txt')
      .trim()
      .split('\n')
      .map((l) => l.split(' - ')[0]!);
    const docs = readFileSync(new URL('../../docs/channels.md', import.meta.url), 'utf8');
    expect(names.length).toBeGreaterThan(3);
    expect(names.filter((n) => !docs.includes(`| \`/${n}`) && !docs.includes(`, \`/${n}`))).toEqual([]);
  });

  it('Discord: the invite URL asks for exactly the permissions the README lists', () => {
    const readme = read('discord', 'README.md');
    const asked = BigInt(/permissions=(\d+)/.exec(readme)![1]!);
    const listed = new PermissionsBitField(['ViewChannel', 'SendMessages', 'SendMessagesInThreads', 'ReadMessageHistory']).bitfield;
    expect(asked).toBe(listed);
  });

  it('WhatsApp: the callback URL the README gives is the webhook path of the config', () => {
    expect(read('whatsapp', 'README.md')).toContain(`https://bot.example.org${section('whatsapp').webhookPath}`);
  });

  it('webhook: send.sh signs what the channel checks, with the header names it reads', () => {
    const script = read('webhook', 'send.sh');
    expect(script).toContain(`${TIMESTAMP_HEADER}: $ts`);
    expect(script).toContain(`${SIGNATURE_HEADER}: sha256=$sig`);
    // The script's HMAC input, "<timestamp>.<body>", is what the channel signs.
    expect(`sha256=${createHmac('sha256', 'k').update('1.{}').digest('hex')}`).toBe(sign('k', 1, '{}'));
  });
});
