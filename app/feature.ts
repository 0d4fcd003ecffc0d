/**
 * A feature is a module: one folder under `app/features/` that registers its
 * host part (control commands, receive steps, purge hook) and its runner part
 * (what it adds to a run's context, its run hooks) and its part of exports
 * here, as grammY composes
 * middleware. The host and the runner dispatch to whatever is registered:
 * neither names a feature, and a new feature adds a folder and one line to
 * `app/features/index.ts`.
 */
import type { HostFeature, HostFeatureKit } from '../host/feature.js';
import type { RunnerFeature, RunnerFeatureKit } from '../runner/feature.js';
import type { ExportKit, ExportPart } from '../src/export/part.js';

/** One feature's parts; each is made once per process that runs that role. */
export interface Feature {
  /** Unique among the registered features (logs, errors). */
  readonly name: string;
  /** Its host part, made when the host starts. */
  host?(kit: HostFeatureKit): HostFeature | Promise<HostFeature>;
  /** Its runner part, made when the runner starts. */
  runner?(kit: RunnerFeatureKit): RunnerFeature | Promise<RunnerFeature>;
  /** What it adds to exports (the console's downloads, `steerbot export`). */
  export?(kit: ExportKit): ExportPart;
}
