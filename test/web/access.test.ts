/**
 * Who may use the web chat and the console: everyone with the token (the
 * operator's, or the chat's own), loopback clients without one only when
 * the operator turned `allowLoopback` on (not proxied, Host a loopback
 * name), and state-changing requests only as same-origin JSON. The attacks
 * through a reverse proxy are in test/security/console-and-web.test.ts.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publicConversationId } from '../../plugins/web/visitor-id.js';
import { checkAccess, isLoopbackAddress, isLoopbackHostName, isLoopbackRequest, sameOriginJson } from '../../src/http/access.js';
import { waitFor } from '../../testing/wait.js';
import { redisUrl } from '../helpers/redis.js';
import { startWorld, type World } from './harness.js';

/** A GET with any Host header (fetch does not let one set it). */
function get(url: string, headers: Record<string, string>): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('page access rules', () => {
  const req = (remoteAddress: string, headers: Record<string, string>) => ({ remoteAddress, headers });

  it('counts 127.0.0.0/8 and ::1 (also IPv4-mapped) as loopback, nothing else', () => {
    for (const a of ['127.0.0.1', '127.3.2.1', '::1', '::ffff:127.0.0.1']) expect(isLoopbackAddress(a), a).toBe(true);
    for (const a of ['10.0.0.1', '::ffff:10.0.0.1', '0.0.0.0', '::', '1.127.0.0', undefined]) expect(isLoopbackAddress(a), String(a)).toBe(false);
    for (const h of ['localhost', 'app.localhost', '127.0.0.1', '[::1]']) expect(isLoopbackHostName(h), h).toBe(true);
    for (const h of ['0.0.0.0', 'example.com', 'localhost.example.com']) expect(isLoopbackHostName(h), h).toBe(false);
  });

  it('refuses a loopback peer that was proxied or addressed by another name (DNS rebinding)', () => {
    expect(isLoopbackRequest(req('127.0.0.1', { host: 'localhost:8080' }))).toBe(true);
    expect(isLoopbackRequest(req('127.0.0.1', { host: '127.0.0.1:8080', 'x-forwarded-for': '203.0.113.9' }))).toBe(false);
    expect(isLoopbackRequest(req('::1', { host: '[::1]:8080', forwarded: 'for=203.0.113.9' }))).toBe(false);
    expect(isLoopbackRequest(req('127.0.0.1', { host: 'evil.example:8080' }))).toBe(false);
    expect(isLoopbackRequest(req('10.1.2.3', { host: 'localhost:8080' }))).toBe(false);
  });

  it('asks everyone for the token (bearer or cookie), loopback included unless allowLoopback is on', () => {
    const access = { token: 'the-right-token-123', cookie: 'c', cookiePath: '/' };
    expect(checkAccess(req('127.0.0.1', { host: 'localhost' }), access)).toMatchObject({ ok: false, status: 401 });
    expect(checkAccess(req('127.0.0.1', { host: 'localhost' }), { ...access, allowLoopback: true })).toEqual({ ok: true, via: 'loopback' });
    expect(checkAccess(req('127.0.0.1', { host: 'localhost', authorization: 'Bearer wrong' }), { ...access, allowLoopback: true })).toMatchObject({
      ok: false,
    });
    expect(checkAccess(req('10.0.0.1', { authorization: 'Bearer the-right-token-123' }), access)).toEqual({ ok: true, via: 'token' });
    expect(checkAccess(req('10.0.0.1', { cookie: 'x=1; c=the-right-token-123' }), access)).toEqual({ ok: true, via: 'token' });
    expect(checkAccess(req('10.0.0.1', { cookie: 'c=wrong' }), access)).toMatchObject({ ok: false, error: expect.stringContaining('no longer valid') });
    expect(checkAccess(req('10.0.0.1', { authorization: 'Bearer wrong' }), access)).toMatchObject({ ok: false, error: 'bad token' });
  });

  it('takes state changes only as same-origin JSON', () => {
    expect(sameOriginJson({ headers: { 'content-type': 'application/json', host: 'localhost:8080' } })).toBe(true);
    expect(sameOriginJson({ headers: { 'content-type': 'application/json', host: 'localhost:8080', origin: 'http://localhost:8080' } })).toBe(true);
    expect(sameOriginJson({ headers: { 'content-type': 'text/plain', host: 'localhost:8080' } })).toBe(false);
    expect(sameOriginJson({ headers: { 'content-type': 'application/json', host: 'localhost:8080', origin: 'http://evil.example' } })).toBe(false);
  });
});

