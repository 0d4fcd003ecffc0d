/** `steerbot pair <code>` approves a waiting pairing code in the configured Redis; an unknown code exits 1 and approves nobody. */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AccessStore } from '../../host/access/store.js';
import { accessSchema } from '../../src/config/schema.js';
import { IdentityStore } from '../../src/people/identity.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { runBuiltCli } from '../helpers/cli.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const redis = new Redis(redisUrl());
const prefix = testPrefix();
const store = new AccessStore(redis, prefix, accessSchema.parse({}), new IdentityStore({ redis, prefix }));
afterEach(() => cleanupPrefix(redis, prefix));
afterAll(() => redis.quit());

/** Runs the CLI with `args` on the test's Redis and prefix. */
const cli = (args: string[]) => runBuiltCli(args, { REDIS_URL: redisUrl(), STEERBOT_PREFIX: prefix });

// The CLI runs as the package installs it (built once for the lane); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

describe('steerbot pair', () => {
  it('approves the code: the person may talk, the code is used up', async () => {
    const r = await store.requestCode({ account: 'telegram:1001', channel: 'telegram', userId: '1001', name: 'Alice', conversationId: 'telegram:1001' });
    expect(r.kind).toBe('code');
    const code = (r as { code: string }).code;
    const run = await cli(['pair', code.toLowerCase()]);
    expect(run.err).toBe('');
    expect(run.out).toBe('Approved Alice (telegram:1001); identity telegram:1001.\n');
    expect(run.code).toBe(0);
    expect((await store.approved('telegram', '1001')).approved).toBe(true);
    expect(await store.waitingCodes()).toEqual([]);
  });

  it('exits 1 for an unknown code and approves nobody', async () => {
    await store.requestCode({ account: 'telegram:1001', channel: 'telegram', userId: '1001', conversationId: 'telegram:1001' });
    const run = await cli(['pair', 'ZZZZ-ZZZZ']);
    expect(run.out).toBe('No such pairing code, or it expired.\n');
    expect(run.code).toBe(1);
    expect((await store.approved('telegram', '1001')).approved).toBe(false);
  });

  it('exits 2 without a code', async () => {
    const run = await cli(['pair']);
    expect(run.code).toBe(2);
    expect(run.err).toContain('pair takes one code');
  });
});
