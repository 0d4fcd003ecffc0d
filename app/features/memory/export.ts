/** Memory's part of exports: a person's notes, and a direct chat's person's notes in the conversation's export. */
import type { ExportKit, ExportPart } from '../../../src/export/part.js';
import { MemoryStore, memoryKeys } from '../../../src/people/memory.js';

/** The notes of the export's person (`memory`); in a conversation's export, whose they are (`memoryOf`, null when no one's). */
export function memoryExport(kit: ExportKit): ExportPart {
  const store = new MemoryStore({ redis: kit.redis, prefix: kit.prefix });
  return {
    holds: async (identity) => (await kit.redis.exists(memoryKeys(kit.prefix, identity).notes)) > 0,
    person: (identity) => [['memory', () => store.list(identity)]],
    directPerson: (person) => [
      ['memoryOf', async () => (await person()) ?? null],
      [
        'memory',
        async () => {
          const identity = await person();
          return identity === undefined ? [] : store.list(identity);
        },
      ],
    ],
  };
}
