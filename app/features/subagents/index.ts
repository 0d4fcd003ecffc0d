/** The subagents feature: its runner part (run.ts) and `/status` lines (host.ts); the local agent's tools use it (plugins/local-agent/subagent-tools.ts). */
import type { Feature } from '../../feature.js';
import { subagentsHost } from './host.js';
import { subagentsRunner } from './run.js';

/** Registered in app/features/index.ts. */
export const subagentsFeature: Feature = { name: 'subagents', host: subagentsHost, runner: subagentsRunner };
