/**
 * Pairing and link codes: 8 characters from an alphabet without look-alikes
 * (32^8 ≈ 10^12 codes), shown as `ABCD-EFGH`. Only their SHA-256 is stored:
 * a code is looked up by the hash of what was typed, so whoever reads Redis
 * learns no code that would approve or link anyone.
 */
import { createHash, randomInt } from 'node:crypto';

const ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
/** Characters in a code, without the dash. */
export const CODE_LENGTH = 8;

/** A fresh random code, e.g. `K7QM-2XRD`. */
export function newCode(): string {
  let out = '';
  for (let i = 0; i < CODE_LENGTH; i++) out += ALPHABET[randomInt(ALPHABET.length)];
  return `${out.slice(0, 4)}-${out.slice(4)}`;
}

/** A code as typed (any case, spaces or dashes) in its stored form, or undefined when it cannot be a code. */
export function normalizeCode(text: string): string | undefined {
  const bare = text.toUpperCase().replace(/[\s-]/g, '');
  if (bare.length !== CODE_LENGTH || [...bare].some((c) => !ALPHABET.includes(c))) return undefined;
  return `${bare.slice(0, 4)}-${bare.slice(4)}`;
}

/** SHA-256 of a normalized code, hex: the code's key. */
export function codeHash(code: string): string {
  return createHash('sha256').update(code).digest('hex');
}
