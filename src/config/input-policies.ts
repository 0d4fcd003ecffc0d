/**
 * The input policies, in documentation order. A module of its own (no
 * imports), so that the protocol types, the core config schema and every
 * plugin's config schema (through the public `INPUT_POLICIES`) share one list.
 */
export const INPUT_POLICIES = ['steer', 'followup', 'collect', 'interrupt', 'supersede'] as const;

/** An input policy: what happens to a message that arrives while a run is active. */
export type InputPolicy = (typeof INPUT_POLICIES)[number];
