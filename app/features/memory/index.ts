/** The memory feature: its host part (host.ts) and its runner part (run.ts). */
import type { Feature } from '../../feature.js';
import { memoryHost } from './host.js';
import { memoryRunner } from './run.js';

/** Registered in app/features/index.ts. */
export const memoryFeature: Feature = { name: 'memory', host: memoryHost, runner: memoryRunner };
