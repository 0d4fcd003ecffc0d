/**
 * The operator console's routes: the page (`/console`), its script and
 * stylesheet, and a JSON API under `/console/api/`. Every route checks
 * access first (`src/http/access.ts`: the operator's secret, configured or
 * generated at start; loopback clients without it only when the operator
 * turned `allowLoopback` on); a refused request gets 401 and no data.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import type { ChannelPlugin } from '../../src/channel.js';
import type { AccessConfig } from '../../src/config/schema.js';
import { Exporter } from '../../src/export/exporter.js';
import { checkAccess, operatorAccess, type PageAccess, sameOriginJson, servePage } from '../../src/http/access.js';
import { assetRoute } from '../../src/http/page-shell.js';
import { type HttpRoute, json, type RouteRegistry, type RouteRequest, type RouteResponse, readJsonBody } from '../../src/http/routes.js';
import type { Budgets } from '../../src/people/budget.js';
import type { Dispatch } from '../../src/protocol/dispatch.js';
import type { RunQueue } from '../../src/protocol/run-queue.js';
import type { InputPolicy } from '../../src/protocol/types.js';
import type { RedisClient } from '../../src/redis/connection.js';
import type { AccessStore } from '../access/store.js';
import type { ApiRoute, HostFeature } from '../feature.js';
import { hostPurge, type Purge } from '../purge.js';
import { registerAccessApi } from './access-api.js';
import { CONSOLE_ACTIONS, ConsoleActions } from './actions.js';
import { recentKey } from './activity.js';
import { registerExportApi } from './export-api.js';
import { CONSOLE_SCRIPT, CONSOLE_STYLES, consolePage, PEOPLE_SCRIPT } from './page.js';
import { registerPeopleApi } from './people-api.js';
import { ConsoleReads, FILTER_WINDOW } from './reads.js';

/** What the console needs from the host. */
export interface ConsoleOptions {
  routes: RouteRegistry;
  redis: RedisClient;
  prefix: string;
  dispatch: Dispatch;
  queue: RunQueue;
  logger: Logger;
  /** The secret the console requires: `host.console.token`, or the one generated at start. */
  token: string;
  /** Let loopback clients in without the token (`host.console.allowLoopback`). Default false. */
  allowLoopback?: boolean;
  /** Trace UI link template with `{traceId}`. */
  traceUrl: string | undefined;
  /** The configured policy of a conversation's channel. */
  channelPolicy(conversationId: string): InputPolicy | undefined;
  /** Enqueues a run an action created. */
  enqueue(conversationId: string, runId: string): Promise<void>;
  /** The host's channels (a conversation's channel, its `conversationProblems`). Default: none. */
  channels?: readonly ChannelPlugin[];
  /** Access (pairing codes, refusals, links): its API routes. Default: none. */
  access?: AccessStore;
  /** The `access` section's channel settings: the people panel shows each account's policy and whether it is listed. Default: none (every channel open). */
  accessChannels?: AccessConfig['channels'];
  /** The spending budgets: the people panel shows a person's usage against the identity limits. Default: none. */
  budgets?: Budgets;
  /** The host's features: their console routes and panels. Default: none. */
  features?: readonly HostFeature[];
  /** The host's purge (host/purge.ts). Default: the purge with the `features`' hooks. */
  purge?: Purge;
}

const BASE = '/console';
const intParam = (v: string | undefined, dflt: number, min: number, max: number) => {
  const n = v === undefined || v === '' ? dflt : Number(v);
  return Number.isInteger(n) ? Math.min(max, Math.max(min, n)) : dflt;
};
const actionSchema = z.strictObject({ action: z.enum(CONSOLE_ACTIONS), arg: z.string().max(128).optional() });

