/**
 * The Discord gateway session of one channel plugin: the discord.js client,
 * the inbound queue that hands messages to the host, the catch-up cursors,
 * and the session state `/readyz` reports. Its state is declared here, as
 * fields, rather than shared by the plugin's callbacks.
 *
 * Each new gateway session (the first, and any after Discord refused a
 * resume) starts with a catch-up over REST; until it has handed the missed
 * messages over, gateway messages wait, so each conversation keeps its order.
 */
import { type ButtonInteraction, Client, Events, GatewayIntentBits, type Message, MessageFlags, Partials } from 'discord.js';
import type { Logger } from 'pino';
import type { ChannelDeps, ChannelHost, InboundMessage } from 'steerbot/channel';
import { redactSecrets } from 'steerbot/plugin';
import { CursorBuffer, cursorsKey, missedMessages } from './catch-up.js';
import type { DiscordConfig } from './config.js';
import { InboundQueue } from './inbound-queue.js';
import { normalizeMessage } from './normalize.js';
import { embedFlags, toChannelApiError } from './outbound.js';

/** Longest wait between two attempts to hand a message to the host, in ms. */
const MAX_INGEST_RETRY_DELAY_MS = 30_000;
/** How often the catch-up cursors are written, in ms. */
const CURSOR_FLUSH_MS = 1000;

/** The gateway session as `/readyz` reports it. */
type GatewayStatus = 'connecting' | 'ready' | 'reconnecting' | 'disconnected';

/** One started (or stopped) gateway session and what it holds. */
export class DiscordGateway {
  private client: Client | undefined;
  private queue: InboundQueue | undefined;
  private stopping = false;
  private status: GatewayStatus = 'connecting';
  /** Channels where this process dropped a message (backlog full): their cursor stays put until the next start catches up. */
  private readonly gaps = new Set<string>();
  private readonly cursors: CursorBuffer;
  private cursorTimer: NodeJS.Timeout | undefined;
  /** Gateway messages waiting for the session's catch-up; undefined once it handed them over. */
  private held: Message[] | undefined = [];
  private catchingUp = false;

  constructor(
    private readonly channelId: string,
    private readonly cfg: DiscordConfig,
    private readonly deps: ChannelDeps,
    private readonly logger: Logger,
  ) {
    this.cursors = new CursorBuffer({ redis: deps.redis, prefix: deps.prefix, logger, describe: (err) => this.describe(err) });
  }

