/** The budgets feature: its host part (host.ts), its runner part (run.ts) and its part of exports (export.ts). */
import type { Feature } from '../../feature.js';
import { budgetsExport } from './export.js';
import { budgetsHost } from './host.js';
import { budgetsRunner } from './run.js';

/** Registered in app/features/index.ts. */
export const budgetsFeature: Feature = { name: 'budgets', host: budgetsHost, runner: budgetsRunner, export: budgetsExport };
