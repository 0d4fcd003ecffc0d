/** The subagents feature: its runner part (run.ts), `/status` lines and purge (host.ts) and its part of exports (export.ts); the local agent's tools use it (plugins/local-agent/subagent-tools.ts). */
import type { Feature } from '../../feature.js';
import { subagentsExport } from './export.js';
import { subagentsHost } from './host.js';
import { subagentsRunner } from './run.js';

/** Registered in app/features/index.ts. */
export const subagentsFeature: Feature = { name: 'subagents', host: subagentsHost, runner: subagentsRunner, export: subagentsExport };