/** Registers the console's routes. */
export function registerConsole(o: ConsoleOptions): void {
  const access: PageAccess = operatorAccess(o.token, o.allowLoopback);
  const features = o.features ?? [];
  const reads = new ConsoleReads({ redis: o.redis, prefix: o.prefix, dispatch: o.dispatch, queue: o.queue, ...(o.channels && { channels: o.channels }) });
  const actions = new ConsoleActions({
    dispatch: o.dispatch,
    enqueue: o.enqueue,
    channelPolicy: o.channelPolicy,
    logger: o.logger.child({ part: 'console' }),
    purge: o.purge ?? hostPurge(o.dispatch.options, features),
  });

  /** An API route: refused requests get 401 before anything is read. */
  const api = (method: HttpRoute['method'], path: string, handle: (req: RouteRequest) => Promise<RouteResponse>) =>
    o.routes.add({
      method,
      path: `${BASE}/api${path}`,
      handle: async (req) => {
        const verdict = checkAccess(req, access);
        if (!verdict.ok) return json(401, { error: verdict.error });
        if (method !== 'GET' && !sameOriginJson(req)) return json(403, { error: 'expected a same-origin JSON request' });
        const res = await handle(req);
        return { ...res, headers: { 'cache-control': 'no-store', ...res.headers } };
      },
    });

  const panels = features.flatMap((f) => (f.console?.panel ? [f.console.panel] : []));
  for (const p of panels)
    if (!/^[a-z-]+$/.test(p.name) || p.name === 'app' || p.name === 'people') throw new Error(`console panel name ${p.name} is taken or not lower-case`);
  const html = consolePage(BASE, panels.map((p) => p.html(BASE)).join(''));
  o.routes.add({ method: 'GET', path: BASE, handle: async (req) => servePage(req, access, BASE, () => html) });
  o.routes.add({ method: 'GET', path: `${BASE}/app.js`, handle: assetRoute('text/javascript; charset=utf-8', CONSOLE_SCRIPT) });
  for (const p of panels) o.routes.add({ method: 'GET', path: `${BASE}/${p.name}.js`, handle: assetRoute('text/javascript; charset=utf-8', p.script) });
  o.routes.add({ method: 'GET', path: `${BASE}/people.js`, handle: assetRoute('text/javascript; charset=utf-8', PEOPLE_SCRIPT) });
  o.routes.add({ method: 'GET', path: `${BASE}/app.css`, handle: assetRoute('text/css; charset=utf-8', CONSOLE_STYLES) });

  registerConversationReads(api, o, reads);
  if (o.access) {
    registerAccessApi(api, o.access, o.channels ?? []);
    registerPeopleApi(api, { store: o.access, channels: o.accessChannels, budgets: o.budgets });
  }
  for (const f of features) f.console?.api?.(api);
  const parts = features.flatMap((f) => (f.export ? [f.export({ redis: o.redis, prefix: o.prefix })] : []));
  registerExportApi(api, new Exporter({ redis: o.redis, prefix: o.prefix, channels: (o.channels ?? []).map((c) => c.id), parts }));
  api('POST', '/conversations/:id/actions', async (req) => {
    const parsed = readJsonBody(req, actionSchema);
    if (!parsed.ok) return parsed.response;
    const outcome = await actions.run(req.params.id ?? '', parsed.value.action, parsed.value.arg);
    return json(outcome.ok ? 200 : 409, outcome);
  });
}

/** The conversations' list, one row, its entries and one run's detail. */
function registerConversationReads(api: ApiRoute, o: ConsoleOptions, reads: ConsoleReads): void {
  api('GET', '/conversations', async (req) => {
    const channel = req.query.channel || undefined;
    const stuck = req.query.stuck === '1' || req.query.stuck === 'true';
    const list = await reads.list({
      offset: intParam(req.query.offset, 0, 0, 100_000),
      limit: intParam(req.query.limit, 50, 1, 200),
      ...(channel && { channel }),
      stuck,
    });
    return json(200, { ...list, filterWindow: FILTER_WINDOW, queue: await reads.queueCounts(), now: Date.now() });
  });
  api('GET', '/queue', async () => json(200, await reads.queueCounts()));
  api('GET', '/conversations/:id', async (req) => {
    const id = req.params.id ?? '';
    const lastActivity = Number((await o.redis.zscore(recentKey(o.prefix), id)) ?? 0);
    return json(200, { row: await reads.row(id, lastActivity), now: Date.now() });
  });
  api('GET', '/conversations/:id/entries', async (req) => {
    const count = intParam(req.query.count, 50, 1, 500);
    const after = req.query.after === undefined ? undefined : intParam(req.query.after, 0, 0, Number.MAX_SAFE_INTEGER);
    const before = req.query.before === undefined ? undefined : intParam(req.query.before, 0, 0, Number.MAX_SAFE_INTEGER);
    const entries = await reads.entries(req.params.id ?? '', { count, ...(after !== undefined && { after }), ...(before !== undefined && { before }) });
    return json(200, { entries });
  });
  api('GET', '/conversations/:id/runs/:run', async (req) => {
    const detail = await reads.run(req.params.id ?? '', req.params.run ?? '');
    if (!detail) return json(404, { error: 'no such run (it may have expired)' });
    const traceLink = detail.traceId && o.traceUrl ? o.traceUrl.replace('{traceId}', detail.traceId) : undefined;
    return json(200, { ...detail, ...(traceLink && { traceLink }) });
  });
}
