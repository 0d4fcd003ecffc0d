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
 * Channel id `web`; conversation id `web:<browser id>` (a random id the
 * browser keeps in localStorage); update key `web:<browser id>:<message id>`.
 * Access: private by default — the operator's login (`deps.operatorAccess`,
 * the console's secret) or the chat's own `token` opens it (`checkAccess`);
 * `public: true` opens it to everyone, and the host's `access` section then
 * decides who may talk, as on any channel.
 */

import { type ChannelDeps, type ChannelHost, type ChannelPlugin, defineChannelPlugin, type InboundMessage } from 'steerbot/channel';
import {
  eventStream,
  json,
  pages,
  parseSection,
  type RouteRequest,
  type RouteResponse,
  readJsonBody,
  refuseMovedSettings,
  signedFileStore,
} from 'steerbot/plugin';
import { z } from 'zod';
import { type WebConfig, webConfigSchema } from './config.js';
import { WebEventStreams } from './events.js';
import { createWebOutbound, WEB_CHANNEL_ID } from './outbound.js';
import { CHAT_SCRIPT, CHAT_STYLES, chatPage } from './page.js';

/** Path prefix of the chat's assets and API. */
const BASE = '/chat';
/** A browser's conversation id and a message's id: URL-safe, no `:` (ids are joined with it). */
const BROWSER_ID_RE = /^[A-Za-z0-9_-]{8,64}$/;
const MESSAGE_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;

const messageBodySchema = z.strictObject({
  conversation: z.string().regex(BROWSER_ID_RE, { error: 'expected 8-64 characters of A-Z a-z 0-9 _ -' }),
  id: z.string().regex(MESSAGE_ID_RE, { error: 'expected 1-64 characters of A-Z a-z 0-9 _ -' }),
  text: z.string().refine((t) => t.trim() !== '', { error: 'text is empty' }),
});

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
  const streams = new WebEventStreams({ redis: deps.redis, prefix: deps.prefix, logger, historyEntries: cfg.historyEntries, maxClients: cfg.maxStreamClients });
  let host: ChannelHost | undefined;
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

  async function send(req: RouteRequest): Promise<RouteResponse> {
    const verdict = pages.checkAccess(req, access);
    if (!verdict.ok) return json(401, { error: verdict.error });
    if (!pages.sameOriginJson(req)) return json(403, { error: 'expected a same-origin JSON request' });
    const parsed = readJsonBody(req, messageBodySchema);
    if (!parsed.ok) return parsed.response;
    const body = parsed.value;
    const message: InboundMessage = {
      conversationId: `${WEB_CHANNEL_ID}:${body.conversation}`,
      updateKey: `${WEB_CHANNEL_ID}:${body.conversation}:${body.id}`,
      chatId: body.conversation,
      sender: { id: body.conversation, name: 'web user' },
      text: body.text,
      messageId: body.id,
    };
    const result = await host!.receive(WEB_CHANNEL_ID, message);
    switch (result.kind) {
      case 'ignored':
        return json(403, { error: `ignored: ${result.reason}` });
      case 'command':
        return json(200, { result: 'command', command: result.command, duplicate: result.duplicate });
      case 'ingested':
        return json(200, { result: result.result.kind, ...result.result });
    }
  }

  async function events(req: RouteRequest): Promise<RouteResponse> {
    const verdict = pages.checkAccess(req, access);
    if (!verdict.ok) return json(401, { error: verdict.error });
    const conversation = req.query.conversation ?? '';
    if (!BROWSER_ID_RE.test(conversation)) return json(400, { error: 'bad conversation id' });
    const place = streams.hold(req.signal);
    if (!place) return json(503, { error: 'too many open chat pages' });
    const last = req.headers['last-event-id'];
    const conversationId = `${WEB_CHANNEL_ID}:${conversation}`;
    let from: [string, string];
    try {
      from = await streams.cursors(conversationId, typeof last === 'string' ? last : undefined);
    } catch (err) {
      place.release();
      throw err;
    }
    return eventStream(streams.stream(place, conversationId, from, req.signal));
  }

  return {
    id: WEB_CHANNEL_ID,
    // The input policy is a profile's (bound to `web`). A public chat's visitors name themselves: no list can match them.
    settings: cfg.public ? { unverifiedSenders: true } : {},
    outbound: createWebOutbound({ config: cfg, redis: deps.redis, prefix: deps.prefix, files }),
    async start(h: ChannelHost) {
      host = h;
      h.routes.add({ method: 'GET', path: '/', handle: page });
      h.routes.add({ method: 'GET', path: BASE, handle: page });
      h.routes.add({ method: 'GET', path: `${BASE}/app.js`, handle: pages.assetRoute('text/javascript; charset=utf-8', CHAT_SCRIPT) });
      h.routes.add({ method: 'GET', path: `${BASE}/app.css`, handle: pages.assetRoute('text/css; charset=utf-8', CHAT_STYLES) });
      h.routes.add({ method: 'POST', path: `${BASE}/api/messages`, bodyLimitBytes: 256 * 1024, handle: send });
      h.routes.add({ method: 'GET', path: `${BASE}/api/events`, handle: events });
      h.routes.add(files.route());
      logger.info({ path: '/', access: accessSummary(cfg, access) }, 'web chat ready');
      if (access !== 'public' && (access as readonly pages.PageAccess[]).length === 0)
        logger.warn('the web chat is private and no login is configured: nobody can open it (set channels.web.token, or public: true)');
    },
    async stop() {
      streams.closeAll();
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
  ],
  defaultEnabled: true,
  create: (config, deps) => (config.enabled ? createWebPlugin(config, deps) : []),
});
