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
import { childConversations, type DelegateCall } from './children.js';

/** The `subagents` member of a conversation written whole: its child conversations, by id. */
export function subagentsExport(kit: ExportKit): ExportPart {
  return {
    conversation: (conversationId, document) => {
      const calls: DelegateCall[] = [];
      return {
        seen: (e) => {
          if (e.kind === 'tool.started' && e.tool === 'delegate') calls.push({ run: e.run, key: e.key });
        },
        members: [
          [
            'subagents',
            async () => {
              const { recorded: ids } = await childConversations(kit.redis, kit.prefix, conversationId, calls);
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
