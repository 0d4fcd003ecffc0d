/** Profiles' runner part: the agent profile of a run (`profiles`, chosen by `bindings`). */
import type { RunnerFeature, RunnerFeatureKit } from '../../../runner/feature.js';
import { loadProfiles } from '../../../src/people/profiles.js';

/** The profiles and bindings of `kit.config`; without any, every run gets the default profile (the base model). Throws ConfigError for an unreadable prompt file. */
export async function profilesRunner(kit: RunnerFeatureKit): Promise<RunnerFeature> {
  const { config } = kit;
  const profiles = await loadProfiles(config.model, config.profiles, config.bindings, config.models);
  return { name: 'profiles', profile: (conversationId, identity) => profiles.resolve(conversationId, identity) };
}
