/**
 * What a feature adds to exports (app/feature.ts `export`): the members of a
 * person's export it keeps for them, and the members of a conversation's
 * export about the chat's one person. The exporter writes them in the order
 * the features were registered: a person's after their accounts and approval
 * (before the conversations they wrote in), a conversation's at its end.
 */
import type { RedisClient } from '../redis/connection.js';
import type { Member } from './json-stream.js';

/** What a feature's export part reads from. */
export interface ExportKit {
  redis: RedisClient;
  /** Key prefix (`redis.prefix`). */
  prefix: string;
}

/** One feature's part of exports. Every member is optional. */
export interface ExportPart {
  /** Whether the feature keeps anything for the identity (a person of whom nothing is kept is not found). */
  holds?(identity: string): Promise<boolean>;
  /** Its members of a person's export. */
  person?(identity: string): Member[];
  /**
   * Its members of a conversation's export about the chat's person: `person()`
   * is the identity of a direct chat's one writer, undefined in a group or
   * where several wrote (read once, whoever asks).
   */
  directPerson?(person: () => Promise<string | undefined>): Member[];
}
