/**
 * Versions of what steerbot stores as JSON in Redis. Processes of two
 * releases share one Redis during a rolling upgrade, so a reader never
 * refuses a document because another release wrote it: an older version is
 * upcast to the one this build reads, a newer one (from a release this build
 * does not know) is left in place and skipped. Only a document that claims a
 * version this build knows and does not match it is an error: that is
 * corruption, not an upgrade. The rule for writers is in
 * docs/operations.md#upgrades.
 */
import type { z } from 'zod';

/** Turns a document of one version into the next version's. */
export type Upcaster = (doc: Record<string, unknown>) => Record<string, unknown>;

/** One stored shape: the version this build writes and how older ones become it. */
export interface StoredShape<T> {
  /** What the document is, for error messages (`schedule`, `memory note`). */
  readonly name: string;
  /** The version this build writes and reads. */
  readonly version: number;
  /** The field that holds the version; a document without it is version 1 (the shapes of the first release were not stamped). */
  readonly field: string;
  readonly schema: z.ZodType<T>;
  /** `upcasters[n]` turns version `n` into `n + 1`; one per version below `version`. */
  readonly upcasters?: Readonly<Record<number, Upcaster>>;
}

/** What reading one stored document gave. */
export type StoredRead<T> =
  | { kind: 'ok'; value: T }
  /** Written by a newer release: keep it, skip it. */
  | { kind: 'newer'; version: number }
  | { kind: 'invalid'; reason: string };

/** Declares a stored shape (its upcasters must cover every version below `version`). */
export function storedShape<T>(shape: StoredShape<T>): StoredShape<T> {
  for (let n = 1; n < shape.version; n++) {
    if (!shape.upcasters?.[n]) throw new Error(`stored shape ${shape.name}: no upcaster from version ${n}`);
  }
  return shape;
}

/** Reads one parsed JSON document of `shape`: upcast, skipped when newer, validated. */
export function readStored<T>(shape: StoredShape<T>, raw: unknown): StoredRead<T> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { kind: 'invalid', reason: `${shape.name} is not a JSON object` };
  let doc = raw as Record<string, unknown>;
  const stamped = doc[shape.field];
  const version = stamped === undefined ? 1 : stamped;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1) {
    return { kind: 'invalid', reason: `${shape.name} has a bad ${shape.field}: ${JSON.stringify(stamped)}` };
  }
  if (version > shape.version) return { kind: 'newer', version };
  for (let n = version; n < shape.version; n++) doc = { ...shape.upcasters![n]!(doc), [shape.field]: n + 1 };
  if (doc[shape.field] === undefined) doc = { ...doc, [shape.field]: shape.version };
  const parsed = shape.schema.safeParse(doc);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      kind: 'invalid',
      reason: `${shape.name} (version ${version}) cannot be read: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`,
    };
  }
  return { kind: 'ok', value: parsed.data };
}

/** The document to store: `value` stamped with the version this build writes. */
export function stamp<T extends object>(shape: StoredShape<T>, value: T): T {
  return { ...value, [shape.field]: shape.version };
}
