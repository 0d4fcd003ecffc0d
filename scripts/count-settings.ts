/** `npx tsx scripts/count-settings.ts`: how many settings the configuration reference lists (deprecated keys not counted). */
import { countSettings } from '../app/config-reference.js';
import { BUILTIN_REGISTRY } from '../app/config.js';

console.log(countSettings(BUILTIN_REGISTRY));
