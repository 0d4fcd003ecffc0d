/** The memory feature: its host part (host.ts), its runner part (run.ts) and its part of exports (export.ts). */
import type { Feature } from '../../feature.js';
import { memoryExport } from './export.js';
import { memoryHost } from './host.js';
import { memoryRunner } from './run.js';

/** Registered in app/features/index.ts. */
export const memoryFeature: Feature = { name: 'memory', host: memoryHost, runner: memoryRunner, export: memoryExport };
