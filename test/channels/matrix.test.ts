/**
 * The Matrix channel's pure parts: event normalization, who an invite may
 * come from, error mapping, power levels and transaction ids.
 */
import { describe, expect, it } from 'vitest';
import { matrixConfigSchema } from '../../plugins/matrix/config.js';
import { matrixError } from '../../plugins/matrix/errors.js';
import { mayJoin } from '../../plugins/matrix/inbound.js';
import { afterOwnJoin, normalizeEvent, roomOf, stripReplyFallback, threadOf } from '../../plugins/matrix/normalize.js';
import { isModerator } from '../../plugins/matrix/outbound.js';
import { txnIdOf } from '../../plugins/matrix/send.js';

const ROOM = '!room:example.org';
const ctx = { channelId: 'matrix', roomId: ROOM, selfId: '@bot:example.org', group: false };
const text = (body: string, over: Record<string, unknown> = {}, content: Record<string, unknown> = {}) => ({
  type: 'm.room.message',
  event_id: '$e1',
  sender: '@ann:example.org',
  content: { msgtype: 'm.text', body, ...content },
  ...over,
});

describe('matrix normalizeEvent', () => {
  it('turns an m.text message into an inbound message keyed by its event id', () => {
    expect(normalizeEvent({ ...ctx, group: true }, text('hello'))).toMatchObject({
      kind: 'message',
      message: {
        conversationId: `matrix:${ROOM}`,
        updateKey: 'matrix:$e1',
        chatId: ROOM,
        sender: { id: '@ann:example.org' },
        text: 'hello',
        messageId: '$e1',
        group: true,
      },
    });
  });

  it('skips notices, emotes, the bot itself, edits, empty text, other events and unreadable ones', () => {
    const reason = (raw: unknown) => {
      const r = normalizeEvent(ctx, raw);
      return r.kind === 'skip' ? r.reason : 'message';
    };
    expect(reason(text('from a bridge', {}, { msgtype: 'm.notice' }))).toBe('unsupported-type');
    expect(reason(text('waves', {}, { msgtype: 'm.emote' }))).toBe('unsupported-type');
    expect(reason(text('echo', { sender: '@bot:example.org' }))).toBe('own');
    expect(reason(text('* fixed', {}, { 'm.relates_to': { rel_type: 'm.replace', event_id: '$e0' } }))).toBe('edit');
    expect(reason(text('   '))).toBe('empty');
    expect(reason({ type: 'm.room.encrypted', event_id: '$x', sender: '@ann:example.org', content: {} })).toBe('encrypted');
    expect(reason({ type: 'm.room.message' })).toBe('unreadable');
  });

  it('turns media into an attachment by its mxc:// URI, a caption (body beside a filename) as the text', () => {
    const image = text(
      'look at this',
      {},
      { msgtype: 'm.image', filename: 'cat.png', url: 'mxc://example.org/AbC_1-x', info: { mimetype: 'image/png', size: 12 } },
    );
    expect(normalizeEvent(ctx, image)).toMatchObject({
      kind: 'message',
      message: { text: 'look at this', attachments: [{ kind: 'image', ref: 'mxc://example.org/AbC_1-x', name: 'cat.png', mime: 'image/png', size: 12 }] },
    });
    const voice = text('Voice message', {}, { msgtype: 'm.audio', url: 'mxc://[::1]:8448/v1', 'org.matrix.msc3245.voice': {} });
    expect(normalizeEvent(ctx, voice)).toMatchObject({ kind: 'message', message: { text: '', attachments: [{ kind: 'audio', name: 'Voice message' }] } });
  });

  it('skips media whose URI is missing or off the mxc:// grammar, and encrypted media', () => {
    const reason = (content: Record<string, unknown>) => {
      const r = normalizeEvent(ctx, text('f.pdf', {}, { msgtype: 'm.file', ...content }));
      return r.kind === 'skip' ? r.reason : 'message';
    };
    for (const url of [
      'mxc://example.org/../../admin',
      'mxc://example.org/a/b',
      'mxc://ex ample.org/id',
      'https://example.org/f.pdf',
      'mxc://example.org/',
      42,
    ])
      expect(reason({ url })).toBe('bad-media');
    expect(reason({})).toBe('bad-media');
    expect(reason({ file: { url: 'mxc://example.org/enc' } })).toBe('unsupported-type');
    expect(reason({ url: 'mxc://example.org:8448/good' })).toBe('message');
  });

  it("records a reply's target and keeps only the person's own text", () => {
    const reply = text(
      '> <@bot:example.org> the earlier answer\n> second line\n\nthanks!',
      {},
      { 'm.relates_to': { 'm.in_reply_to': { event_id: '$asked' } } },
    );
    expect(normalizeEvent(ctx, reply)).toMatchObject({ kind: 'message', message: { text: 'thanks!', replyTo: { messageId: '$asked' } } });
  });
});

describe('matrix stripReplyFallback', () => {
  it('leaves a body that merely starts with a quote and no empty line after it', () => {
    expect(stripReplyFallback('> a quote\nand text')).toBe('> a quote\nand text');
    expect(stripReplyFallback('no quote')).toBe('no quote');
  });
});

