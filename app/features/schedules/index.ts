/** The schedules feature: its host part (host.ts), its runner part (run.ts) and its part of exports (export.ts). */
import type { Feature } from '../../feature.js';
import { schedulesExport } from './export.js';
import { schedulesHost } from './host.js';
import { schedulesRunner } from './run.js';

/** Registered in app/features/index.ts. */
export const schedulesFeature: Feature = { name: 'schedules', host: schedulesHost, runner: schedulesRunner, export: schedulesExport };
