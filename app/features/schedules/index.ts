/** The schedules feature: its host part (host.ts) and its runner part (run.ts). */
import type { Feature } from '../../feature.js';
import { schedulesHost } from './host.js';
import { schedulesRunner } from './run.js';

/** Registered in app/features/index.ts. */
export const schedulesFeature: Feature = { name: 'schedules', host: schedulesHost, runner: schedulesRunner };
