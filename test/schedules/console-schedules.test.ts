/** The console's schedules API: lists a conversation's schedules with their next fires, cancels one, and says when schedules are off. */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { Schedules } from '../../src/schedules/schedules.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { consoleCall, serveConsole } from '../helpers/console-api.js';
import { testSchedulesFeature } from '../helpers/host-features.js';
import { cleanupPrefix, redisUrl } from '../helpers/redis.js';

const CID = 'telegram:42';
let h: RunnerHarness;
let http: HttpServer;
let schedules: Schedules;

async function serve(withSchedules: boolean): Promise<void> {
  http = await serveConsole(h, { features: [testSchedulesFeature(withSchedules ? schedules : undefined)] });
}

beforeEach(async () => {
  h = await RunnerHarness.start({ redisUrl: redisUrl() });
  schedules = new Schedules({
    client: h.ctx.redis,
    prefix: h.prefix,
    connection: new Redis(redisUrl(), { maxRetriesPerRequest: null }),
    bullPrefix: bullPrefixFor(h.prefix),
  });
});
afterEach(async () => {
  await http.close();
  await schedules.close();
  await cleanupPrefix(h.ctx.redis, bullPrefixFor(h.prefix));
  await h.close();
});

const call = (method: 'GET' | 'POST', path: string) => consoleCall(http, method, path);

describe('console schedules API', () => {
  it("lists a conversation's schedules with their next fires and cancels one", async () => {
    await serve(true);
    const daily = await schedules.create(CID, { cron: '0 9 * * *', tz: 'Europe/Paris', prompt: 'summarise the tickets' }, { createdBy: 'agent' });
    const listed = await call('GET', `/conversations/${CID}/schedules`);
    expect(listed.status).toBe(200);
    expect(listed.body.enabled).toBe(true);
    expect(listed.body.schedules).toEqual([expect.objectContaining({ id: daily.id })]);
    const next: number[] = listed.body.schedules[0].next;
    expect(next).toHaveLength(3);
    expect(next[0]).toBeGreaterThan(listed.body.now);

    expect(await call('POST', `/conversations/${CID}/schedules/nope/cancel`)).toEqual({ status: 404, body: { ok: false, message: 'no such schedule' } });
    const cancelled = await call('POST', `/conversations/${CID}/schedules/${daily.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(await schedules.list(CID)).toEqual([]);
    expect((await call('GET', `/conversations/${CID}/schedules`)).body.schedules).toEqual([]);
  });

  it('says schedules are off, and refuses a cancel, when the host has none', async () => {
    await serve(false);
    expect((await call('GET', `/conversations/${CID}/schedules`)).body).toMatchObject({ enabled: false, schedules: [] });
    expect((await call('POST', `/conversations/${CID}/schedules/s1/cancel`)).status).toBe(409);
  });
});
