/** The Lua script files follow the BullMQ convention: `<verb>-<numKeys>.lua` (`-<numKeys>n.lua`: per item of a batch), a documented header, keys that match. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ScriptError } from '../../src/errors.js';
import { runScript, type ScriptName, scriptKeyCount, scriptSource } from '../../src/scripts/index.js';
import { useProtocolFixture } from '../helpers/protocol-fixture.js';

const DIR = fileURLToPath(new URL('../../src/scripts/', import.meta.url));
const FILE_RE = /^([a-z]+(?:-[a-z]+)*)-(\d+)(n?)\.lua$/;
const ALL_NAMES: ScriptName[] = [
  'schedule-put',
  'request-compaction',
  'outbox-claim',
  'outbox-set',
  'lock-release',
  'send-record',
  'send-result',
  'api-admit',
  'api-revoke',
  'lease-acquire',
  'ingest',
  'acquire',
  'heartbeat',
  'append',
  'pull',
  'finish',
  'request-interrupt',
  'reset',
  'set-policy',
  'set-model',
  'status',
  'status-command',
  'usage-add',
  'usage-admit',
  'state-set',
  'compaction-commit',
  'compact-request-clear',
  'reply-store',
  'noop',
  'purge',
  'retain',
  'artifact-put',
  'approval-request',
  'approval-decide',
  'question-answer',
  'identity-link',
  'identity-unlink',
  'identity-purge',
  'access-check',
  'access-request',
  'access-approve',
  'access-link',
  'access-link-code',
  'access-link-revoke',
  'memory-save',
  'memory-embed',
];

const luaFiles = readdirSync(DIR).filter((f) => f.endsWith('.lua'));
const includeFiles = readdirSync(join(DIR, 'includes')).filter((f) => f.endsWith('.lua'));

/** Indexes n of every `<word>[n]` in `text`. */
function indexes(text: string, word: 'KEYS' | 'ARGV'): number[] {
  return [...text.matchAll(new RegExp(`\\b${word}\\[(\\d+)\\]`, 'g'))].map((m) => Number(m[1]));
}

function split(source: string): { header: string; body: string } {
  const end = source.indexOf(']]');
  return { header: source.slice(0, end + 2), body: source.slice(end + 2) };
}

