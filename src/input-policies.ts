/**
 * The input policies, in documentation order. A module of its own (no
 * imports) so channel config schemas can use it while `config-schema.ts`
 * imports those schemas.
 */
export const INPUT_POLICIES = ['steer', 'followup', 'collect', 'interrupt', 'supersede'] as const;

/** An input policy: what happens to a message that arrives while a run is active. */
export type InputPolicy = (typeof INPUT_POLICIES)[number];
