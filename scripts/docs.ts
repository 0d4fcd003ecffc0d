/** `npm run docs`: writes the generated configuration reference into docs/. */
import { writeFileSync } from 'node:fs';
import { configJsonSchema, configReference } from '../app/config-reference.js';
import { BUILTIN_REGISTRY } from '../app/config.js';

const docs = new URL('../docs/', import.meta.url);
writeFileSync(new URL('configuration.md', docs), configReference(BUILTIN_REGISTRY));
writeFileSync(new URL('steerbot.schema.json', docs), `${JSON.stringify(configJsonSchema(BUILTIN_REGISTRY), null, 2)}\n`);
console.log('wrote docs/configuration.md and docs/steerbot.schema.json');
