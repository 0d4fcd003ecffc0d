/**
 * The registered features, in the order the host and the runner ask them
 * (host/feature.ts, runner/feature.ts) and their members are written in a
 * person's export. A feature is one folder here; adding one is a folder and a
 * line below. Access is not among them: every host runs its access step
 * first (host/access/step.ts).
 */
import type { HostFeatureFactory } from '../../host/feature.js';
import type { RunnerFeatureFactory } from '../../runner/feature.js';
import type { ExportKit, ExportPart } from '../../src/export/part.js';
import type { Feature } from '../feature.js';
import { budgetsFeature } from './budgets/index.js';
import { conversationIndexFeature } from './conversation-index/index.js';
import { memoryFeature } from './memory/index.js';
import { profilesFeature } from './profiles/index.js';
import { schedulesFeature } from './schedules/index.js';
import { subagentsFeature } from './subagents/index.js';

/** Every built-in feature, in order. Subagents first: a child run with no parent is refused before any other feature (budgets) counts it. */
export const FEATURES: readonly Feature[] = [subagentsFeature, profilesFeature, memoryFeature, budgetsFeature, schedulesFeature, conversationIndexFeature];

/** The host parts of `features` (default: every built-in one), for `startHost`, each with its part of exports (the console's downloads). */
export function hostFeatures(features: readonly Feature[] = FEATURES): HostFeatureFactory[] {
  return features.flatMap((f) => {
    const { host, export: exporting } = f;
    if (!host && !exporting) return [];
    return [
      async (kit) => {
        const part = host ? await host(kit) : { name: f.name };
        return exporting ? { ...part, export: exporting } : part;
      },
    ];
  });
}

/** The parts of exports of `features` (default: every built-in one), for an `Exporter` outside a host (`steerbot export`). */
export function exportParts(kit: ExportKit, features: readonly Feature[] = FEATURES): ExportPart[] {
  return features.flatMap((f) => (f.export ? [f.export(kit)] : []));
}

/** The runner parts of `features` (default: every built-in one), for `startRunner`. */
export function runnerFeatures(features: readonly Feature[] = FEATURES): RunnerFeatureFactory[] {
  return features.flatMap((f) => (f.runner ? [f.runner] : []));
}
