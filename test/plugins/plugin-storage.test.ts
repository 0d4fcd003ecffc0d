/**
 * Plugin-owned storage: keys namespaced by plugin id, a conversation's keys in
 * its cluster slot, declared keys purged and expired with the conversation,
 * and a plugin's own script run through the core's loader.
 */
import { describe, expect, it } from 'vitest';
import { InvalidInputError, ScriptError } from '../../src/errors.js';
import { declaredConversationKeys, pluginStorage } from '../../src/plugin/storage.js';
import { purgeConversation } from '../../src/protocol/purge.js';
import { resolveRetention, retainConversation } from '../../src/protocol/retention.js';
import { defineScript } from '../../src/scripts/plugin-script.js';
import { CID, expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

const fx = useProtocolFixture();
const IDLE = 3600;
const fixture = (file: string) => new URL(`../fixtures/plugin-scripts/${file}`, import.meta.url);
const PLUGIN = { id: 'memo', storage: { conversationKeys: ['note'] } };

describe('plugin storage', () => {
  it("names a plugin's conversation key in the conversation's hash tag and its other keys under its id", () => {
    const s = pluginStorage('sb', 'memo');
    expect(s.conversationKey('webhook:crm:7', 'note')).toBe('sb:{c:webhook:crm:7}:p:memo:note');
    expect(s.key('cursors:a')).toBe('sb:p:memo:cursors:a');
    expect(s.core('telegram:1').replies).toBe('sb:{c:telegram:1}:replies');
  });

  it('refuses a name with a brace, whitespace or over the length limit, and a bad conversation id', () => {
    const s = pluginStorage('sb', 'memo');
    for (const name of ['', 'a}b', '{c:x}', 'a b', 'x'.repeat(129), ':lead']) expect(() => s.key(name), name).toThrow(InvalidInputError);
    expect(() => s.conversationKey('has space', 'note')).toThrow(InvalidInputError);
    // `a` + `b:c` and `a:b` + `c` would name one key.
    for (const id of ['a:b', '', 'has space', '{x}']) expect(() => pluginStorage('sb', id), id).toThrow(InvalidInputError);
    expect(() => declaredConversationKeys([{ id: 'memo', storage: { conversationKeys: ['bad name'] } }])).toThrow(/plugin memo/);
  });

  it("deletes a plugin's declared conversation keys with the conversation on purge, and leaves undeclared ones", async () => {
    const { runs, run } = await fx.running();
    await runs.finish(run, 'completed');
    const s = pluginStorage(fx.prefix, 'memo');
    await fx.redis.set(s.conversationKey(CID, 'note'), 'x');
    await fx.redis.set(s.conversationKey(CID, 'undeclared'), 'y');
    const r = await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: declaredConversationKeys([PLUGIN]) });
    expect(r.kind).toBe('purged');
    expect(await fx.redis.exists(s.conversationKey(CID, 'note'))).toBe(0);
    expect(await fx.redis.get(s.conversationKey(CID, 'undeclared'))).toBe('y');
  });

  it('expires declared keys with an idle conversation, and a new run makes them persistent again', async () => {
    const { dispatch, runs, run } = await fx.running();
    const s = pluginStorage(fx.prefix, 'memo');
    const note = s.conversationKey(CID, 'note');
    await fx.redis.set(note, 'x');
    await runs.finish(run, 'completed');
    const r = await retainConversation(fx.redis, fx.prefix, CID, resolveRetention({ idleTtlSeconds: IDLE }), declaredConversationKeys([PLUGIN]));
    expect(r.expiring).toBe(true);
    expect(await fx.redis.ttl(note)).toBeGreaterThan(IDLE - 100);
    expectKind(await dispatch.ingest(fx.message(2)), 'new-run');
    expect(await fx.redis.ttl(note)).toBe(-1);
    expect(await fx.redis.ttl(fx.keys().log)).toBe(-1);
  });

  it('keeps the shorter TTL of a declared key that has its own, also after a new run', async () => {
    const { dispatch, runs, run } = await fx.running();
    const lock = pluginStorage(fx.prefix, 'memo').conversationKey(CID, 'note');
    await fx.redis.set(lock, 'x', 'EX', 60);
    await runs.finish(run, 'completed');
    await retainConversation(fx.redis, fx.prefix, CID, resolveRetention({ idleTtlSeconds: IDLE }), declaredConversationKeys([PLUGIN]));
    expectKind(await dispatch.ingest(fx.message(2)), 'new-run');
    const ttl = await fx.redis.ttl(lock);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60);
  });
});

describe('plugin scripts', () => {
  const noteSet = defineScript(fixture('note-set-2.lua'));

  it("runs through the loader with the core's and its own includes, touching core and plugin keys in one step", async () => {
    const { runs, run } = await fx.running();
    await runs.finish(run, 'completed');
    const note = pluginStorage(fx.prefix, 'memo').conversationKey(CID, 'note');
    expect(noteSet.name).toBe('note-set');
    expect(noteSet.numberOfKeys).toBe(2);
    const seq = Number(await fx.redis.hget(fx.keys().meta, 'seq'));
    expect(seq).toBeGreaterThan(0);
    expect(await noteSet.run(fx.redis, [fx.keys().meta, note], ['ok'])).toEqual(['set', seq]);
    expect(await fx.redis.get(note)).toBe(`seq=${seq}`);
  });

  it('maps a negative code to the typed error', async () => {
    const note = pluginStorage(fx.prefix, 'memo').conversationKey(CID, 'note');
    await expect(noteSet.run(fx.redis, [fx.keys().meta, note], ['refuse'])).rejects.toBeInstanceOf(InvalidInputError);
  });

  it('refuses a call with the wrong number of keys before sending anything', async () => {
    const note = pluginStorage(fx.prefix, 'memo').conversationKey(CID, 'note');
    await expect(noteSet.run(fx.redis, [note], ['ok'])).rejects.toThrow(/expects 2 keys, got 1/);
    expect(await fx.allKeys()).toEqual([]);
  });

  it('refuses a script with a missing include, without a header, or not named <verb>-<numKeys>.lua', () => {
    expect(() => defineScript(fixture('broken-1.lua'))).toThrow(/missing include "nowhere"/);
    expect(() => defineScript(fixture('headless-1.lua'))).toThrow(ScriptError);
    expect(() => defineScript(fixture('includes/tag.lua'))).toThrow(/<verb>-<numKeys>\.lua/);
  });
});
