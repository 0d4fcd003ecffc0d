/**
 * `steerbot skills list`: what each profile's runs see of the local agent's
 * skills (`agents.local-agent.skills`, selected by `profiles.<name>.skills`):
 * name, description and folder, for the base settings (`default`) and each
 * profile. The skills are read and checked as at start, so a malformed
 * SKILL.md or an unknown name in a profile is the same ConfigError.
 */
import { checkSkillSelections, loadSkills, skillsFor } from '../plugins/local-agent/skills.js';
import { DEFAULT_PROFILE } from '../src/people/profiles.js';

/** The parts of the configuration the listing reads (`SteerbotConfig` has them). */
interface SkillsConfig {
  /** Runner plugin settings: `local-agent`'s `skills`. */
  agents: Readonly<Record<string, unknown>>;
  /** The profiles and their `skills`. */
  profiles: Readonly<Record<string, { skills?: readonly string[] | undefined }>>;
}

/**
 * The listing, one block per profile (`default` first, then the profiles by name).
 * @throws ConfigError as the local agent's start would.
 */
export async function skillsListFromCli(config: SkillsConfig): Promise<string> {
  const section = config.agents['local-agent'] as { skills?: string[] } | undefined;
  const dirs = section?.skills ?? [];
  if (dirs.length === 0) return 'No skills: agents.local-agent.skills names no directory (docs/agent.md#skills).\n';
  const all = await loadSkills(dirs);
  checkSkillSelections(all, config.profiles);
  const profiles: Array<[string, readonly string[] | undefined]> = [
    [DEFAULT_PROFILE, undefined],
    ...Object.entries(config.profiles)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([name, p]): [string, readonly string[] | undefined] => [name, p.skills]),
  ];
  const blocks = profiles.map(([name, selection]) => {
    const seen = skillsFor(all, { skills: selection });
    const head = `${name} (${selection ? 'its skills' : 'every skill'}: ${seen.length})`;
    return [head, ...seen.map((s) => `  ${s.name}: ${oneLine(s.description)}\n    ${s.folder}`)].join('\n');
  });
  return `${blocks.join('\n\n')}\n`;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}
