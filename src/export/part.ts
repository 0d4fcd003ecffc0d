/**
 * What a feature adds to exports (app/feature.ts `export`): the members of a
 * person's export it keeps for them, the members of a conversation's export
 * about the chat's one person, and conversations it keeps for a conversation
 * written whole. The exporter writes them in the order
 * the features were registered: a person's after their accounts and approval
 * (before the conversations they wrote in), a conversation's at its end.
 */
import type { SeqEntry } from '../record/entries.js';
import type { RedisClient } from '../redis/connection.js';
import type { Member, Streamed } from './json-stream.js';

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
  /**
   * Its part of a conversation written whole (a conversation's export; a
   * person's, for a conversation where only they wrote, no group):
   * conversations the feature keeps for this one and purges with it (a
   * subagent's), each written by `document(id)` (its id, record and parts,
   * whole). Where a person's export holds only their own messages its
   * members are left out: such conversations mix everyone's words.
   */
  conversation?(conversationId: string, document: (id: string) => Promise<Streamed>): ConversationPart;
}

/** A feature's part of one conversation written whole. */
export interface ConversationPart {
  /** Sees each record entry as the export reads it (once, in seq order, before any member is asked). Must not throw. */
  seen?(entry: SeqEntry): void;
  /** Its members, written after the conversation's own. */
  members: Member[];
}
