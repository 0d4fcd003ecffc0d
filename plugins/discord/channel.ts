/**
 * The Discord channel's implementation: a discord.js gateway client on the inbound side, REST
 * calls on the outbound side.
 *
 * Inbound answers DMs, guild messages that mention the bot (or reply to it),
 * every message in `alwaysChannels`, and threads as their own conversations.
 * Update identity is the message id, so a MESSAGE_CREATE replayed after a
 * gateway resume is a duplicate the host's dedupe drops. Messages that never
 * came over the gateway (no host connected, or a session Discord would not
 * resume) are read back over REST at each new session (`catch-up.ts`).
 */
import { type ButtonInteraction, Client, Events, GatewayIntentBits, type Message, MessageFlags, Partials } from 'discord.js';
import type { ChannelDeps, ChannelHost, ChannelPlugin, InboundMessage } from '../../src/channel.js';
import { parseSection } from '../../src/config-section.js';
import { redactSecrets } from '../../src/errors.js';
import { CursorBuffer, cursorsKey, missedMessages } from './catch-up.js';
import { type DiscordConfig, type DiscordConfigInput, discordConfigSchema } from './config.js';
import { InboundQueue } from './inbound-queue.js';
import { normalizeMessage } from './normalize.js';
import { createDiscordOutbound, createRest, toChannelApiError } from './outbound.js';

export type { DiscordConfigInput } from './config.js';

/** Channel id of the Discord channel (the prefix of its conversation ids). */
const CHANNEL_ID = 'discord';
/** Longest wait between two attempts to hand a message to the host, in ms. */
const MAX_INGEST_RETRY_DELAY_MS = 30_000;
/** How often the catch-up cursors are written, in ms. */
const CURSOR_FLUSH_MS = 1000;

/**
 * Creates the Discord channel plugin. `config` is validated (defaults
 * applied); a bad one throws ConfigError naming `channels.discord.<field>`.
 */
