import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { conversationLogger, runLogger } from '../src/logger.js';
import { memoryLogger } from './helpers/memory-logger.js';

// A token's shape, redacted by its pattern; random, so no other file run in this process has declared it a secret
// (a declared value is redacted first, as `[redacted]`).
const TELEGRAM_TOKEN = `123456789:AAAbbbCCC${randomBytes(16).toString('hex')}`;

describe('createLogger', () => {
  it('redacts secrets at the top level', () => {
    const { logger, lines, raw } = memoryLogger();
    logger.info({ token: 'tok-1', apiKey: 'key-1', password: 'pw-1', authorization: 'Bearer abcdefghij', user: 'ann' }, 'hello');
    const [line] = lines();
    expect(line).toMatchObject({ token: '[redacted]', apiKey: '[redacted]', password: '[redacted]', authorization: '[redacted]', user: 'ann', msg: 'hello' });
    for (const s of ['tok-1', 'key-1', 'pw-1', 'abcdefghij']) expect(raw()).not.toContain(s);
  });

  it('redacts secrets nested one to three levels deep', () => {
    const { logger, lines, raw } = memoryLogger();
    logger.info({
      channel: { botToken: 'bt-1', name: 'telegram' },
      model: { options: { apiKey: 'key-2' } },
      redis: { url: 'redis://:pw-3@host:6379', prefix: 'sb' },
      req: { headers: { authorization: 'Basic zzz', 'x-telegram-bot-api-secret-token': 'st-4' } },
      deep: { a: { b: { signingSecret: 'ss-5' } } },
    });
    const [line] = lines();
    expect(line?.channel).toEqual({ botToken: '[redacted]', name: 'telegram' });
    expect(line?.model.options.apiKey).toBe('[redacted]');
    expect(line?.redis).toEqual({ url: '[redacted]', prefix: 'sb' });
    expect(line?.req.headers).toEqual({ authorization: '[redacted]', 'x-telegram-bot-api-secret-token': '[redacted]' });
    expect(line?.deep.a.b.signingSecret).toBe('[redacted]');
    for (const s of ['bt-1', 'key-2', 'pw-3', 'zzz', 'st-4', 'ss-5']) expect(raw()).not.toContain(s);
  });

  it('redacts a bot token from an error message, its stack and its cause', () => {
    const { logger, lines, raw } = memoryLogger();
    const cause = new Error(`fetch https://api.telegram.org/bot${TELEGRAM_TOKEN}/getMe failed`);
    const err = new Error(`telegram rejected token ${TELEGRAM_TOKEN}`, { cause });
    logger.error(err, 'send failed');
    logger.warn({ err }, 'again');
    expect(raw()).not.toContain('AAAbbbCCC');
    const [first, second] = lines();
    expect(first?.err.message).toContain('[redacted-token]');
    expect(first?.err.stack).toContain('[redacted-token]');
    expect(first?.err.type).toBe('Error');
    expect(second?.err.message).toContain('[redacted-token]');
  });

  it('redacts a token written into the message text', () => {
    const { logger, raw } = memoryLogger();
    logger.info('calling bot%s', TELEGRAM_TOKEN);
    logger.info(`calling ${TELEGRAM_TOKEN}`);
    expect(raw()).not.toContain('AAAbbbCCC');
    expect(raw()).toContain('[redacted-token]');
  });

  it('honours the level', () => {
    const { logger, lines } = memoryLogger({ level: 'warn' });
    logger.info('dropped');
    logger.warn('kept');
    expect(lines().map((l) => l.msg)).toEqual(['kept']);
  });
});

describe('child loggers', () => {
  it('conversationLogger carries the conversation id', () => {
    const { logger, lines } = memoryLogger();
    conversationLogger(logger, 'telegram:42').info('x');
    expect(lines()[0]).toMatchObject({ conversationId: 'telegram:42', msg: 'x' });
  });

  it('runLogger carries the conversation and run ids, and still redacts', () => {
    const { logger, lines } = memoryLogger();
    runLogger(logger, 'telegram:42', 'run_abc', { attempt: 2 }).info({ token: 't-9' }, 'y');
    expect(lines()[0]).toMatchObject({ conversationId: 'telegram:42', runId: 'run_abc', attempt: 2, token: '[redacted]', msg: 'y' });
  });
});
