/** The profiles feature: its host part (host.ts) and its runner part (run.ts). */
import type { Feature } from '../../feature.js';
import { profilesHost } from './host.js';
import { profilesRunner } from './run.js';

/** Registered in app/features/index.ts. */
export const profilesFeature: Feature = { name: 'profiles', host: profilesHost, runner: profilesRunner };
