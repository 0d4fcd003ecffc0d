import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BUILTIN_REGISTRY, envBindings } from '../app/config.js';
import { configJsonSchema, configReference } from '../app/config-reference.js';

const docs = (name: string) => readFileSync(new URL(`../docs/${name}`, import.meta.url), 'utf8');

describe('configuration reference', () => {
  it('docs/configuration.md is what the schema generates (run `npm run docs` after changing a setting)', () => {
    expect(docs('configuration.md')).toBe(configReference(BUILTIN_REGISTRY));
  });

  it('docs/steerbot.schema.json is the JSON Schema of the config file', () => {
    expect(JSON.parse(docs('steerbot.schema.json'))).toEqual(configJsonSchema(BUILTIN_REGISTRY));
  });

  it('names every environment variable next to the setting it sets', () => {
    const text = configReference(BUILTIN_REGISTRY);
    for (const b of envBindings(BUILTIN_REGISTRY)) {
      const row = text.split('\n').find((l) => l.startsWith(`| \`${b.path}\` | `));
      expect(row?.split(' | ')[1]?.split(', '), b.env).toContain(`\`${b.env}\``);
    }
  });

  it("names every provider's key variable on the model.apiKey row and in its description", () => {
    const row = configReference(BUILTIN_REGISTRY)
      .split('\n')
      .find((l) => l.startsWith('| `model.apiKey` | '));
    for (const variable of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GOOGLE_GENERATIVE_AI_API_KEY']) {
      expect(row?.split(' | ')[1], variable).toContain(`\`${variable}\``);
      expect(row?.split(' | ')[3], variable).toContain(`\`${variable}\``);
    }
  });

  it('describes every setting', () => {
    const undocumented = configReference(BUILTIN_REGISTRY)
      .split('\n')
      .filter((l) => l.startsWith('| `'))
      .filter((l) => l.trimEnd().endsWith('|  |'));
    expect(undocumented).toEqual([]);
  });
});
