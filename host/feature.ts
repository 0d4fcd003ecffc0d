/**
 * A feature's part of the host: its control commands and the steps it adds
 * to `ChannelHost.receive` (host/receive.ts), in the order the pipeline
 * asks: `profile` for the input policy, `admit` (the host's own access step
 * is always first), `commands` dispatched from the union of every feature's
 * table, `recorded` after a person's message or command was recorded,
 * `purging` around every purge of a conversation, `status` lines of `/status`; and its console
 * routes and part of exports. The composition registers features
 * (app/features/).
 */

import type { AppContext } from '../src/app-context.js';
import type { ChannelSettings, InboundMessage, ReceiveResult } from '../src/channel.js';
import type { CoreConfig } from '../src/config/load.js';
import type { ExportKit, ExportPart } from '../src/export/part.js';
import type { RouteRequest, RouteResponse } from '../src/http/routes.js';
import type { Logger } from '../src/logger.js';
import type { IdentityStore } from '../src/people/identity.js';
import type { AgentProfile } from '../src/people/profiles.js';
import type { InputPolicy } from '../src/protocol/types.js';
import type { RedisClient } from '../src/scripts/index.js';
import type { CommandTable } from './commands/table.js';
import type { Purge } from './purge.js';

/** What a feature's host part is made from: the host's services, made once per host. */
export interface HostFeatureKit {
  config: CoreConfig;
  logger: Logger;
  /** The ingress connection: fails fast while Redis is down (the platform redelivers). */
  redis: RedisClient;
  prefix: string;
  /** Who is who across channels; purging and linking a person tell its hooks (`onChange`). */
  identities: IdentityStore;
  /** The ids of the host's channels. */
  channelIds: readonly string[];
  /** Opens a connection of the feature's own (a BullMQ queue's); the feature closes it in its `close`. */
  connectRedis: AppContext['connectRedis'];
  /**
   * The host's one purge (host/purge.ts), with every feature's hooks: for a feature that purges
   * other conversations with one (subagents' children). Callable once the host started.
   */
  purge: Purge;
}

/** A message or command the host recorded from a person. */
export interface RecordedInput {
  channelId: string;
  conversationId: string;
  senderId: string;
  /** The control command, for a command (`purge`: the conversation it was sent in is gone). */
  command?: string;
  /** False for a platform's redelivery of a message recorded before. */
  fresh: boolean;
}

/** What `HostFeature.admit` is asked with. */
export interface AdmitRequest {
  channelId: string;
  settings: ChannelSettings;
  message: InboundMessage;
  /** Sends a text to a conversation; never throws. */
  reply(channelId: string, conversationId: string, text: string, replyTo: string | undefined): Promise<void>;
  /** Marks the update seen for `ttlSeconds` (default and most: the dedupe window); false for a redelivery. */
  firstDelivery(message: InboundMessage, ttlSeconds?: number): Promise<boolean>;
  /** Keeps an update `firstDelivery` marked for less than the dedupe window marked for the whole of it, from now. */
  keepDelivery(message: InboundMessage): Promise<void>;
}

/** Registers one console API route under `/console/api` (access-checked, a POST same-origin JSON only). */
export type ApiRoute = (method: 'GET' | 'POST', path: string, handle: (req: RouteRequest) => Promise<RouteResponse>) => void;

/** What a feature adds to the operator console (host/console/). */
export interface ConsolePart {
  /** Registers its API routes. */
  api?(route: ApiRoute): void;
  /** A panel: its markup, added to the page, and its browser script, served at `<console>/<name>.js`. */
  panel?: { name: string; html(base: string): string; script: string };
}

/** One feature's host part. Every member is optional: a feature has the parts it needs. */
export interface HostFeature {
  /** Unique among the host's features (logs). */
  readonly name: string;
  /** Its control commands; a name another feature already has is a startup error. */
  readonly commands?: CommandTable;
  /** Before commands and ingest: the receive's answer when the message goes no further (refused, a `/pair`), else undefined. */
  admit?(req: AdmitRequest): Promise<ReceiveResult | undefined>;
  /** The agent profile a sender's runs use in a conversation: its input policy wins over the channel's. First answer wins. */
  profile?(channelId: string, conversationId: string, senderId: string): Promise<AgentProfile | undefined>;
  /** A conversation's input policy outside a message (the messages API, the console). First answer wins. */
  inputPolicy?(conversationId: string): InputPolicy | undefined;
  /** After a person's message or command was recorded. A throw fails the receive (503: the platform redelivers). */
  recorded?(input: RecordedInput): Promise<void>;
  /**
   * Before a conversation is purged, on every path (`/purge`, the console, `RunningApp.purge`, a parent's
   * purge of its children; host/purge.ts): what to do once it is deleted (read now, while it still exists).
   * What it returns runs when the purge took effect, or found the conversation purged before (must be safe to repeat).
   */
  purging?(conversationId: string): Promise<() => Promise<void>>;
  /** Lines `/status` adds for a conversation of `channelId`; a failure leaves them out. */
  status?(channelId: string, conversationId: string): Promise<string[]>;
  /** Its routes and panel in the operator console, when the console is on. */
  readonly console?: ConsolePart;
  /** Makes its part of exports (the console's downloads) on the console's connection. */
  export?(kit: ExportKit): ExportPart;
  /** When the host stops, after its channels: closes what the feature opened. A throw is logged. */
  close?(): Promise<void>;
}

/** Makes a feature's host part. */
export type HostFeatureFactory = (kit: HostFeatureKit) => HostFeature | Promise<HostFeature>;
