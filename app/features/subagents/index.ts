/** The subagents feature: its runner part (run.ts); the local agent's tools use it (plugins/local-agent/subagent-tools.ts). */
import type { Feature } from '../../feature.js';
import { subagentsRunner } from './run.js';

/** Registered in app/features/index.ts. */
export const subagentsFeature: Feature = { name: 'subagents', runner: subagentsRunner };