describe('script files', () => {
  const fx = useProtocolFixture();

  it('are exactly the scripts the loader knows', () => {
    expect(luaFiles.map((f) => FILE_RE.exec(f)?.[1]).sort()).toEqual([...ALL_NAMES].sort());
  });

  describe.each(luaFiles)('%s', (file) => {
    const source = readFileSync(join(DIR, file), 'utf8');
    const m = FILE_RE.exec(file);
    const name = m?.[1] as ScriptName;
    const numKeys = Number(m?.[2]);
    const { header, body } = split(source);

    it('is named <verb>-<numKeys>.lua or <verb>-<numKeys>n.lua', () => {
      expect(file).toMatch(FILE_RE);
    });

    it('begins with a --[[ header that documents KEYS and Returns', () => {
      expect(source.startsWith('--[[')).toBe(true);
      expect(header.endsWith(']]')).toBe(true);
      expect(header).toMatch(/\bReturns\b/);
      if (numKeys > 0) {
        expect(header).toMatch(/\bKEYS\[/);
        // every key 1..n documented, and no more
        expect([...new Set(indexes(header, 'KEYS'))].sort((a, b) => a - b)).toEqual(Array.from({ length: numKeys }, (_, i) => i + 1));
      }
    });

    it('takes as many keys as the highest KEYS[n] in the file, and scriptKeyCount agrees', () => {
      expect(Math.max(0, ...indexes(source, 'KEYS'))).toBe(numKeys);
      expect(scriptKeyCount(name)).toBe(numKeys);
      expect(Math.max(0, ...indexes(split(scriptSource(name)).body, 'KEYS'))).toBeLessThanOrEqual(numKeys);
    });

    it('documents every ARGV[n] it reads', () => {
      const documented = new Set(indexes(header, 'ARGV'));
      for (const n of new Set(indexes(body, 'ARGV'))) expect(documented, `ARGV[${n}]`).toContain(n);
    });

    it('resolves every include', () => {
      expect(scriptSource(name)).not.toMatch(/^--- @include/m);
      for (const [, inc] of source.matchAll(/^--- @include "([a-z0-9-]+)"/gm)) expect(includeFiles).toContain(`${inc}.lua`);
    });

    it('compiles on Redis', async () => {
      const sha = await fx.redis.script('LOAD', scriptSource(name));
      expect(sha).toMatch(/^[0-9a-f]{40}$/);
    });
  });

  describe('includes', () => {
    it.each(includeFiles)('%s starts with a --[[ header and reads no KEYS or ARGV of its own', (file) => {
      const source = readFileSync(join(DIR, 'includes', file), 'utf8');
      expect(source.startsWith('--[[')).toBe(true);
      expect(indexes(source, 'KEYS')).toEqual([]);
      expect(indexes(source, 'ARGV')).toEqual([]);
    });
  });

  describe('runScript', () => {
    it('refuses a call with the wrong number of keys before touching Redis', async () => {
      await expect(runScript(fx.redis, 'heartbeat', ['a', 'b'], [1, 1])).rejects.toBeInstanceOf(ScriptError);
    });

    it('refuses a batch call whose keys are not whole items, or no item', async () => {
      await expect(runScript(fx.redis, 'ingest', ['a', 'b', 'c'], ['x', 'y'])).rejects.toThrow(/positive multiple of 2 keys, got 3/);
      await expect(runScript(fx.redis, 'ingest', [], [])).rejects.toThrow(/got 0/);
    });
  });
});

/**
 * How each script that appends to a conversation's record keeps a purged conversation's meta without a seq
 * while its tombstone stands: ingest reads the tombstone only when meta holds no seq (ingest-2n.lua).
 * `tombstone`: it reads the tombstone first (`purge_refuses`, or `dedupe_claim` directly or through `dedupe_append`);
 * otherwise it is fenced by a key purge deletes, named here. A new appending script must take a row.
 */
const APPEND_GUARDS: Record<string, 'tombstone' | { purgedKey: string }> = {
  acquire: { purgedKey: 'the run hash (absent: not found)' },
  append: { purgedKey: 'the run hash (fenced_run)' },
  'approval-decide': { purgedKey: 'the approvals hash (absent: not_found)' },
  'approval-request': { purgedKey: 'the run hash (fenced_run)' },
  'compaction-commit': { purgedKey: 'the run hash (fenced_run)' },
  finish: { purgedKey: 'the run hash (fenced_run)' },
  ingest: 'tombstone',
  pull: { purgedKey: 'the run hash (fenced_run)' },
  'question-answer': { purgedKey: 'the approvals hash (absent: not_found)' },
  'request-compaction': 'tombstone',
  'request-interrupt': 'tombstone',
  reset: 'tombstone',
  'send-record': 'tombstone',
  'set-model': 'tombstone',
  'set-policy': 'tombstone',
};

describe('scripts that append to the record, after a purge', () => {
  // Each script's own body, as written (its includes define the helpers, not call them).
  const bodies = new Map(luaFiles.map((file) => [FILE_RE.exec(file)?.[1] ?? file, split(readFileSync(join(DIR, file), 'utf8')).body]));
  const appending = [...bodies].filter(([, body]) => /\bappend_(entry|audit)\(|\bdedupe_append\(/.test(body)).map(([name]) => name);

  it('each have a row saying what keeps a purged conversation without a seq', () => {
    expect(appending.sort()).toEqual(Object.keys(APPEND_GUARDS).sort());
  });

  it.each(Object.entries(APPEND_GUARDS).filter(([, g]) => g === 'tombstone'))('%s honours the tombstone before it appends', (name) => {
    const body = bodies.get(name) ?? '';
    const guard = body.search(/\bpurge_refuses\(|\bdedupe_append\(|\bdedupe_claim\(/);
    const firstAppend = body.search(/\bappend_(entry|audit)\(|\bdedupe_append\(/);
    expect(guard).toBeGreaterThanOrEqual(0);
    expect(guard).toBeLessThanOrEqual(firstAppend);
  });
});
