/** Access's host part: `/pair`, `/link` and the access policy, before commands and ingest (host/access/step.ts). */
import { accessStep } from '../../../host/access/step.js';
import type { HostFeature, HostFeatureKit } from '../../../host/feature.js';

/** The access step on the host's gate. */
export function accessHost(kit: Pick<HostFeatureKit, 'access'>): HostFeature {
  return {
    name: 'access',
    admit: (req) => accessStep({ gate: kit.access, reply: req.reply, firstDelivery: req.firstDelivery }, req.channelId, req.settings, req.message),
  };
}
