/** The email channel's pure parts (sender authentication, thread ids, automatic mail, quoted history) and its settings. */
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { checkSender, parseAuthResults } from '../../plugins/email/auth-results.js';
import { createEmailPlugin } from '../../plugins/email/channel.js';
import { idPart, inOwnThread, MAX_SEARCHED_CHARS, type MailInput, normalizeMail, stripQuoted, threadRoot } from '../../plugins/email/normalize.js';
import type { ChannelHost } from '../../src/channel.js';
import { ConfigError } from '../../src/errors.js';
import { cleanupPrefix, testPrefix } from '../../testing/redis.js';
import { redisUrl } from '../helpers/redis.js';

const mail = (over: Partial<MailInput> = {}, headers: Record<string, string> = {}): MailInput => ({
  headers: new Map(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), [v]])),
  from: { address: 'alice@example.org', name: 'Alice' },
  messageId: '<m1@example.org>',
  references: [],
  recipients: ['bot@example.net'],
  subject: 'Hi',
  text: 'hello',
  ...over,
});
const ctx = { channelId: 'email', self: 'bot@example.net', fallbackId: 'uid-1.1', attachments: [] };

describe('email sender authentication', () => {
  const from = 'alice@mail.example.org';

  it('believes a dkim pass whose signing domain is the From domain or a parent of it', () => {
    expect(checkSender(['mx.example.net; dkim=pass header.d=mail.example.org'], 'mx.example.net', from)).toBeUndefined();
    expect(checkSender(['mx.example.net; dkim=pass (good signature) header.d=example.org header.s=s1'], 'MX.example.net', from)).toBeUndefined();
  });

  it('believes an spf pass for an envelope sender in the From domain, and a dmarc pass for it', () => {
    expect(checkSender(['mx.example.net 1; spf=pass smtp.mailfrom=bounce@mail.example.org'], 'mx.example.net', from)).toBeUndefined();
    expect(checkSender(['mx.example.net; dmarc=pass header.from=mail.example.org'], 'mx.example.net', from)).toBeUndefined();
  });

  it('refuses a pass for another domain, a failed check and a header of another authserv-id', () => {
    expect(checkSender(['mx.example.net; dkim=pass header.d=attacker.test; spf=pass smtp.mailfrom=x@attacker.test'], 'mx.example.net', from)).toBe(
      'not-passed',
    );
    expect(checkSender(['mx.example.net; dkim=fail header.d=mail.example.org; spf=softfail smtp.mailfrom=a@mail.example.org'], 'mx.example.net', from)).toBe(
      'not-passed',
    );
    expect(checkSender(['mx.attacker.test; dkim=pass header.d=mail.example.org'], 'mx.example.net', from)).toBe('no-trusted-header');
    expect(checkSender([], 'mx.example.net', from)).toBe('no-trusted-header');
    // A look-alike suffix is not a parent domain.
    expect(checkSender(['mx.example.net; dkim=pass header.d=ample.org'], 'mx.example.net', from)).toBe('not-passed');
  });

  it('reads only the topmost header of the trusted authserv-id: a pass the sender wrote below the receiving server’s fail counts for nothing', () => {
    const fail = 'mx.example.net; dkim=fail header.d=mail.example.org; spf=fail smtp.mailfrom=a@mail.example.org';
    const forged = 'mx.example.net; dkim=pass header.d=mail.example.org';
    expect(checkSender([fail, forged], 'mx.example.net', from)).toBe('not-passed');
    expect(checkSender(['mx.attacker.test; dkim=pass header.d=mail.example.org', fail, forged], 'mx.example.net', from)).toBe('not-passed');
    expect(checkSender([forged, fail], 'mx.example.net', from)).toBeUndefined();
  });

  it('parses methods, results and properties, folded lines and comments', () => {
    expect(parseAuthResults('mx.example.net;\r\n\tdkim=pass (2048-bit key) header.d=example.org;\r\n spf=none smtp.mailfrom="a@b.c"')).toEqual({
      authServId: 'mx.example.net',
      results: [
        { method: 'dkim', result: 'pass', props: { 'header.d': 'example.org' } },
        { method: 'spf', result: 'none', props: { 'smtp.mailfrom': 'a@b.c' } },
      ],
    });
  });
});

