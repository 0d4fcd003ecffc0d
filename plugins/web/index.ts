/**
 * The web chat: a page at `/` (and `/chat`) where a person talks to the bot
 * through the same ingest path as every other channel (`ChannelHost.receive`:
 * dedupe, dispatch, control commands). The page shows how each message was
 * dispatched (new run / steered / queued / interrupting), the answer as it
 * streams, typing, tool calls and runs as the record grows, and command
 * replies. Replies reach it as server-sent events from a per-conversation
 * Redis stream, so the runner that writes them and the host that serves the
 * page may be different processes.
 *
 * Channel id `web`; conversation id `web:<public id>`, sender and chat id
 * `<public id>`, update key `web:<public id>:<message id>`. The browser keeps
 * a random secret in localStorage and presents it on every request (never in
 * a URL); the public id is derived from it and does not lead back to it
 * (`visitor-id.ts`, which also keeps conversations started before public ids).
 * Access: private by default — the operator's login (`deps.operatorAccess`,
 * the console's secret) or the chat's own `token` opens it (`checkAccess`);
 * `public: true` opens it to everyone, and the host's `access` section then
 * decides who may talk, as on any channel. The page's API, with its
 * per-client limits, is `api.ts`.
 */

import { type ChannelDeps, type ChannelHost, type ChannelPlugin, defineChannelPlugin } from 'steerbot/channel';
import { json, pages, parseSection, type RouteRequest, type RouteResponse, refuseMovedSettings, signedFileStore } from 'steerbot/plugin';
import { ChatApi, CONVERSATION_HEADER } from './api.js';
import { type WebConfig, webConfigSchema } from './config.js';
import { VISITOR_KEY } from './new-conversations.js';
import { createWebOutbound, WEB_CHANNEL_ID } from './outbound.js';
import { CHAT_SCRIPT, CHAT_STYLES, chatPage } from './page.js';

/** Path prefix of the chat's assets and API. */
const BASE = '/chat';

/** Who may chat: everyone (public), else the operator's login and the chat's own token. */
function chatGuard(cfg: WebConfig, operator: pages.PageAccess | undefined): pages.PageGuard {
  if (cfg.public) return 'public';
  const own: pages.PageAccess[] = cfg.token === undefined ? [] : [{ token: cfg.token, cookie: 'steerbot_web', cookiePath: '/' }];
  return [...(operator ? [operator] : []), ...own];
}

/** How the chat is protected, for the start log line (never a secret). */
function accessSummary(cfg: WebConfig, guard: pages.PageGuard): string {
  if (guard === 'public') return 'public (the access section decides who may talk)';
  return cfg.token === undefined ? "private: the operator's login" : "private: the operator's login or the chat token";
}

function parseConfig(config: unknown): WebConfig {
  return parseSection(webConfigSchema, config, ['channels', WEB_CHANNEL_ID]);
}

/** Creates the web chat channel. `config` is validated here (defaults applied); throws ConfigError naming every bad field. */
export function createWebPlugin(config: unknown, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(config);
  refuseMovedSettings(cfg, ['channels', WEB_CHANNEL_ID], { policy: 'profiles.<name>.inputPolicy bound to web' });
  const logger = deps.logger.child({ channel: WEB_CHANNEL_ID });
  const access = chatGuard(cfg, deps.operatorAccess);
  const api = new ChatApi({ config: cfg, access, redis: deps.redis, prefix: deps.prefix, logger });
  // Files the agent sends: kept for the page at signed, same-origin URLs that also need the chat's login.
  const files = signedFileStore({
    redis: deps.redis,
    prefix: deps.prefix,
    path: `${BASE}/files`,
    ttlSeconds: cfg.fileTtlSeconds,
    guard: (req) => {
      const verdict = pages.checkAccess(req, access);
      return verdict.ok ? undefined : json(401, { error: verdict.error });
    },
  });

  const html = chatPage(BASE);
  /** The page: `?token=` (right) stores the token in a cookie and reloads without it in the URL. */
  const page = async (req: RouteRequest): Promise<RouteResponse> => pages.servePage(req, access, req.path, () => html);

  return {
    id: WEB_CHANNEL_ID,
    // The input policy is a profile's (bound to `web`). A public chat's visitors name themselves: no list can match them.
    settings: cfg.public ? { unverifiedSenders: true } : {},
    outbound: createWebOutbound({ config: cfg, redis: deps.redis, prefix: deps.prefix, files }),
    async start(h: ChannelHost) {
      api.host = h;
      h.routes.add({ method: 'GET', path: '/', handle: page });
      h.routes.add({ method: 'GET', path: BASE, handle: page });
      h.routes.add({ method: 'GET', path: `${BASE}/app.js`, handle: pages.assetRoute('text/javascript; charset=utf-8', CHAT_SCRIPT) });
      h.routes.add({ method: 'GET', path: `${BASE}/app.css`, handle: pages.assetRoute('text/css; charset=utf-8', CHAT_STYLES) });
      h.routes.add({ method: 'POST', path: `${BASE}/api/messages`, bodyLimitBytes: 256 * 1024, handle: api.send });
      h.routes.add({ method: 'GET', path: `${BASE}/api/events`, handle: api.events });
      h.routes.add(files.route());
      logger.info({ path: '/', access: accessSummary(cfg, access) }, 'web chat ready');
      if (access !== 'public' && (access as readonly pages.PageAccess[]).length === 0)
        logger.warn('the web chat is private and no login is configured: nobody can open it (set channels.web.token, or public: true)');
    },
    async stop() {
      api.streams.closeAll();
    },
  };
}

/** The web chat (`channels.web`): on by default; `STEERBOT_WEB=false` turns it off. */
export default defineChannelPlugin({
  id: WEB_CHANNEL_ID,
  kind: 'channel',
  description: 'A chat page served by the host at / (on by default): talk to the bot from a browser.',
  configSchema: webConfigSchema,
  env: [
    { env: 'STEERBOT_WEB', path: 'enabled', kind: 'bool', enables: true },
    { env: 'STEERBOT_WEB_PUBLIC', path: 'public', kind: 'bool', enables: true },
    { env: 'STEERBOT_WEB_TOKEN', path: 'token', kind: 'string', secret: true, enables: true },
    { env: 'STEERBOT_WEB_TRUSTED_PROXIES', path: 'trustedProxies', kind: 'list' },
  ],
  storage: { conversationKeys: [VISITOR_KEY] },
  // The header carries the visitor's secret: censored wherever request headers are logged.
  redact: { headers: [CONVERSATION_HEADER] },
  defaultEnabled: true,
  create: (config, deps) => (config.enabled ? createWebPlugin(config, deps) : []),
});
