/** Secrets in log lines: Redis command arguments, configured secret values, URL credentials. */
import { describe, expect, it } from 'vitest';
import { redactSecrets } from '../src/errors.js';
import { secretValues, serializeError } from '../src/logger.js';
import { memoryLogger } from './helpers/memory-logger.js';

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

/** An error shaped like the one ioredis rejects with when `HELLO … AUTH` fails. */
function redisAuthError(password: string): Error {
  return Object.assign(new Error('WRONGPASS invalid username-password pair or user is disabled.'), {
    command: { name: 'hello', args: ['3', 'AUTH', 'default', password] },
  });
}

describe('serializeError', () => {
  it('keeps the Redis command name and drops its arguments', () => {
    const out = serializeError(redisAuthError('pw-in-args-1')) as Record<string, any>;
    expect(out.command).toEqual({ name: 'hello', args: '[4 redacted]' });
    expect(out.message).toContain('WRONGPASS');
    expect(JSON.stringify(out)).not.toContain('pw-in-args-1');
  });

  it('drops the arguments inside previousErrors and causes', () => {
    const err = Object.assign(new Error('EXECABORT'), { previousErrors: [redisAuthError('pw-prev-2')] });
    const wrapped = new Error('ingest failed', { cause: redisAuthError('pw-cause-3') });
    const text = JSON.stringify([serializeError(err), serializeError(wrapped)]);
    expect(text).not.toContain('pw-prev-2');
    expect(text).not.toContain('pw-cause-3');
    expect(text).toContain('WRONGPASS');
  });
});

describe('createLogger with configured secrets', () => {
  it.each(LEVELS)('removes them from every field of a %s line, however deep, and from Redis command arguments', (level) => {
    const { logger, raw } = memoryLogger({ level: 'trace', secrets: ['S3cret-Value-Alpha', 'pw-Redis-Beta'] });
    logger[level](
      {
        err: redisAuthError('pw-Redis-Beta'),
        failure: redisAuthError('pw-Redis-Beta'),
        a: { b: { c: { d: { e: 'url https://x/?k=S3cret-Value-Alpha' } } } },
        list: ['S3cret-Value-Alpha'],
      },
      'calling with S3cret-Value-Alpha',
    );
    expect(raw()).not.toContain('S3cret-Value-Alpha');
    expect(raw()).not.toContain('pw-Redis-Beta');
    expect(raw()).toContain('WRONGPASS');
  });

  it('serializes an Error under any key, without its Redis arguments', () => {
    const { logger, lines, raw } = memoryLogger({ level: 'trace' });
    logger.warn({ failure: redisAuthError('pw-unknown-to-config') }, 'x');
    expect(lines()[0]!.failure).toMatchObject({ message: expect.stringContaining('WRONGPASS'), command: { name: 'hello', args: '[4 redacted]' } });
    expect(raw()).not.toContain('pw-unknown-to-config');
  });

  it('removes a secret that JSON escapes (quotes, backslashes)', () => {
    const secret = 'we"ird\\pass-123';
    const { logger, raw } = memoryLogger({ level: 'trace', secrets: [secret] });
    logger.info({ value: `before ${secret} after` });
    expect(raw()).not.toContain(JSON.stringify(secret).slice(1, -1));
    expect(raw()).toContain('[redacted]');
  });

  it('leaves values shorter than 4 characters alone (they would match everywhere) and keeps lines valid JSON', () => {
    const { logger, lines } = memoryLogger({ level: 'trace', secrets: ['ab', '0'] });
    logger.info({ n: 10, s: 'abc' });
    expect(lines()[0]).toMatchObject({ n: 10, s: 'abc' });
  });
});

describe('secretValues', () => {
  it('finds secrets by key at any depth and the credentials of URLs', () => {
    const found = secretValues({
      redis: { url: 'redis://user:url-pass-1@host:6379', password: 'redis-pass-2', prefix: 'sb' },
      model: { apiKey: 'model-key-3', name: 'gpt' },
      channels: {
        telegram: { token: '1:tok-4', webhookSecret: 'wh-5' },
        webhooks: { crm: { secret: 'crm-6', callbackSecret: 'cb-7', callbackUrl: 'https://cbuser:cb%40pass-8@example.com/hook', allowedSenders: ['ann'] } },
      },
      agents: { custom: { accessToken: 'acc-9', credentials: ['cred-10'] } },
    });
    expect(found).toEqual(
      expect.arrayContaining(['url-pass-1', 'redis-pass-2', 'model-key-3', '1:tok-4', 'wh-5', 'crm-6', 'cb-7', 'cb%40pass-8', 'cb@pass-8', 'acc-9', 'cred-10']),
    );
    for (const notSecret of ['sb', 'gpt', 'ann', 'user', 'cbuser']) expect(found).not.toContain(notSecret);
  });

  it("takes every value of a tool server's headers and environment", () => {
    const found = secretValues({
      agents: { 'local-agent': { mcpServers: { gh: { command: 'gh-mcp', headers: { Authorization: 'Bearer hdr-12' }, env: { GH_PAT: 'pat-13' } } } } },
    });
    expect(found.sort()).toEqual(['Bearer hdr-12', 'pat-13']);
  });

  it('takes the user name of a URL that has no password (a token as user)', () => {
    expect(secretValues({ endpoint: 'https://tok-as-user-11@example.com/x' })).toEqual(['tok-as-user-11']);
  });
});

describe('redactSecrets', () => {
  it('redacts URL credentials, a user name alone included', () => {
    expect(redactSecrets('POST https://tok-12@example.com/x failed')).toBe('POST https://[redacted]@example.com/x failed');
    expect(redactSecrets('redis://user:pw-13@h:1')).toBe('redis://user:[redacted]@h:1');
  });
});