describe('web chat and console over HTTP', () => {
  let open: World;
  let locked: World;
  const TOKEN = 'web-token-0123456789abcdef';

  beforeAll(async () => {
    open = await startWorld(redisUrl());
    locked = await startWorld(redisUrl(), { STEERBOT_WEB_TOKEN: TOKEN, STEERBOT_CONSOLE_ALLOW_LOOPBACK: 'false' });
  });
  afterAll(async () => {
    await open?.stop();
    await locked?.stop();
  });

  const body = JSON.stringify({ conversation: 'abcdefgh12', id: 'm1', text: 'hi' });

  it('with allowLoopback on, serves a loopback client without a token, and not a rebinding page', async () => {
    expect((await fetch(`${open.app.address}/`)).status).toBe(200);
    const port = new URL(open.app.address!).port;
    const rebound = await get(`${open.app.address}/`, { host: `evil.example:${port}` });
    expect(rebound.status).toBe(401);
    expect(rebound.body).not.toContain('<script');
    expect((await get(`${open.app.address}/console/api/conversations`, { host: `evil.example:${port}` })).status).toBe(401);
  });

  it('refuses a cross-site or non-JSON message and writes nothing', async () => {
    const plain = await fetch(`${open.app.address}/chat/api/messages`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body });
    expect(plain.status).toBe(403);
    const cross = await fetch(`${open.app.address}/chat/api/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'http://evil.example' },
      body,
    });
    expect(cross.status).toBe(403);
    expect(await open.app.ctx.redis.exists(`${open.prefix}:{c:${publicConversationId('abcdefgh12')}}:log`)).toBe(0);
    const bad = await fetch(`${open.app.address}/chat/api/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ conversation: 'x', id: 'm1', text: 'hi' }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toContain('conversation');
  });

  it('asks for the token when one is set: the link sets a cookie, the cookie opens the page and its API', async () => {
    expect((await fetch(`${locked.app.address}/`)).status).toBe(401);
    expect((await fetch(`${locked.app.address}/?token=wrong-token-0123456789`)).status).toBe(401);
    const link = await fetch(`${locked.app.address}/?token=${TOKEN}`, { redirect: 'manual' });
    expect(link.status).toBe(303);
    expect(link.headers.get('location')).toBe('/');
    const cookie = link.headers.get('set-cookie')!.split(';')[0]!;
    expect(link.headers.get('set-cookie')).toMatch(/HttpOnly; SameSite=Strict/);
    expect((await fetch(`${locked.app.address}/`, { headers: { cookie } })).status).toBe(200);
    const sent = await fetch(`${locked.app.address}/chat/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json', cookie }, body });
    expect(sent.status).toBe(200);
    expect(((await sent.json()) as { result: string }).result).toBe('new-run');
    expect((await fetch(`${locked.app.address}/chat/api/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).status).toBe(
      401,
    );
  });
});

describe('console actions over HTTP', () => {
  let world: World;
  beforeAll(async () => {
    world = await startWorld(redisUrl());
  });
  afterAll(async () => {
    await world?.stop();
  });

  const action = (id: string, body: unknown) =>
    fetch(`${world.app.address}/console/api/conversations/${encodeURIComponent(id)}/actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const row = async (id: string) =>
    ((await (await fetch(`${world.app.address}/console/api/conversations/${encodeURIComponent(id)}`)).json()) as { row: Record<string, unknown> }).row;
  const entries = async (id: string) =>
    (
      (await (await fetch(`${world.app.address}/console/api/conversations/${encodeURIComponent(id)}/entries?count=50`)).json()) as {
        entries: Array<Record<string, any>>;
      }
    ).entries;

  it('sets a policy and starts a new context through the chat commands, recorded as the operator', async () => {
    const id = 'web:console-actions-1';
    expect((await action(id, { action: 'policy', arg: 'followup' })).status).toBe(200);
    expect(await row(id)).toMatchObject({ policy: 'followup', policyOverride: 'followup' });
    const reset = await action(id, { action: 'new' });
    expect(((await reset.json()) as { message: string }).message).toContain('Started a new conversation');
    const kinds = (await entries(id)).map((e) => [e.kind, e.command ?? '', e.sender?.id]);
    expect(kinds).toEqual([
      ['command.received', '/queue', 'console'],
      ['conversation.reset', '', 'console'],
    ]);
  });

  it('refuses a bad policy and an abandon of a run that is not stuck, writing nothing', async () => {
    const id = 'web:console-actions-2';
    expect((await action(id, { action: 'policy', arg: 'sometimes' })).status).toBe(400);
    expect((await action(id, { action: 'reboot' })).status).toBe(400);
    const abandon = await action(id, { action: 'abandon', arg: 'rnosuchrun1' });
    expect(abandon.status).toBe(409);
    expect(await entries(id)).toEqual([]);
  });

  it('purges a conversation through the /purge script, refuses a bad argument, and reports an already purged one', async () => {
    const id = 'web:console-actions-3';
    expect((await action(id, { action: 'policy', arg: 'collect' })).status).toBe(200);
    expect((await action(id, { action: 'purge', arg: 'everything' })).status).toBe(400);
    const purged = await action(id, { action: 'purge', arg: 'stop' });
    expect(purged.status).toBe(200);
    expect(((await purged.json()) as { message: string }).message).toMatch(/deleted|purged/i);
    expect(await entries(id)).toEqual([]);
    const again = (await (await action(id, { action: 'purge' })).json()) as { message: string };
    expect(again.message).toMatch(/already/i);
  });

  it('lists conversations from the recent-activity index, newest first, with queue counts', async () => {
    const send = (conversation: string) =>
      fetch(`${world.app.address}/chat/api/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ conversation, id: 'm1', text: 'hi' }),
      });
    expect((await send('listed-aaaaaa')).status).toBe(200);
    expect((await send('listed-bbbbbb')).status).toBe(200);
    // The console names each visitor by its public id, never by the secret the page sent.
    const [a, b] = [publicConversationId('listed-aaaaaa'), publicConversationId('listed-bbbbbb')];
    type Listing = { rows: Array<{ id: string; channel: string }>; queue: Record<string, number> };
    const listing = async () => (await (await fetch(`${world.app.address}/console/api/conversations?limit=2`)).json()) as Listing;
    // The index is written a batch at a time (within a fraction of a second), not by the ingest itself.
    const list = await waitFor(async () => {
      const l = await listing();
      return l.rows.some((r) => r.id === a) ? l : undefined;
    }, 5000);
    expect(list.rows.map((r) => r.id)).toEqual([b, a]);
    expect(list.rows[0]!.channel).toBe('web');
    expect(Object.keys(list.queue)).toEqual(expect.arrayContaining(['waiting', 'active', 'completed', 'failed']));
  });
});
