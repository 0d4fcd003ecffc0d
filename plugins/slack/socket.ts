/**
 * Socket Mode (`@slack/socket-mode`, Slack's official client): events and
 * clicks arrive over a WebSocket the client opens with the app-level token,
 * so the bot needs no public URL. Each envelope is acknowledged after it was
 * handed to the host; when Redis is down it is not, and Slack delivers it
 * again. Slack spreads events over a bot's connections, so every host may
 * hold one.
 */
import { SocketModeClient } from '@slack/socket-mode';
import { InvalidInputError, type Logger, RedisUnavailableError } from 'steerbot/plugin';
import { slackLogger, toChannelApiError, webClientOptions } from './api.js';
import { slackEnvelopeSchema, slackInteractionTypeSchema } from './event-schema.js';
import type { Handled } from './inbound.js';

/** What the socket hands its envelopes to. */
export interface SocketHandlers {
  event(event: { type: string }): Promise<Handled>;
  interaction(payload: { type: string }): Promise<Handled>;
}

/** Options of `SlackSocket`. */
export interface SlackSocketOptions {
  appToken: string;
  apiUrl: string;
  logger: Logger;
  fetch?: typeof fetch;
}

interface Envelope {
  ack: (response?: Record<string, unknown>) => Promise<void>;
  type: string;
  body: unknown;
  retry_num?: number;
}

/** One Socket Mode connection, reconnected by the client when Slack recycles it. */
export class SlackSocket {
  private readonly client: SocketModeClient;
  private connected = false;
  /** The envelope being handled: envelopes are handed over one at a time, in the order Slack sent them (a user's quick messages keep their order). */
  private tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly o: SlackSocketOptions,
    private readonly handlers: SocketHandlers,
  ) {
    const { logger: _ignored, ...clientOptions } = webClientOptions(o.apiUrl, o.logger, o.fetch);
    this.client = new SocketModeClient({ appToken: o.appToken, logger: slackLogger(o.logger), clientOptions });
    this.client.on('connected', () => {
      this.connected = true;
    });
    this.client.on('disconnected', () => {
      this.connected = false;
    });
    this.client.on('reconnecting', () => {
      this.connected = false;
    });
    this.client.on('slack_event', (e: Envelope) => {
      // onEnvelope never rejects: the chain holds only the envelopes not yet handled.
      this.tail = this.tail.then(() => this.onEnvelope(e));
    });
  }

  /** Opens the connection; resolves once Slack said hello. Throws ChannelApiError when Slack refuses the app token. */
  async start(): Promise<void> {
    try {
      await this.client.start();
    } catch (err) {
      throw toChannelApiError(err, 'apps.connections.open', this.o.appToken);
    }
    this.connected = true;
  }

  /** Closes the connection (no reconnect). Does not throw. */
  async stop(): Promise<void> {
    this.connected = false;
    await this.client.disconnect().catch((err: unknown) => this.o.logger.debug({ err }, 'slack socket close failed'));
  }

  /** Readiness as `/readyz` reports it. */
  ready(): { ready: boolean; detail?: string } {
    return this.connected ? { ready: true } : { ready: false, detail: 'slack socket not connected' };
  }

  private async onEnvelope(e: Envelope): Promise<void> {
    const log = this.o.logger;
    try {
      if (e.type === 'events_api') {
        const body = slackEnvelopeSchema.safeParse(e.body);
        if (!body.success || body.data.type !== 'event_callback') throw new InvalidInputError('unreadable events_api envelope');
        await this.handlers.event(body.data.event);
      } else if (e.type === 'interactive') {
        const body = slackInteractionTypeSchema.safeParse(e.body);
        if (!body.success) throw new InvalidInputError('unreadable interactive envelope');
        await this.handlers.interaction(body.data);
      }
    } catch (err) {
      // Not acknowledged: Slack delivers the envelope again (events; a click shows the user an error).
      if (err instanceof RedisUnavailableError) return void log.warn({ err }, 'slack envelope not acknowledged: redis unavailable');
      // Bad input stays bad on a retry: acknowledge it.
      if (err instanceof InvalidInputError) log.warn({ err, type: e.type }, 'slack envelope rejected');
      else return void log.error({ err, type: e.type }, 'slack envelope failed; not acknowledged');
    }
    await e.ack().catch((err: unknown) => log.warn({ err }, 'could not acknowledge a slack envelope'));
  }
}