  /** Logs in and waits for the gateway to be ready; a failed login leaves nothing running and throws ChannelApiError. */
  async start(host: ChannelHost): Promise<void> {
    this.gaps.clear(); // this start's catch-up reads from the cursors, gaps included
    if (this.client) throw new Error('discord: plugin already started');
    this.stopping = false;
    this.cursorTimer = setInterval(() => void this.cursors.flush(), CURSOR_FLUSH_MS);
    this.cursorTimer.unref();
    this.queue = new InboundQueue({
      retryable: (err) => (err as { code?: unknown } | null)?.code === 'REDIS_UNAVAILABLE',
      initialDelayMs: this.cfg.ingestRetryDelayMs,
      maxDelayMs: MAX_INGEST_RETRY_DELAY_MS,
      backlog: this.cfg.ingestRetryBacklog,
      logger: this.logger,
    });
    const c = new Client({
      intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.DirectMessages, GatewayIntentBits.MessageContent],
      // DM channels are not cached before their first message; without the partial, DMs are dropped.
      partials: [Partials.Channel],
      rest: { api: this.cfg.apiBase, ...(this.deps.fetch && { makeRequest: this.deps.fetch as never }) },
    });
    this.client = c;
    this.held = [];
    this.catchingUp = false;
    this.listen(c, host);
    // Not events.once: it rejects on any 'error' event, and a transient shard error must not fail start.
    const ready = new Promise<void>((resolve) => c.once(Events.ClientReady, () => resolve()));
    try {
      await c.login(this.cfg.token);
      await ready;
    } catch (err) {
      this.client = undefined;
      this.queue = undefined;
      clearInterval(this.cursorTimer);
      await c.destroy().catch(() => undefined);
      throw toChannelApiError('login', err, this.cfg.token);
    }
    this.logger.info({ botId: c.user?.id, guilds: c.guilds.cache.size }, 'discord: gateway ready');
  }

  /** Readiness as `/readyz` reports it. */
  ready(): { ready: boolean; detail?: string } {
    if (!this.client) return { ready: false, detail: 'gateway not started' };
    return this.status === 'ready' && this.client.isReady() ? { ready: true } : { ready: false, detail: `gateway ${this.status}` };
  }

  /** Closes the gateway, gives up on what still waits for the host (the next start catches up on it), flushes the cursors. */
  async stop(): Promise<void> {
    this.status = 'connecting';
    const c = this.client;
    const q = this.queue;
    this.stopping = true;
    this.client = undefined;
    this.queue = undefined;
    try {
      // Stop the gateway first so nothing new arrives, then give up on what still waits.
      await c?.destroy();
    } catch (err) {
      this.logger.warn({ error: redactSecrets(String(err), this.cfg.token) }, 'discord: error while closing the gateway');
    }
    const dropped = (await q?.close()) ?? 0;
    clearInterval(this.cursorTimer);
    this.cursorTimer = undefined;
    await this.cursors.flush();
    if (dropped > 0)
      this.logger.error(
        { dropped },
        'discord: inbound messages not handed to the host at shutdown (the next start catches up on them, within catchUpMaxAgeSeconds)',
      );
  }

  /** Subscribes to the client's events. */
  private listen(c: Client, host: ChannelHost): void {
    const { logger, cfg } = this;
    c.on(Events.Error, (err) => logger.error({ error: this.describe(err) }, 'discord: client error'));
    c.on(Events.Warn, (text) => logger.warn({ warning: redactSecrets(text, cfg.token) }, 'discord: client warning'));
    c.on(Events.ShardDisconnect, (ev, shard) => {
      this.status = 'disconnected';
      if (!this.stopping) logger.error({ shard, code: ev.code }, 'discord: gateway disconnected and will not reconnect');
    });
    c.on(Events.ShardReconnecting, (shard) => {
      this.status = 'reconnecting';
      if (!this.stopping) logger.info({ shard }, 'discord: gateway reconnecting');
    });
    c.on(Events.ShardResume, (shard, replayed) => {
      this.status = 'ready';
      logger.info({ shard, replayed }, 'discord: gateway session resumed');
    });
    c.on(Events.MessageCreate, (m) => {
      if (!c.user) return;
      if (this.held) this.held.push(m);
      else this.onMessage(host, c.user.id, m);
    });
    c.on(Events.InteractionCreate, (i) => {
      if (i.isButton()) void this.onButton(host, i);
    });
    c.on(Events.ShardReady, () => this.onSessionReady(c, host));
  }

  /** A new gateway session: catch up first, then let the held gateway messages through. */
  private onSessionReady(c: Client, host: ChannelHost): void {
    this.status = 'ready';
    if (this.catchingUp || !c.user || this.stopping) return;
    const botId = c.user.id;
    this.catchingUp = true;
    this.held ??= [];
    void this.catchUp(c, host, botId).finally(() => {
      // In one synchronous step: later gateway messages go straight through.
      const waiting = this.held ?? [];
      this.held = undefined;
      this.catchingUp = false;
      for (const m of waiting) this.onMessage(host, botId, m);
    });
  }

  private onMessage(host: ChannelHost, botId: string, m: Message): void {
    let decision: ReturnType<typeof normalizeMessage>;
    try {
      decision = normalizeMessage(m, this.channelId, botId, this.cfg);
    } catch (err) {
      this.logger.error({ err, messageId: m.id }, 'discord: could not read a gateway message; ignored');
      return;
    }
    if (decision.kind === 'skip') {
      this.logger.debug({ messageId: m.id, channelId: m.channelId, reason: decision.reason }, 'discord: message ignored');
      return;
    }
    const message = decision.message;
    const label = { updateKey: message.updateKey, conversationId: message.conversationId };
    const queued = this.queue?.push(message.conversationId, label, async () => {
      const result = await host.receive(this.channelId, message);
      this.logger.debug({ ...label, result: result.kind === 'ingested' ? result.result.kind : result.kind }, 'discord: message received');
      // The host has it (or a duplicate of it): catch-up after a restart starts after it, unless an
      // earlier message of the channel was dropped here (the cursor stays before it for catch-up). A message the
      // host ignored (a stranger the access rules refuse) moves no cursor: it would add one per stranger's channel.
      if (result.kind !== 'ignored' && !this.gaps.has(m.channelId)) this.cursors.note(m.channelId, m.id);
    });
    if (queued === false) this.gaps.add(m.channelId);
  }

  /**
   * A click on one of the bot's buttons: its custom id (a control command)
   * from the user who clicked. Answered within Discord's 3 s: the message
   * updated to the command's `edit` (buttons removed) when it changed
   * something, else an ephemeral reply only the clicker sees. Never throws.
   */
  private async onButton(host: ChannelHost, i: ButtonInteraction): Promise<void> {
    try {
      // The button is under one of the bot's messages: its channel is the conversation.
      const channelId = i.channelId ?? i.message.channelId;
      const name = i.user.globalName ?? i.user.username;
      const message: InboundMessage = {
        conversationId: `${this.channelId}:${channelId}`,
        updateKey: `${this.channelId}:interaction:${i.id}`,
        chatId: channelId,
        sender: { id: i.user.id, ...(name && { name: name.slice(0, 256) }) },
        text: i.customId,
        interaction: 'button',
        ...(i.guildId && { group: true }),
      };
      const result = await host.receive(this.channelId, message);
      // The answer holds what the model wrote (an option's label): it pings nobody and embeds no link unless `linkPreviews`.
      const quiet = { allowedMentions: { parse: [] }, ...embedFlags(this.cfg.linkPreviews) };
      if (result.kind === 'command' && result.edit) await i.update({ content: result.edit.slice(0, 2000), components: [], ...quiet });
      else
        await i.reply({
          content: (result.kind === 'command' && result.reply) || 'Not allowed here.',
          allowedMentions: quiet.allowedMentions,
          flags: MessageFlags.Ephemeral | (quiet.flags ?? 0),
        });
    } catch (err) {
      this.logger.warn({ error: this.describe(err), interaction: i.id }, 'discord: could not handle a button click');
    }
  }

  /** Hands the messages missed while no host was connected to the host; never throws. */
  private async catchUp(c: Client, host: ChannelHost, botId: string): Promise<void> {
    if (this.cfg.catchUpMaxAgeSeconds <= 0) return;
    try {
      await this.cursors.flush();
      const stored = await this.deps.redis.hgetall(cursorsKey(this.deps.prefix));
      const missed = await missedMessages(c, {
        cursors: stored,
        maxChannels: this.cfg.catchUpChannels,
        notBefore: Date.now() - this.cfg.catchUpMaxAgeSeconds * 1000,
        logger: this.logger,
        describe: (err) => this.describe(err),
      });
      if (missed.length > 0) this.logger.info({ messages: missed.length }, 'discord: catching up on messages sent while no host was connected');
      for (const m of missed) this.onMessage(host, botId, m);
    } catch (err) {
      this.logger.warn({ error: this.describe(err) }, 'discord: catch-up failed; messages sent while no host was connected may be missing');
    }
  }

  /** An error as a log-safe line: the bot token never reaches a log. */
  private describe(err: unknown): string {
    return err instanceof Error ? redactSecrets(`${err.name}: ${err.message}`, this.cfg.token) : redactSecrets(String(err), this.cfg.token);
  }
}
