/**
 * Subagents' part of exports: a conversation written whole carries its
 * child conversations (`subagents`), each whole. Their records hold the
 * tasks it delegated (the person's words, as the agent passed them on) and
 * what the children found, and `/purge` deletes them with it (host.ts), so
 * the export made before a purge holds them too. They are found as the purge
 * finds them: from the conversation's `delegate` calls, the ids each run's
 * set of children names and those each call could name, kept when their
 * record is still there. The calls are seen as the export reads the record.
 */
import { arrayOfStreams, type Streamed } from '../../../src/export/json-stream.js';
import type { ExportKit, ExportPart } from '../../../src/export/part.js';
import { conversationKeys } from '../../../src/redis/keys.js';
import { childId, childrenKeys } from './children.js';

/** Most children one call can have started: the largest `subagents.maxPerRun`, so a limit lowered since still finds them all. */
const MOST_PER_CALL = 16;

/** The `subagents` member of a conversation written whole: its child conversations, by id. */
export function subagentsExport(kit: ExportKit): ExportPart {
  return {
    conversation: (conversationId, document) => {
      const calls: Call[] = [];
      return {
        seen: (e) => {
          if (e.kind === 'tool.started' && e.tool === 'delegate') calls.push({ run: e.run, key: e.key });
        },
        members: [
          [
            'subagents',
            async () => {
              const ids = await childrenOf(kit, conversationId, calls);
              return arrayOfStreams(
                (async function* (): AsyncGenerator<Streamed> {
                  for (const id of ids) yield await document(id);
                })(),
              );
            },
          ],
        ],
      };
    },
  };
}

/** One `delegate` call: its run and idempotency key, which name its children. */
interface Call {
  run: string;
  key: string;
}

/** The child conversations `calls` (of `conversationId`) started whose records are still there, sorted. */
async function childrenOf(kit: ExportKit, conversationId: string, calls: readonly Call[]): Promise<string[]> {
  const { redis, prefix } = kit;
  const runs = [...new Set(calls.map((c) => c.run))];
  const started = await Promise.all(runs.map((runId) => redis.smembers(childrenKeys(prefix, { conversationId, runId }).started)));
  const guessed = calls.flatMap(({ run, key }) => Array.from({ length: MOST_PER_CALL }, (_, i) => childId(run, key, i + 1)));
  const ids = [...new Set([...started.flat(), ...guessed])].sort();
  // Each child in its own slot: one EXISTS each.
  const there = await Promise.all(ids.map(async (id) => (await redis.exists(conversationKeys(prefix, id).log)) > 0));
  return ids.filter((_, i) => there[i]);
}
