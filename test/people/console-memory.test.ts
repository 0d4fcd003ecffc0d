/** The console's memory API: lists, saves (new and edited) and deletes an identity's notes; refuses bad bodies and notes over a limit with 400 and writes nothing; answers that memory is off when it is. */
import { afterEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { MemoryStore } from '../../src/people/memory.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { CONSOLE_TOKEN, consoleCall, serveConsole } from '../helpers/console-api.js';
import { testHostFeatures } from '../helpers/host-features.js';
import { redisUrl } from '../helpers/redis.js';

const ME = 'telegram:1001';
let h: RunnerHarness | undefined;
let http: HttpServer | undefined;

afterEach(async () => {
  await http?.close();
  await h?.close();
  http = undefined;
  h = undefined;
});

async function start(memory: boolean): Promise<{ http: HttpServer; store: MemoryStore; h: RunnerHarness }> {
  h = await RunnerHarness.start({ redisUrl: redisUrl() });
  const store = new MemoryStore({ redis: h.ctx.redis, prefix: h.prefix, limits: { maxNotes: 2, maxNoteChars: 20 } });
  const config = { ...h.ctx.config, memory: { ...h.ctx.config.memory, enabled: memory, maxNotes: 2, maxNoteChars: 20 } };
  http = await serveConsole(h, { features: await testHostFeatures({ config, redis: h.ctx.redis, prefix: h.prefix }) });
  return { http, store, h };
}

const call = (method: 'GET' | 'POST', path: string, body?: unknown) => consoleCall(http!, method, path, body);

const memoryKeysNow = () => h!.redis.keys(`${h!.prefix}:{i:*`);

describe('console memory API', () => {
  it('saves, edits, lists and deletes notes', async () => {
    await start(true);
    expect((await call('POST', '/memory/save', { identity: ME, text: 'likes tea' })).body).toMatchObject({ kind: 'created', note: { id: '1' } });
    expect((await call('POST', '/memory/save', { identity: ME, id: '1', text: 'likes coffee' })).body).toMatchObject({ kind: 'updated' });
    await call('POST', '/memory/save', { identity: ME, text: 'lives in Lyon' });
    const listed = await call('GET', `/memory?identity=${encodeURIComponent(ME)}`);
    expect(listed.status).toBe(200);
    expect(listed.body.notes.map((n: { text: string }) => n.text)).toEqual(['likes coffee', 'lives in Lyon']);
    expect((await call('POST', '/memory/delete', { identity: ME, id: '1' })).body).toEqual({ deleted: 1 });
    expect((await call('POST', '/memory/delete', { identity: ME, id: '1' })).status).toBe(404);
    expect((await call('POST', '/memory/delete', { identity: ME })).body).toEqual({ deleted: 1 });
    expect((await call('GET', `/memory?identity=${ME}`)).body.notes).toEqual([]);
  });

  it.each([
    ['a note over the size limit', { identity: ME, text: 'x'.repeat(21) }],
    ['an empty note', { identity: ME, text: '  ' }],
    ['an unknown note id', { identity: ME, id: '9', text: 'edit' }],
    ['a bad identity', { identity: 'a{b}', text: 'x' }],
    ['an unknown field', { identity: ME, text: 'x', extra: 1 }],
  ])('refuses %s with 400 and writes nothing', async (_what, body) => {
    await start(true);
    const r = await call('POST', '/memory/save', body);
    expect(r.status).toBe(400);
    expect(r.body.error).toEqual(expect.any(String));
    expect(await memoryKeysNow()).toEqual([]);
  });

  it('refuses a note past the count limit with 400 (code MEMORY_LIMIT) and changes nothing', async () => {
    const { store } = await start(true);
    await store.save(ME, 'one');
    await store.save(ME, 'two');
    const r = await call('POST', '/memory/save', { identity: ME, text: 'three' });
    expect(r).toMatchObject({ status: 400, body: { code: 'MEMORY_LIMIT' } });
    expect((await store.list(ME)).map((n) => n.text)).toEqual(['one', 'two']);
  });

  it('says memory is off, and writes nothing, when it is', async () => {
    await start(false);
    expect((await call('GET', `/memory?identity=${ME}`)).body).toEqual({ enabled: false, notes: [] });
    expect((await call('POST', '/memory/save', { identity: ME, text: 'x' })).status).toBe(409);
    expect(await memoryKeysNow()).toEqual([]);
  });

  it('serves the panel with the page', async () => {
    await start(true);
    const page = await http!.inject({ method: 'GET', url: '/console', headers: { authorization: `Bearer ${CONSOLE_TOKEN}` } });
    expect(page.body).toContain('id="memory-panel"');
    const script = await http!.inject({ method: 'GET', url: '/console/memory.js' });
    expect(script.statusCode).toBe(200);
    expect(script.body).toContain('/memory/save');
  });
});
