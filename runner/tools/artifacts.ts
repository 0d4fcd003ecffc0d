/**
 * The artifact store of one run: large tool results kept in the
 * conversation's `artifacts` hash (its hash tag, so reset and purge delete
 * them with the rest), written fenced by the run, expiring `ttlSeconds`
 * after the conversation's last artifact write.
 */
import { randomBytes } from 'node:crypto';
import type { RunRef } from '../../src/protocol/runs.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type RedisClient, runScript } from '../../src/scripts/index.js';
import { checkReply } from '../../src/scripts/results.js';
import type { ArtifactRef, ArtifactStore } from './contract.js';

const ID_RE = /^a_[0-9a-f]{16}$/;

/** Artifacts of `run`'s conversation in Redis. */
export class RedisArtifacts implements ArtifactStore {
  constructor(
    private readonly client: RedisClient,
    private readonly prefix: string,
    private readonly run: RunRef,
  ) {}

  async put(text: string, ttlSeconds: number): Promise<ArtifactRef> {
    const id = `a_${randomBytes(8).toString('hex')}`;
    const k = conversationKeys(this.prefix, this.run.conversationId);
    checkReply(
      'artifact-put',
      await runScript(this.client, 'artifact-put', [k.run(this.run.runId), k.artifacts], [this.run.token, id, text, Math.max(1, Math.floor(ttlSeconds))]),
      this.run.runId,
    );
    return { id, chars: text.length };
  }

  async read(id: string, offset: number, length: number): Promise<{ text: string; chars: number } | undefined> {
    // An id the model made up is simply not found (it never reaches Redis as anything but a field name).
    if (!ID_RE.test(id)) return undefined;
    const text = await this.client.hget(conversationKeys(this.prefix, this.run.conversationId).artifacts, id);
    if (text === null) return undefined;
    return { text: text.slice(offset, offset + length), chars: text.length };
  }
}
