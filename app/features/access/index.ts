/** The access feature: who may talk to the bot (host/access/), as the host's first receive step. */
import type { Feature } from '../../feature.js';
import { accessHost } from './host.js';

/** Registered in app/features/index.ts. */
export const accessFeature: Feature = { name: 'access', host: accessHost };
