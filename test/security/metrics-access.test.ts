/**
 * Who reads `/metrics`. The host serves it on the port the platforms'
 * webhooks (and so strangers) reach, and it names the operator's models,
 * tools, channels and traffic. With `http.metricsToken` set, a stranger's
 * request, with no token, a wrong one, or sent through a reverse proxy on the
 * same machine, gets 401 and none of it; Prometheus, sending the token, gets
 * the metrics.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type SteerbotConfig, startApp } from '../../app/index.js';
import { createHttpServer } from '../../host/http.js';
import { createLogger } from '../../src/logger.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { metrics } from '../../src/telemetry/metrics.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const TOKEN = 'metrics-token-0123456789abcdef';
const MODEL = 'operators-secret-model-name';

describe('/metrics with http.metricsToken', () => {
  let app: Awaited<ReturnType<typeof startApp>>;
  let prefix: string;
  let dir: string;

  beforeAll(async () => {
    prefix = testPrefix();
    dir = mkdtempSync(join(tmpdir(), 'steerbot-sec-metrics-'));
    const file = join(dir, 'steerbot.json');
    writeFileSync(file, JSON.stringify({ http: { host: '127.0.0.1' } }));
    const loaded = await loadConfig({ file, env: { REDIS_URL: redisUrl(), STEERBOT_PREFIX: prefix, STEERBOT_RUNNER: 'false', STEERBOT_METRICS_TOKEN: TOKEN } });
    const config: SteerbotConfig = { ...loaded, http: { ...loaded.http, port: 0 } };
    app = await startApp({ config, logger: createLogger({ level: 'silent' }), printLogin: () => undefined });
    // Something the metrics would tell a stranger: a model of the operator's.
    metrics.modelTokens.inc({ model: MODEL, kind: 'input' }, 1);
  });
  afterAll(async () => {
    await cleanupPrefix(app.ctx.redis, prefix).catch(() => undefined);
    await cleanupPrefix(app.ctx.redis, bullPrefixFor(prefix)).catch(() => undefined);
    await app?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a stranger (no token, a wrong one, the console’s way in, through a same-machine proxy) with 401, and the token’s bearer reads them', async () => {
    const url = `${app.address}/metrics`;
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: 'Bearer wrong-token-0123456789abcdef' },
      { authorization: `Basic ${Buffer.from(`prometheus:${TOKEN}`).toString('base64')}` },
      { authorization: `Bearer ${TOKEN.slice(0, -1)}` },
      { cookie: `steerbot_console=${TOKEN}` },
      { 'x-forwarded-for': '203.0.113.9' },
    ];
    for (const headers of attempts) {
      const res = await fetch(url, { headers });
      const body = await res.text();
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      expect(body).not.toContain('steerbot_');
      expect(body).not.toContain(MODEL);
    }
    const prometheus = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(prometheus.status).toBe(200);
    const text = await prometheus.text();
    expect(text).toContain(`steerbot_model_tokens_total{model="${MODEL}",kind="input"}`);
    // The refused scrapes are counted like any request: the operator sees them.
    expect(text).toMatch(/steerbot_http_requests_total\{method="GET",route="\/metrics",status="401"\} [1-9]/);
    // Health and readiness stay open to load balancers.
    expect((await fetch(`${app.address}/healthz`)).status).toBe(200);
    expect((await fetch(`${app.address}/readyz`)).status).toBe(200);
  });
});

describe('/metrics without http.metricsToken', () => {
  it('answers connections from loopback and private addresses only: a public one gets 403, whatever headers it sends', async () => {
    const redis = new Redis(redisUrl());
    const config = { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 2048, requestTimeoutMs: 60_000 } };
    const http = createHttpServer({ config, redis, logger: createLogger({ level: 'silent' }) });
    metrics.modelTokens.inc({ model: MODEL, kind: 'input' }, 1);
    try {
      for (const remoteAddress of [
        '8.8.8.8',
        '2606:4700:4700::1111',
        '::ffff:1.1.1.1',
        '64:ff9b::808:808',
        '2001:0:4136:e378::1',
        '2002:808:808::1',
        '100.64.0.9',
      ]) {
        const res = await http.inject({ method: 'GET', url: '/metrics', remoteAddress, headers: { 'x-forwarded-for': '127.0.0.1' } });
        expect(res.statusCode, remoteAddress).toBe(403);
        expect(res.body).not.toContain(MODEL);
      }
      for (const remoteAddress of ['127.0.0.1', '::1', '::ffff:127.0.0.1', '10.1.2.3', '172.18.0.5', '192.168.1.20', 'fd00::5', 'fe80::1']) {
        const res = await http.inject({ method: 'GET', url: '/metrics', remoteAddress });
        expect(res.statusCode, remoteAddress).toBe(200);
        expect(res.body).toContain(MODEL);
      }
    } finally {
      await http.close();
      await redis.quit();
    }
  });
});
