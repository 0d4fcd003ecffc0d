/**
 * Finds the Redis the tests use: `REDIS_URL`, else 127.0.0.1:6379, else a
 * private, in-memory `redis-server` stopped after the run. Tests read it with
 * `redisUrl()` from `test/helpers/redis.ts`.
 *
 * A whole-lane run (`npm test`, `npm run test:e2e`) also starts building the
 * package for the e2e lane (`test/helpers/built-package.ts`) at once, so the
 * build overlaps the unit lane rather than holding up the e2e files that
 * start processes from `dist/` or pack it. A run of chosen files builds it
 * when a file first needs it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { redactSecrets } from '../src/errors.js';
import { pingRedis } from '../src/redis/connection.js';
import { ensureRedis } from '../src/redis/local.js';
import { builtPackage, packageDir } from './helpers/built-package.js';

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
  // Hashes the sources once for the lane's processes (forked after this, they inherit the variable it sets).
  if (project.name === 'e2e') await packageDir();
  const prebuild = new AbortController();
  const building =
    project.name === 'e2e' && /^test(:e2e)?$/.test(process.env.npm_lifecycle_event ?? '')
      ? builtPackage(prebuild.signal).catch((err: Error) => {
          // The files that need the build report the failure; a build stopped at teardown is no failure.
          if (!prebuild.signal.aborted) console.error(`[global-setup] building the package failed: ${err.message}`);
        })
      : undefined;
  return async () => {
    // Unfinished when every file has run: no file needed it.
    prebuild.abort();
    await building;
    await redis.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
}
