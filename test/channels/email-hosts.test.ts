/**
 * Several hosts on one mailbox: one watches it at a time (a Redis lease), and
 * when it stops, another takes over from the stored cursor: each mail is
 * answered once, by whichever host held the lease.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { idPart } from '../../plugins/email/normalize.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type MailServers, startMailServers } from '../../testing/fakes/mail-servers.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { fakeModel, RunnerHarness, waitFor } from '../runner/harness.js';
import { emailPlugin, mailToBot, repliesIn, startEmailHost, startEmailSystem, untilReplies } from './email-harness.js';

let servers: MailServers;
let ai: FakeOpenAIServer;
let h: RunnerHarness;
const started: Array<{ plugin: ChannelPlugin; http: HttpServer }> = [];

beforeAll(async () => {
  servers = await startMailServers();
});

afterAll(async () => {
  await servers?.stop();
});

beforeEach(async () => {
  ai = await startFakeOpenAI();
  h = await RunnerHarness.start();
});

afterEach(async () => {
  for (const s of started.splice(0)) {
    await s.plugin.stop();
    await s.http.close();
  }
  await h.close();
  await ai.close();
});

describe('email with several hosts', () => {
  it('lets one host watch the mailbox; when it stops, a standby host takes over and nothing is answered twice', async () => {
    const first = await startEmailSystem({
      h,
      servers,
      agent: createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false } }),
      config: { pollLeaseMs: 1000 },
    });
    started.push(first);
    const standby = emailPlugin(h, servers, { pollLeaseMs: 1000 });
    started.push({ plugin: standby, http: await startEmailHost(h, servers, standby) });
    expect(standby.ready?.()).toEqual({ ready: true, detail: 'standing by (another host watches the mailbox)' });

    ai.script([{ text: 'From the first host.' }, { text: 'From the second host.' }]);
    const before = await mailToBot(servers, { text: 'first question' });
    await untilReplies(servers, before, 1);
    await h.idle(15_000, `email:${idPart(before)}`);

    await first.plugin.stop();
    await waitFor(() => standby.ready?.().detail === undefined, 10_000, 'the standby host watching');
    const after = await mailToBot(servers, { text: 'second question' });
    await untilReplies(servers, after, 1, 'the reply after the takeover');
    await h.idle(15_000, `email:${idPart(after)}`);
    expect(await repliesIn(servers, before)).toHaveLength(1);
    expect(await repliesIn(servers, after)).toHaveLength(1);
    expect(ai.requests).toHaveLength(2);
  });
});
