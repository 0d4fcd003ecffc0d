/** The budgets feature: its host part (host.ts) and its runner part (run.ts). */
import type { Feature } from '../../feature.js';
import { budgetsHost } from './host.js';
import { budgetsRunner } from './run.js';

/** Registered in app/features/index.ts. */
export const budgetsFeature: Feature = { name: 'budgets', host: budgetsHost, runner: budgetsRunner };
