/**
 * Finds the Redis the tests use: `REDIS_URL`, else 127.0.0.1:6379, else a
 * private, in-memory `redis-server` stopped after the run. Tests read it with
 * `redisUrl()` from `test/helpers/redis.ts`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { redactSecrets } from '../src/errors.js';
import { pingRedis } from '../src/redis/connection.js';
import { ensureRedis } from '../src/redis/local.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the Redis every integration test uses. */
    redisUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const given = process.env.REDIS_URL || undefined;
  if (given && !(await pingRedis(given, 2000))) throw new Error(`REDIS_URL is set but does not answer PING: ${redactSecrets(given)}`);
  const dataDir = mkdtempSync(join(tmpdir(), 'steerbot-test-redis-'));
  const redis = await ensureRedis({ ...(given && { url: given }), dataDir, persistent: false });
  project.provide('redisUrl', redis.url);
  // Workers are forked after global setup, so child processes the tests spawn see it too.
  process.env.REDIS_URL = redis.url;
  if (redis.started) console.log(`[global-setup] started a private redis-server at ${redis.url}`);
  return async () => {
    await redis.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
}
