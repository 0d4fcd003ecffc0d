/** Profiles' host part: the agent profile of a message (its input policy wins over the channel's; `/status` names it). */
import type { HostFeature, HostFeatureKit } from '../../../host/feature.js';
import { loadProfiles } from '../../../src/people/profiles.js';

/** The profiles and bindings of `kit.config`; without profiles, a feature with no steps. Throws ConfigError for an unreadable prompt file. */
export async function profilesHost(kit: HostFeatureKit): Promise<HostFeature> {
  const { config, identities } = kit;
  if (Object.keys(config.profiles).length === 0 && Object.keys(config.models).length === 0) return { name: 'profiles' };
  const profiles = await loadProfiles(config.model, config.profiles, config.bindings, config.models);
  return {
    name: 'profiles',
    inputPolicy: (conversationId) => profiles.resolve(conversationId).inputPolicy,
    profile: async (channelId, conversationId, senderId) =>
      profiles.resolve(conversationId, profiles.bindsIdentities ? await identities.tryResolve(channelId, senderId) : undefined),
  };
}