describe('email normalize', () => {
  it('makes the thread root the conversation: first of References, else In-Reply-To, else the own id', () => {
    expect(threadRoot({ references: ['<a@x>', '<b@x>'], inReplyTo: '<b@x>', messageId: '<c@x>' })).toBe('<a@x>');
    expect(threadRoot({ references: [], inReplyTo: '<b@x>', messageId: '<c@x>' })).toBe('<b@x>');
    const n = normalizeMail(ctx, mail({ references: ['<root@example.org>'], inReplyTo: '<bot1@example.net>' }));
    expect(n).toMatchObject({
      kind: 'message',
      message: { conversationId: 'email:root@example.org', updateKey: 'email:m1@example.org', sender: { id: 'alice@example.org', name: 'Alice' } },
      thread: { to: 'alice@example.org', last: '<m1@example.org>', refs: '<root@example.org> <m1@example.org>' },
    });
  });

  it('moves a mail into its sender’s own conversation when the thread it names is another address’s', () => {
    const n = normalizeMail(ctx, mail({ from: { address: 'Eve@Example.org' }, references: ['<root@example.org>'] }));
    if (n.kind !== 'message') throw new Error('expected a message');
    expect(inOwnThread(n.message, undefined).conversationId).toBe('email:root@example.org');
    expect(inOwnThread(n.message, 'EVE@example.org').conversationId).toBe('email:root@example.org');
    expect(inOwnThread(n.message, 'alice@example.org').conversationId).toBe('email:root@example.org:eve@example.org');
    // A Message-ID cannot be written as someone's own conversation under a thread: ids with a colon are hashed.
    expect(idPart('<root@example.org:eve@example.org>')).toMatch(/^h-/);
  });

  it('hashes an id that is long or carries braces', () => {
    const long = `<${'x'.repeat(200)}@example.org>`;
    const n = normalizeMail(ctx, mail({ messageId: long }));
    expect(n.kind === 'message' && n.message.conversationId).toMatch(/^email:h-[A-Za-z0-9_-]{32}$/);
    const braces = normalizeMail(ctx, mail({ messageId: '<{c:x}@example.org>' }));
    expect(braces.kind === 'message' && braces.message.updateKey).toMatch(/^email:h-/);
  });

  it('skips auto-replies, bounces and its own mail', () => {
    expect(normalizeMail(ctx, mail({}, { 'Auto-Submitted': 'auto-generated' }))).toEqual({ kind: 'skip', reason: 'auto-reply' });
    expect(normalizeMail(ctx, mail({}, { 'Auto-Submitted': 'no' })).kind).toBe('message');
    expect(normalizeMail(ctx, mail({}, { Precedence: 'junk' }))).toEqual({ kind: 'skip', reason: 'auto-reply' });
    expect(normalizeMail(ctx, mail({}, { 'X-Autorespond': 'yes' }))).toEqual({ kind: 'skip', reason: 'auto-reply' });
    expect(normalizeMail(ctx, mail({}, { 'Content-Type': 'multipart/report; report-type=delivery-status' }))).toEqual({ kind: 'skip', reason: 'bounce' });
    expect(normalizeMail(ctx, mail({ from: { address: 'postmaster@example.org' } }))).toEqual({ kind: 'skip', reason: 'bounce' });
    expect(normalizeMail(ctx, mail({ from: { address: 'Bot@Example.net' } }))).toEqual({ kind: 'skip', reason: 'own' });
  });

  it('cuts the quoted history below the reply marker and the signature', () => {
    expect(stripQuoted('Yes please.\n\nOn Mon, 7 Dec 2026 at 10:00, Bot\n<bot@example.net> wrote:\n> earlier')).toBe('Yes please.');
    expect(stripQuoted('Fine.\n-----Original Message-----\nFrom: bot')).toBe('Fine.');
    expect(stripQuoted('Thanks!\n-- \nAlice\nACME')).toBe('Thanks!');
    expect(stripQuoted('> quoted first\nmy answer\n> trailing quote')).toBe('> quoted first\nmy answer');
  });

  it('searches only the first million characters of a mail for its reply marker: a longer text with none there is skipped as too long', () => {
    // Lines that look like the German marker but are none (no closing colon).
    const history = 'Am 7. Dez. schrieb schrieb schrieb\n'.repeat(Math.ceil(MAX_SEARCHED_CHARS / 35));
    expect(normalizeMail(ctx, mail({ text: `${history}and more` }))).toEqual({ kind: 'skip', reason: 'too-long' });
    expect(stripQuoted(`${history}and more`)).toBeUndefined();
    // A marker inside the searched stretch still cuts the history off, however long the mail.
    const reply = normalizeMail(ctx, mail({ text: `Yes please.\nOn Mon, 7 Dec 2026, Bot wrote:\n${history}` }));
    expect(reply).toMatchObject({ kind: 'message', message: { text: 'Yes please.' } });
  });
});

describe('email settings', () => {
  const base = { address: 'bot@example.net', imapHost: '127.0.0.1', imapPassword: 'imap-secret-password', smtpHost: '127.0.0.1' };

  it('requires authServId unless requireAuthenticated is false, naming the setting', () => {
    expect(() => createEmailPlugin(base, deps())).toThrow(ConfigError);
    expect(() => createEmailPlugin(base, deps())).toThrow(/channels\.email\.authServId/);
    expect(() => createEmailPlugin({ ...base, requireAuthenticated: false }, deps())).not.toThrow();
  });

  it('warns at start when every From is believed (requireAuthenticated: false), the password nowhere in the log', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    const redis = new Redis(redisUrl());
    const prefix = testPrefix();
    const plugin = createEmailPlugin({ ...base, imapPort: 1, requireAuthenticated: false }, { logger, redis, prefix });
    try {
      await plugin.start({ redis, prefix, logger } as unknown as ChannelHost);
      expect(lines.map((l) => JSON.parse(l)).filter((l) => l.level === 40 && /requireAuthenticated is false/.test(l.msg))).toHaveLength(1);
    } finally {
      await plugin.stop();
      await cleanupPrefix(redis, prefix);
      await redis.quit();
    }
    expect(lines.join('\n')).not.toContain('imap-secret-password');
  });
});

function deps() {
  return { logger: pino({ level: 'silent' }), redis: {} as Redis, prefix: 'sb' };
}