export function createDiscordPlugin(config: DiscordConfigInput, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(config);
  const logger = deps.logger.child({ channel: CHANNEL_ID });
  const outbound = createDiscordOutbound(CHANNEL_ID, cfg, createRest(cfg, deps.fetch));
  let client: Client | undefined;
  let queue: InboundQueue | undefined;
  let stopping = false;
  /** The gateway session as `/readyz` reports it. */
  let gateway: 'connecting' | 'ready' | 'reconnecting' | 'disconnected' = 'connecting';
  /** Channels where this process dropped a message (backlog full): their cursor stays put until the next start catches up. */
  const gaps = new Set<string>();
  const describe = (err: unknown) => (err instanceof Error ? redactSecrets(`${err.name}: ${err.message}`, cfg.token) : redactSecrets(String(err), cfg.token));
  const cursors = new CursorBuffer({ redis: deps.redis, prefix: deps.prefix, logger, describe });
  let cursorTimer: NodeJS.Timeout | undefined;

  const onMessage = (host: ChannelHost, botId: string, m: Message): void => {
    let decision: ReturnType<typeof normalizeMessage>;
    try {
      decision = normalizeMessage(m, CHANNEL_ID, botId, cfg);
    } catch (err) {
      logger.error({ err, messageId: m.id }, 'discord: could not read a gateway message; ignored');
      return;
    }
    if (decision.kind === 'skip') {
      logger.debug({ messageId: m.id, channelId: m.channelId, reason: decision.reason }, 'discord: message ignored');
      return;
    }
    const message = decision.message;
    const label = { updateKey: message.updateKey, conversationId: message.conversationId };
    const queued = queue?.push(message.conversationId, label, async () => {
      const result = await host.receive(CHANNEL_ID, message);
      logger.debug({ ...label, result: result.kind === 'ingested' ? result.result.kind : result.kind }, 'discord: message received');
      // The host has it (or a duplicate of it): catch-up after a restart starts after it, unless an
      // earlier message of the channel was dropped here (the cursor stays before it for catch-up).
      if (!gaps.has(m.channelId)) cursors.note(m.channelId, m.id);
    });
    if (queued === false) gaps.add(m.channelId);
  };

  /**
   * A click on one of the bot's buttons: its custom id (a control command)
   * from the user who clicked. Answered within Discord's 3 s: the message
   * updated to the command's `edit` (buttons removed) when it changed
   * something, else an ephemeral reply only the clicker sees. Never throws.
   */
  const onButton = async (host: ChannelHost, i: ButtonInteraction): Promise<void> => {
    try {
      // The button is under one of the bot's messages: its channel is the conversation.
      const channelId = i.channelId ?? i.message.channelId;
      const message: InboundMessage = {
        conversationId: `${CHANNEL_ID}:${channelId}`,
        updateKey: `${CHANNEL_ID}:interaction:${i.id}`,
        chatId: channelId,
        sender: { id: i.user.id, ...((i.user.globalName ?? i.user.username) && { name: (i.user.globalName ?? i.user.username).slice(0, 256) }) },
        text: i.customId,
        interaction: 'button',
        ...(i.guildId && { group: true }),
      };
      const result = await host.receive(CHANNEL_ID, message);
      if (result.kind === 'command' && result.edit) await i.update({ content: result.edit.slice(0, 2000), components: [] });
      else await i.reply({ content: (result.kind === 'command' && result.reply) || 'Not allowed here.', flags: MessageFlags.Ephemeral });
    } catch (err) {
      logger.warn({ error: describe(err), interaction: i.id }, 'discord: could not handle a button click');
    }
  };

  /** Hands the messages missed while no host was connected to the host; never throws. */
  const catchUp = async (c: Client, host: ChannelHost, botId: string): Promise<void> => {
    try {
      if (cfg.catchUpMaxAgeSeconds > 0) {
        await cursors.flush();
        const stored = await deps.redis.hgetall(cursorsKey(deps.prefix));
        const missed = await missedMessages(c, {
          cursors: stored,
          maxChannels: cfg.catchUpChannels,
          notBefore: Date.now() - cfg.catchUpMaxAgeSeconds * 1000,
          logger,
          describe,
        });
        if (missed.length > 0) logger.info({ messages: missed.length }, 'discord: catching up on messages sent while no host was connected');
        for (const m of missed) onMessage(host, botId, m);
      }
    } catch (err) {
      logger.warn({ error: describe(err) }, 'discord: catch-up failed; messages sent while no host was connected may be missing');
    }
  };

  return {
    id: CHANNEL_ID,
    settings: { ...(cfg.policy && { policy: cfg.policy }), allowedUsers: cfg.allowedUsers, allowedChats: cfg.allowedChats, admins: cfg.admins },
    outbound,

    async start(host: ChannelHost): Promise<void> {
      gaps.clear(); // this start's catch-up reads from the cursors, gaps included
      if (client) throw new Error('discord: plugin already started');
      stopping = false;
      cursorTimer = setInterval(() => void cursors.flush(), CURSOR_FLUSH_MS);
      cursorTimer.unref();
      queue = new InboundQueue({
        retryable: (err) => (err as { code?: unknown } | null)?.code === 'REDIS_UNAVAILABLE',
        initialDelayMs: cfg.ingestRetryDelayMs,
        maxDelayMs: MAX_INGEST_RETRY_DELAY_MS,
        backlog: cfg.ingestRetryBacklog,
        logger,
      });
      const c = new Client({
        intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.DirectMessages, GatewayIntentBits.MessageContent],
        // DM channels are not cached before their first message; without the partial, DMs are dropped.
        partials: [Partials.Channel],
        rest: { api: cfg.apiBase, ...(deps.fetch && { makeRequest: deps.fetch as never }) },
      });
      client = c;
      c.on(Events.Error, (err) => logger.error({ error: describe(err) }, 'discord: client error'));
      c.on(Events.Warn, (text) => logger.warn({ warning: redactSecrets(text, cfg.token) }, 'discord: client warning'));
      c.on(Events.ShardDisconnect, (ev, shard) => {
        gateway = 'disconnected';
        if (!stopping) logger.error({ shard, code: ev.code }, 'discord: gateway disconnected and will not reconnect');
      });
      c.on(Events.ShardReconnecting, (shard) => {
        gateway = 'reconnecting';
        if (!stopping) logger.info({ shard }, 'discord: gateway reconnecting');
      });
      c.on(Events.ShardResume, (shard, replayed) => {
        gateway = 'ready';
        logger.info({ shard, replayed }, 'discord: gateway session resumed');
      });
      // Each new gateway session (the first, and any after Discord refused a resume) starts with a
      // catch-up; until it has handed the missed messages over, gateway messages wait, so each
      // conversation keeps its order.
      let held: Message[] | undefined = [];
      let catchingUp = false;
      c.on(Events.MessageCreate, (m) => {
        if (!c.user) return;
        if (held) held.push(m);
        else onMessage(host, c.user.id, m);
      });
      c.on(Events.InteractionCreate, (i) => {
        if (i.isButton()) void onButton(host, i);
      });
      c.on(Events.ShardReady, () => {
        gateway = 'ready';
        if (catchingUp || !c.user || stopping) return;
        const botId = c.user.id;
        catchingUp = true;
        held ??= [];
        void catchUp(c, host, botId).finally(() => {
          // In one synchronous step: later gateway messages go straight through.
          const waiting = held ?? [];
          held = undefined;
          catchingUp = false;
          for (const m of waiting) onMessage(host, botId, m);
        });
      });
      // Not events.once: it rejects on any 'error' event, and a transient shard error must not fail start.
      const ready = new Promise<void>((resolve) => c.once(Events.ClientReady, () => resolve()));
      try {
        await c.login(cfg.token);
        await ready;
      } catch (err) {
        client = undefined;
        queue = undefined;
        clearInterval(cursorTimer);
        await c.destroy().catch(() => undefined);
        throw toChannelApiError('login', err, cfg.token);
      }
      logger.info({ botId: c.user?.id, guilds: c.guilds.cache.size }, 'discord: gateway ready');
    },

    ready() {
      if (!client) return { ready: false, detail: 'gateway not started' };
      return gateway === 'ready' && client.isReady() ? { ready: true } : { ready: false, detail: `gateway ${gateway}` };
    },

    async stop(): Promise<void> {
      gateway = 'connecting';
      const c = client;
      const q = queue;
      stopping = true;
      client = undefined;
      queue = undefined;
      try {
        // Stop the gateway first so nothing new arrives, then give up on what still waits.
        await c?.destroy();
      } catch (err) {
        logger.warn({ error: redactSecrets(String(err), cfg.token) }, 'discord: error while closing the gateway');
      }
      const dropped = (await q?.close()) ?? 0;
      clearInterval(cursorTimer);
      cursorTimer = undefined;
      await cursors.flush();
      if (dropped > 0)
        logger.error(
          { dropped },
          'discord: inbound messages not handed to the host at shutdown (the next start catches up on them, within catchUpMaxAgeSeconds)',
        );
    },
  };
}

function parseConfig(config: DiscordConfigInput): DiscordConfig {
  return parseSection(discordConfigSchema, config, ['channels', 'discord']);
}
