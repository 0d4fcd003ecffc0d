/** The shapes of the fake Microsoft Teams (`teams-server.ts`): what it records and what a test drives it with. */
import type { TeamsActivityOptions } from './teams-activity.js';
import type { TeamsTokenOptions } from './teams-auth.js';

/** Calls the fake records: a message POST (`send`), a typing POST, an update (PUT), a token request. */
export type TeamsCallKind = 'send' | 'typing' | 'update' | 'token';

/** One call the fake received. */
export interface TeamsCall {
  kind: TeamsCallKind;
  /** The region path of the service URL it came to (`teams`, `amer`, …); empty for `token`. */
  region: string;
  /** The conversation of a connector call. */
  conversationId?: string;
  /** The JSON body (a connector call's activity). */
  body: Record<string, any>;
  /** HTTP status the fake answered. */
  status: number;
}

/** An activity the bot sent (message or typing), with updates applied. */
export interface TeamsSentActivity {
  /** The id the fake gave it. */
  id: string;
  region: string;
  conversationId: string;
  type: string;
  /** The message text: the activity's `text`, else its Adaptive Card's TextBlocks and RichTextBlocks, one a line. */
  text: string;
  /** The card's `Action.Submit` buttons: title and `data`. */
  buttons: Array<{ title: string; data: unknown }>;
  /** The activity as last sent or updated. */
  activity: Record<string, any>;
}

/**
 * A file the bot sent, as Teams shows it: an attachment with a `contentUrl`
 * (`inline`: an image in the message) or an Adaptive Card's `Action.OpenUrl`
 * button (`link`), named by its attachment's `name`.
 */
export interface TeamsSentFile {
  /** The id of the activity that carries it. */
  activityId: string;
  /** `inline`: an attachment by `contentUrl`; `link`: a card button that opens `url`. */
  kind: 'inline' | 'link';
  /** The attachment's `name`. */
  name: string;
  /** The attachment's content type (an image's media type, or the card's). */
  contentType: string;
  /** Where the file is fetched from (Teams' client fetches an inline image; a click opens a link). */
  url: string;
  /** The button's title (`link`). */
  title?: string;
}

/** A failure the fake answers with. */
export interface TeamsFailure {
  status: number;
  /** `Retry-After` header, in seconds. */
  retryAfterSeconds?: number;
}

/** A running fake. */
export interface FakeTeams {
  /** The fake's root; give it as `authorityEndpoint`. */
  url: string;
  /** A service URL of region `region` (default `teams`), with its trailing slash, as activities carry it. */
  serviceUrl(region?: string): string;
  /** The issuer of the good tokens: the tenant's Entra v1 issuer. */
  issuer: string;
  calls: TeamsCall[];
  /** Every activity the bot sent, in order. */
  sent: TeamsSentActivity[];
  /** Current texts of the bot's messages (not typing) in `conversationId`, in order. */
  texts(conversationId: string): string[];
  /** The files the bot sent to `conversationId`, in order. */
  files(conversationId: string): TeamsSentFile[];
  /** Typing activities the bot sent to `conversationId`. */
  typingCount(conversationId: string): number;
  /** The next `n` calls of `kind` fail with `failure`. */
  failNext(kind: TeamsCallKind, failure: TeamsFailure, n?: number): void;
  /** A bearer token for an inbound activity (good unless `o` says otherwise). */
  token(o?: TeamsTokenOptions): string;
  /** POSTs `activity` to the app's `url` with `token` (default: a good one naming the activity's serviceUrl; null: no Authorization). */
  postActivity(url: string, activity: unknown, token?: string | null): Promise<{ status: number; body: any }>;
  /** A message activity on this fake's service URL. */
  message(o: TeamsActivityOptions): Record<string, any>;
  waitUntil<T>(check: () => T | undefined | false, timeoutMs?: number, what?: string): Promise<T>;
  close(): Promise<void>;
}
