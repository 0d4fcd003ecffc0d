/** Memory's host part: `/memory` and `/forget`, the console's memory API and panel; purging a person deletes their notes, linking merges them. */
import type { HostFeature, HostFeatureKit } from '../../../host/feature.js';
import { MemoryStore } from '../../../src/people/memory.js';
import { memoryCommands } from './commands.js';
import { registerMemoryApi } from './console-api.js';
import { MEMORY_PANEL_SCRIPT, memoryPanel } from './console-panel.js';

/** The memory commands and the person hooks on `kit`'s identities. */
export function memoryHost(kit: HostFeatureKit): HostFeature {
  const { config, identities } = kit;
  // Memory that was kept while memory was on goes with a purge (or a link) even after it is turned off.
  const store = new MemoryStore({ redis: kit.redis, prefix: kit.prefix, limits: config.memory });
  identities.onChange({
    purged: (identity) => store.purge(identity).then(() => undefined),
    linked: ({ from, into }) => store.merge(from, into).then(() => undefined),
  });
  const enabled = config.memory.enabled ? store : undefined;
  return {
    name: 'memory',
    commands: memoryCommands({ store: enabled, identities }),
    console: {
      api: (route) => registerMemoryApi(route, enabled),
      panel: { name: 'memory', html: memoryPanel, script: MEMORY_PANEL_SCRIPT },
    },
  };
}
