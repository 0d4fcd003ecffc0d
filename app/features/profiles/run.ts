/**
 * Profiles' runner part: the agent profile of a run (`profiles`, chosen by
 * `bindings`); a run that works for another conversation (a subagent's) runs
 * under that conversation's profile, narrowed by its own binding (`profileFor`).
 */
import type { RunnerFeature, RunnerFeatureKit } from '../../../runner/feature.js';
import { loadProfiles, profileFor } from '../../../src/people/profiles.js';

/** The profiles and bindings of `kit.config`; without any, every run gets the default profile (the base model). Throws ConfigError for an unreadable prompt file. */
export async function profilesRunner(kit: RunnerFeatureKit): Promise<RunnerFeature> {
  const { config } = kit;
  const profiles = await loadProfiles(config.model, config.profiles, config.bindings, config.models);
  return {
    name: 'profiles',
    profile: (conversationId, identity, parent) =>
      parent === undefined ? profiles.resolve(conversationId, identity) : profileFor(profiles, conversationId, parent, identity),
  };
}