describe('matrix roomOf', () => {
  it('parses a room conversation and refuses anything else', () => {
    expect(roomOf('matrix', `matrix:${ROOM}`)).toBe(ROOM);
    expect(roomOf('matrix', 'matrix:@ann:example.org')).toBeUndefined();
    expect(roomOf('matrix', `matrix:${ROOM}/$root1`)).toBe(ROOM);
    expect(threadOf('matrix', `matrix:${ROOM}/$root1`)).toBe('$root1');
    expect(threadOf('matrix', `matrix:${ROOM}`)).toBeUndefined();
    expect(roomOf('matrix', `matrix:${ROOM}/not-an-event`)).toBeUndefined();
    expect(roomOf('matrix', `line:${ROOM}`)).toBeUndefined();
    // Room version 12: the id is the create event's hash, with no server.
    const v12 = '!31hneApxJ_1o-63DmFrpeqnkFfWppnzWso1JvH3ogLM';
    expect(roomOf('matrix', `matrix:${v12}`)).toBe(v12);
    expect(threadOf('matrix', `matrix:${v12}/$root1`)).toBe('$root1');
    expect(roomOf('matrix', 'matrix:!')).toBeUndefined();
  });
});

describe('matrix mayJoin', () => {
  it('joins every invite with true, none with false, and listed users or servers with a list', () => {
    expect(mayJoin(true, '@x:evil.example')).toBe(true);
    expect(mayJoin(false, '@ann:example.org')).toBe(false);
    const list = ['@ann:example.org', ':corp.example'];
    expect(mayJoin(list, '@ann:example.org')).toBe(true);
    expect(mayJoin(list, '@bob:corp.example')).toBe(true);
    expect(mayJoin(list, '@bob:example.org')).toBe(false);
    expect(mayJoin(list, '@ann:example.org.evil.example')).toBe(false);
    expect(mayJoin(list, undefined)).toBe(false);
  });
});

describe('matrix errors', () => {
  const TOKEN = 'syt_secret_token_0123456789';

  it('reads the wait of a 429 from retry_after_ms, else Retry-After, else the default', () => {
    expect(matrixError('send', 429, { errcode: 'M_LIMIT_EXCEEDED', retry_after_ms: 750 }, null, TOKEN, 5000)).toMatchObject({
      retryAfterMs: 750,
      errcode: 'M_LIMIT_EXCEEDED',
    });
    expect(matrixError('send', 429, { errcode: 'M_LIMIT_EXCEEDED' }, '2', TOKEN, 5000).retryAfterMs).toBe(2000);
    expect(matrixError('send', 429, {}, null, TOKEN, 5000).retryAfterMs).toBe(5000);
    expect(matrixError('send', 403, { errcode: 'M_FORBIDDEN' }, null, TOKEN, 5000)).toMatchObject({ status: 403, retryAfterMs: undefined });
  });

  it('never carries the access token', () => {
    const err = matrixError('send', 401, { errcode: 'M_UNKNOWN_TOKEN', error: `bad token ${TOKEN}` }, null, TOKEN, 5000);
    expect(err.message).not.toContain(TOKEN);
  });
});

describe('matrix isModerator', () => {
  it('counts a power level at least the redact level', () => {
    const pl = { users: { '@ann:example.org': 50, '@boss:example.org': 100 }, users_default: 0, redact: 50 };
    expect(isModerator(pl, '@ann:example.org')).toBe(true);
    expect(isModerator(pl, '@boss:example.org')).toBe(true);
    expect(isModerator(pl, '@bob:example.org')).toBe(false);
    expect(isModerator({ users_default: 50 }, '@bob:example.org')).toBe(true);
    expect(isModerator({}, '@bob:example.org')).toBe(false);
  });
});

describe('matrix txnIdOf', () => {
  it('is the same for the same delivery key, differs between keys, and is URL-safe', () => {
    expect(txnIdOf('r1:3:0')).toBe(txnIdOf('r1:3:0'));
    expect(txnIdOf('r1:3:0')).not.toBe(txnIdOf('r1:3:1'));
    expect(txnIdOf('r1:3:0')).toMatch(/^sb-[A-Za-z0-9_-]+$/);
  });
});

describe('matrix settings', () => {
  const base = { homeserverUrl: 'https://matrix.example.org', accessToken: 'syt_0123456789abcdef', userId: '@bot:example.org' };
  const problems = (over: Record<string, unknown>) => {
    const r = matrixConfigSchema.safeParse({ ...base, ...over });
    return r.success ? [] : r.error.issues.map((i) => i.path.join('.'));
  };

  it('takes the three required settings and fills in the rest', () => {
    expect(matrixConfigSchema.parse(base)).toMatchObject({ autoJoin: false, streaming: false, reactions: false, syncTimeoutMs: 30_000 });
  });

  it('names a bad user id, a homeserver URL with a trailing slash, a short token and a bad autoJoin entry', () => {
    expect(problems({ userId: 'bot' })).toEqual(['userId']);
    expect(problems({ homeserverUrl: 'https://matrix.example.org/' })).toEqual(['homeserverUrl']);
    expect(problems({ accessToken: 'short' })).toEqual(['accessToken']);
    expect(problems({ autoJoin: ['ann'] }).every((p) => p.startsWith('autoJoin'))).toBe(true);
    expect(problems({ autoJoin: ['ann'] }).length).toBeGreaterThan(0);
  });
});

describe('matrix afterOwnJoin', () => {
  const SELF = '@bot:example.org';
  const member = (membership: string, prev?: string) => ({
    type: 'm.room.member',
    state_key: SELF,
    content: { membership },
    ...(prev && { unsigned: { prev_content: { membership: prev } } }),
  });
  const before = text('before');
  const after = text('after');

  it("keeps only what follows the bot's join in a newly joined room's timeline", () => {
    expect(afterOwnJoin([before, member('join', 'invite'), after], SELF)).toEqual([after]);
    expect(afterOwnJoin([before, member('join'), after], SELF)).toEqual([after]);
  });

  it('keeps the whole timeline when the bot only changed its profile, or did not join in it', () => {
    expect(afterOwnJoin([before, member('join', 'join'), after], SELF)).toEqual([before, member('join', 'join'), after]);
    expect(afterOwnJoin([before, after], SELF)).toEqual([before, after]);
  });
});
