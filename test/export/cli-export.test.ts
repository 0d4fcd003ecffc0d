/**
 * `steerbot export`: a conversation's or a person's document on stdout or in
 * a file (`--out`), against the configured Redis; an id with nothing stored,
 * a purged conversation or a bad id exits non-zero and writes nothing (no
 * output, no file); a command line without exactly one target is a usage error.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConversationIndex } from '../../src/people/conversation-index.js';
import { MemoryStore } from '../../src/people/memory.js';
import { purgeConversation } from '../../src/protocol/purge.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { runBuiltCli } from '../helpers/cli.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

// The CLI runs as the package installs it (built once for the lane); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

const redis = new Redis(redisUrl());
const prefix = testPrefix();
afterEach(() => cleanupPrefix(redis, prefix));
afterAll(() => redis.quit());

/** Runs the CLI with `args` on the test's Redis and prefix. */
const cli = (args: string[]) => runBuiltCli(args, { REDIS_URL: redisUrl(), STEERBOT_PREFIX: prefix });

const hello = { v: 1, kind: 'message.received', at: 1, updateKey: 'web:1', sender: { id: 'alice' }, text: 'hello from alice' };

/** A web chat conversation of `web:alice` with one message, noted as hers. */
async function aliceSaidHello(): Promise<void> {
  await redis.xadd(conversationKeys(prefix, 'web:alice').log, '1-0', 'e', JSON.stringify(hello));
  await new ConversationIndex({ redis, prefix }).note('web', 'alice', 'web:alice');
  await new MemoryStore({ redis, prefix }).save('web:alice', 'likes tea');
}

describe('steerbot export', () => {
  it('writes a conversation to stdout and a person to --out, as one JSON document each', async () => {
    await aliceSaidHello();
    const conv = await cli(['export', '--conversation', 'web:alice']);
    expect(conv.err).toBe('steerbot: exported conversation web:alice\n');
    expect(conv.code).toBe(0);
    const d = JSON.parse(conv.out);
    expect(d).toMatchObject({ format: 'steerbot.export', version: 1, conversation: 'web:alice', record: [{ seq: 1, ...hello }], memoryOf: 'web:alice' });

    const dir = mkdtempSync(join(tmpdir(), 'steerbot-cli-export-'));
    const file = join(dir, 'alice.json');
    const person = await cli(['export', '--identity', 'web:alice', '--out', file]);
    expect([person.code, person.out, person.err]).toEqual([0, '', `steerbot: exported identity web:alice to ${file}\n`]);
    const p = JSON.parse(readFileSync(file, 'utf8'));
    expect(p).toMatchObject({ identity: 'web:alice', accounts: ['web:alice'], memory: [expect.objectContaining({ text: 'likes tea' })] });
    expect(p.conversations).toEqual([expect.objectContaining({ conversation: 'web:alice', scope: 'full' })]);
    expect(readdirSync(dir)).toEqual(['alice.json']);
    // A person's messages and notes: readable by the operator's account only, whatever the umask.
    expect(statSync(file).mode & 0o777).toBe(0o600);
  }, 60_000);

  it('exits 1 and writes nothing for an id with nothing stored, or a purged conversation; 2 for a bad id', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'steerbot-cli-export-'));
    const file = join(dir, 'out.json');
    const unknown = await cli(['export', '--conversation', 'web:nobody', '--out', file]);
    expect([unknown.code, unknown.out, unknown.err]).toEqual([1, '', 'steerbot: nothing is stored for conversation web:nobody\n']);
    const nobody = await cli(['export', '--identity', 'web:nobody']);
    expect([nobody.code, nobody.out, nobody.err]).toEqual([1, '', 'steerbot: nothing is stored for identity web:nobody\n']);

    await aliceSaidHello();
    await purgeConversation(redis, prefix, 'web:alice');
    const purged = await cli(['export', '--conversation', 'web:alice', '--out', file]);
    expect([purged.code, purged.out, purged.err]).toEqual([1, '', 'steerbot: conversation web:alice was purged: nothing is stored for it\n']);

    const bad = await cli(['export', '--conversation', 'a{b}']);
    expect([bad.code, bad.out]).toEqual([2, '']);
    expect(bad.err).toContain('conversation id must be');
    expect(existsSync(file)).toBe(false);
    expect(readdirSync(dir)).toEqual([]);
  }, 90_000);

  // Independent of each other and of Redis: run at once.
  it.concurrent.each([
    [['export'], 'export needs one of --conversation <id> and --identity <id>'],
    [['export', '--conversation', 'web:a', '--identity', 'web:a'], 'export needs one of --conversation <id> and --identity <id>'],
    [['export', 'web:a'], 'export takes no arguments'],
    [['start', '--conversation', 'web:a'], '--conversation, --identity and --out go with export'],
  ])('%j is a usage error (exit 2)', async (args, message) => {
    const run = await cli(args);
    expect(run.code).toBe(2);
    expect(run.out).toBe('');
    expect(run.err).toContain(message);
  });
});
