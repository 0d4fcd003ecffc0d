/**
 * docs/external-agent.schema.json says what the plugin accepts: every event
 * type with exactly its fields, and the steering pull body, as the plugin's
 * zod schemas (the trust boundary) define them.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEventSchemas, pullBodySchema } from '../../plugins/http-agent/protocol.js';

const schema = JSON.parse(readFileSync('docs/external-agent.schema.json', 'utf8'));

/** Event variants of a JSON Schema node: `anyOf` / `oneOf` flattened. */
const variants = (node: any): any[] => ((node.anyOf ?? node.oneOf) ? [...(node.anyOf ?? []), ...(node.oneOf ?? [])].flatMap(variants) : [node]);
const fieldsOf = (node: any) => ({ properties: Object.keys(node.properties).sort(), required: [...node.required].sort() });

describe('docs/external-agent.schema.json', () => {
  it('lists every event type with the fields the plugin accepts, and no other', () => {
    const documented = Object.fromEntries(
      variants(schema.$defs.event).map((v) => [`${v.properties.type.const}${v.properties.outcome ? `:${v.properties.outcome.const}` : ''}`, fieldsOf(v)]),
    );
    const accepted = Object.fromEntries(
      Object.values(agentEventSchemas)
        .flatMap((s) => variants(z.toJSONSchema(s as z.ZodType, { io: 'input' })))
        .map((v) => [`${v.properties.type.const}${v.properties.outcome ? `:${v.properties.outcome.const}` : ''}`, fieldsOf(v)]),
    );
    expect(documented).toEqual(accepted);
    expect(Object.keys(accepted)).toEqual(['text-delta', 'message', 'step', 'state', 'typing', 'result:completed', 'result:failed']);
  });

  it('describes the steering pull body as the run endpoint validates it', () => {
    const { $schema: _, ...generated } = z.toJSONSchema(pullBodySchema, { io: 'input' }) as Record<string, unknown>;
    const { description: __, ...documented } = schema.$defs.pullRequest;
    expect(documented).toEqual(generated);
  });
});
