import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, ENV_BINDINGS } from '../src/config.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const rows = new Map(
  readme
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .map((l) => l.split('|').map((c) => c.trim()))
    .map((cells) => [cells[1]?.replaceAll('`', ''), cells] as const),
);

describe('README configuration table', () => {
  for (const b of ENV_BINDINGS) {
    it(`documents ${b.path} with ${b.env} and its default`, () => {
      const row = rows.get(b.path);
      expect(row, `no row for ${b.path}`).toBeDefined();
      expect(row?.[2]).toBe(`\`${b.env}\``);
      const value = b.path.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], DEFAULT_CONFIG);
      // Settings of a section that is absent by default (a channel) have no default to compare.
      const section = b.path.split('.').slice(0, -1).reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], DEFAULT_CONFIG);
      if (section === undefined) return;
      const expected = value === undefined ? '—' : Array.isArray(value) ? '`[]`' : `\`${String(value)}\``;
      expect(row?.[3]?.startsWith(expected)).toBe(true);
    });
  }
});
