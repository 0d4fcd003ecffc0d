/**
 * The whole system around the real Feishu plugin for end-to-end tests
 * (`startFeishuSystem`; with the fakes and the local agent, fresh for a test:
 * `startFeishuAgentWorld`), and the platform's message resources the fake
 * open platform does not serve (`feishuResources`).
 */
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createFeishuPlugin, type FeishuConfigInput } from '../../plugins/feishu/channel.js';
import { createLocalAgentPlugin, type LocalAgentConfig } from '../../plugins/local-agent/index.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { FEISHU_TEST } from '../../testing/fakes/feishu-events.js';
import { type FakeFeishu, startFakeFeishu } from '../../testing/fakes/feishu-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';
import { hostChannel, runnerFor } from './system.js';

/** What `startFeishuSystem` started: stop `plugin`, then close `http`, when done. */
export interface FeishuSystem {
  http: HttpServer;
  plugin: ChannelPlugin;
  /** The callback route's URL (http mode). */
  url: string;
}

/** Starts the host with the real Feishu plugin pointed at `feishu`, and a runner with `agent` delivering through it. */
export async function startFeishuSystem(o: {
  h: RunnerHarness;
  feishu: FakeFeishu;
  agent: RunnerPlugin;
  config?: Partial<FeishuConfigInput>;
  fetch?: typeof fetch;
}): Promise<FeishuSystem> {
  const { h } = o;
  const { logger, redis } = h.ctx;
  const http = createHttpServer({ config: h.ctx.config, redis, logger });
  const plugin = createFeishuPlugin(
    { ...FEISHU_TEST, domain: o.feishu.url, ...o.config },
    { logger, redis, prefix: h.prefix, ...(o.fetch && { fetch: o.fetch }) },
  );
  await hostChannel(h, http, plugin);
  const address = await listen(http, { host: '127.0.0.1', port: 0 });
  await runnerFor(h, o.agent, plugin);
  return { http, plugin, url: `${address}${o.config?.webhookPath ?? '/feishu/events'}` };
}

/** A test's fakes (model, open platform, resources) and harness, and the system `boot` starts on them. */
export interface FeishuAgentWorld {
  ai: FakeOpenAIServer;
  feishu: FakeFeishu;
  resources: FeishuResources;
  h: RunnerHarness;
  /** Starts the channel and a runner with the local agent (`extra`: its config); resolves once the long connection is up. */
  boot(extra?: Partial<LocalAgentConfig>): Promise<FeishuSystem>;
  /** Stops what `boot` started, then the harness and the fakes. */
  close(): Promise<void>;
}

/** Fresh fakes and a harness for one test (`beforeEach`), closed by `close` (`afterEach`). */
export async function startFeishuAgentWorld(): Promise<FeishuAgentWorld> {
  const ai = await startFakeOpenAI();
  const feishu = await startFakeFeishu();
  const resources = feishuResources(feishu);
  const h = await RunnerHarness.start();
  let system: FeishuSystem | undefined;
  return {
    ai,
    feishu,
    resources,
    h,
    async boot(extra = {}) {
      const agent = createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false }, maxRetries: 0, ...extra });
      system = await startFeishuSystem({ h, feishu, agent, fetch: resources.fetch });
      await feishu.connected();
      return system;
    },
    async close() {
      await system?.plugin.stop();
      await system?.http.close();
      await h.close();
      await feishu.close();
      await ai.close();
    },
  };
}

/** A file a person sent, as the platform serves it. */
export interface FeishuResource {
  data: Buffer;
  contentType: string;
  /** Send `content-length` (default true); false streams the body without one. */
  declareLength?: boolean;
}

/** One request of a message's resource: what was asked, and the status answered. */
export interface FeishuResourceRequest {
  messageId: string;
  key: string;
  type: string | null;
  status: number;
}

/**
 * The open platform's message resources (`GET /open-apis/im/v1/messages/
 * :message_id/resources/:file_key?type=image|file`, the bytes of a file a
 * person sent), served at the plugin's fetch seam in front of the fake open
 * platform, which does not serve them: `fetch` hands every other request to
 * the fake, reads the tenant access token it issues, and answers a resource
 * request only with that token (401 otherwise), with the bytes and their
 * type, or 400 with code 234003 for a resource it does not have.
 */
export interface FeishuResources {
  /** Give this as `startFeishuSystem`'s `fetch`. */
  fetch: typeof fetch;
  /** Serves `resource` as `key` of message `messageId`, for a request of `type`. */
  add(messageId: string, type: 'image' | 'file', key: string, resource: FeishuResource): void;
  /** Resource requests, in order. */
  requests: FeishuResourceRequest[];
  /** The next resource request fails with `status` and the platform's `code`. */
  failNext(status: number, code: number): void;
}

/** A body sent in 1 KiB parts, so a reader can stop past its limit. */
function inParts(data: Buffer): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (let at = 0; at < data.length; at += 1024) controller.enqueue(new Uint8Array(data.subarray(at, at + 1024)));
      controller.close();
    },
  });
}

/** Message resources in front of `feishu` (see `FeishuResources`). */
export function feishuResources(feishu: FakeFeishu): FeishuResources {
  const served = new Map<string, FeishuResource>();
  const failures: Array<{ status: number; code: number }> = [];
  const requests: FeishuResourceRequest[] = [];
  const issued = new Set<string>();
  const refusal = (status: number, code: number, msg: string) => Response.json({ code, msg }, { status });

  /** The answer to a resource request. */
  function serve(messageId: string, key: string, type: string | null, authorization: string | null): Response {
    if (authorization === null || !issued.has(authorization)) return refusal(401, 99991663, 'Invalid access token for authorization');
    const resource = served.get(`${messageId}/${type}/${key}`);
    const failure = failures.shift();
    if (failure) return refusal(failure.status, failure.code, 'scripted failure');
    if (!resource) return refusal(400, 234003, 'File not in msg.');
    const length = resource.declareLength === false ? {} : { 'content-length': String(resource.data.length) };
    return new Response(inParts(resource.data), { headers: { 'content-type': resource.contentType, ...length } });
  }

  const resourceFetch: typeof fetch = async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const m = /^\/open-apis\/im\/v1\/messages\/([^/]+)\/resources\/([^/]+)$/.exec(url.pathname);
    if (url.href.startsWith(feishu.url) && m && (init?.method ?? 'GET') === 'GET') {
      const [messageId, key, type] = [decodeURIComponent(m[1]!), decodeURIComponent(m[2]!), url.searchParams.get('type')];
      const res = serve(messageId, key, type, new Headers(init?.headers).get('authorization'));
      requests.push({ messageId, key, type, status: res.status });
      return res;
    }
    const res = await fetch(input, init);
    if (url.pathname === '/open-apis/auth/v3/tenant_access_token/internal' && res.ok) {
      const token = ((await res.clone().json()) as { tenant_access_token?: string }).tenant_access_token;
      if (token) issued.add(`Bearer ${token}`);
    }
    return res;
  };
  return {
    fetch: resourceFetch,
    add: (messageId, type, key, resource) => served.set(`${messageId}/${type}/${key}`, resource),
    requests,
    failNext: (status, code) => failures.push({ status, code }),
  };
}
