/** The conversation index feature: where each person wrote, for the export of a person. */
import type { Feature } from '../../feature.js';
import { conversationIndexHost } from './host.js';

/** Registered in app/features/index.ts. */
export const conversationIndexFeature: Feature = { name: 'conversation index', host: conversationIndexHost };
