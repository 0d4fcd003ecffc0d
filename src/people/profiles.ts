/**
 * Agent profiles: several agent setups in one deployment. A profile names a
 * model, a system prompt, the tools offered and their policy, an input
 * policy. Bindings choose a
 * conversation's profile by the person (identity), the chat (a conversation
 * id, or a prefix of it: a group's threads share the group's binding) or the
 * channel; the most specific wins, and a conversation no binding names gets
 * the base settings (`default`).
 *
 * Profiles are not part of the compaction checkpoint, so changing one (or a
 * binding) never invalidates a checkpoint. Prompt files are read once, at
 * start, like the local agent's own.
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { InputPolicy } from 'steerbot/plugin';
import { channelResolver } from '../channel.js';
import { apiProblem, deriveModel } from '../config/model-catalogue.js';
import { ConfigError, type ConfigIssue } from '../errors.js';

/** The name of the profile a conversation no binding names gets (the base settings). */
export const DEFAULT_PROFILE = 'default';

/** Model settings a profile changes (the rest come from `model`). */
export interface ProfileModelSettings {
  provider?: 'openai' | 'anthropic' | 'google' | 'openai-compatible' | undefined;
  name?: string | undefined;
  baseURL?: string | undefined;
  apiKey?: string | undefined;
  api?: 'chat' | 'responses' | undefined;
  contextWindow?: number | undefined;
  outputReserve?: number | undefined;
}

/** A tool policy scope: a default mode and modes per tool name. */
export interface ProfileToolPolicy {
  default?: 'allow' | 'deny' | 'require_approval' | undefined;
  tools?: Record<string, 'allow' | 'deny' | 'require_approval'> | undefined;
}

/** One profile as configured (`profiles.<name>`). */
export interface ProfileSettings {
  model?: ProfileModelSettings | undefined;
  systemPrompt?: string | undefined;
  systemPromptFile?: string | undefined;
  /** Names of the tools offered (a name ending in `*` matches a prefix). Default: every tool. */
  tools?: string[] | undefined;
  toolPolicy?: ProfileToolPolicy | undefined;
  inputPolicy?: InputPolicy | undefined;
  /** Names of `models` its conversations may switch to with `/model`. Default: all of them. */
  models?: string[] | undefined;
  /** Names of the skills its runs see (the runner plugin's skills). Default: all of them. */
  skills?: string[] | undefined;
  /**
   * Long-term memory in the profile's runs (when `memory.enabled`): true, in
   * private chats only; false, none; `{ inGroups: true }`, in group chats too
   * (the notes of the person who started the run). Default true.
   */
  memory?: boolean | { inGroups?: boolean | undefined } | undefined;
  /** Spoken replies: `off`, `always`, or `when-spoken-to` (the person sent a voice note). Default: the agent's `voice.replies`. */
  voice?: 'off' | 'always' | 'when-spoken-to' | undefined;
}

/** One binding (`bindings[]`): the profile and exactly one of what it matches. */
export interface ProfileBinding {
  profile: string;
  /** A channel id (`telegram`, `webhook:<name>`). */
  channel?: string | undefined;
  /** A conversation id or a prefix of one (`telegram:-1001234`: the group and its topics). */
  chat?: string | undefined;
  /** An identity (`telegram:123`, or a linked identity). */
  identity?: string | undefined;
}

/** The model settings every run has (`model.*`, resolved). */
export interface BaseModelSettings {
  provider: 'openai' | 'anthropic' | 'google' | 'openai-compatible';
  name: string;
  baseURL?: string | undefined;
  apiKey?: string | undefined;
  /** The `openai` provider's API; absent: `chat`. */
  api?: 'chat' | 'responses' | undefined;
  contextWindow: number;
  outputReserve: number;
  /** Models a call fails over to, in order (`model.fallbacks`, resolved). */
  fallbacks?: Array<Omit<BaseModelSettings, 'fallbacks'>> | undefined;
}

/** A resolved profile, as runs and commands see it. */
export interface AgentProfile {
  /** Its name (`default` for the base settings). */
  name: string;
  /** The model: the base settings with the profile's changes. */
  model: BaseModelSettings;
  /** The system prompt (the file's text, when a file was named); undefined: the agent's own. */
  systemPrompt?: string;
  /** Tool names offered; undefined: all. */
  tools?: readonly string[];
  /** The profile's tool policy scope (between the conversation's and the channel's). */
  toolPolicy?: ProfileToolPolicy;
  /** Its input policy; undefined: the channel's. */
  inputPolicy?: InputPolicy;
  /** The models its conversations may switch to with `/model`, by name (`models`); absent: none. */
  models?: Readonly<Record<string, BaseModelSettings>>;
  /** Names of the skills its runs see; undefined: all (the runner plugin checks the names at start). */
  skills?: readonly string[];
  /**
   * False: the profile's runs get no memory (tools, prompt notes).
   * `{ inGroups: true }`: group runs get the starter's memory too. Absent:
   * memory as configured, in private chats only.
   */
  memory?: false | { inGroups: true };
  /** When its runs' answers are also spoken (the local agent's `voice`); undefined: the agent's default. */
  voice?: 'off' | 'always' | 'when-spoken-to';
}

/** Chooses profiles. */
export interface Profiles {
  /** The profile of a conversation, for a person (`identity`) when known. */
  resolve(conversationId: string, identity?: string): AgentProfile;
  /** Whether any binding names identities (callers resolve one only then). */
  readonly bindsIdentities: boolean;
}

/**
 * Builds the profiles: reads prompt files, checks that every binding names a
 * profile and exactly one target, and resolves each model.
 * @throws ConfigError naming every problem.
 */
export async function loadProfiles(
  base: BaseModelSettings,
  profiles: Record<string, ProfileSettings> = {},
  bindings: ProfileBinding[] = [],
  models: Record<string, ProfileModelSettings> = {},
): Promise<Profiles> {
  const issues: ConfigIssue[] = [];
  const choices = namedModels(base, models, issues);
  const resolved = new Map<string, AgentProfile>();
  for (const [name, p] of Object.entries(profiles)) {
    const profile = await resolveProfile(name, p, base, issues);
    const allowed = allowedModels(choices, p.models, `profiles.${name}.models`, issues);
    if (profile) resolved.set(name, { ...profile, ...(allowed && { models: allowed }) });
  }
  const byIdentity = new Map<string, string>();
  const byChat = new Map<string, string>();
  const byChannel = new Map<string, string>();
  bindings.forEach((b, i) => {
    const path = `bindings.${i}`;
    const targets = [b.identity, b.chat, b.channel].filter((t) => t !== undefined);
    if (targets.length !== 1) issues.push({ path, message: 'set exactly one of identity, chat or channel' });
    if (!(b.profile in profiles)) issues.push({ path: `${path}.profile`, message: `no profile named "${b.profile}" in profiles` });
    if (b.identity !== undefined) byIdentity.set(b.identity, b.profile);
    else if (b.chat !== undefined) byChat.set(b.chat, b.profile);
    else if (b.channel !== undefined) byChannel.set(b.channel, b.profile);
  });
  if (issues.length > 0) throw new ConfigError(issues);
  const fallback: AgentProfile = { name: DEFAULT_PROFILE, model: base, ...(Object.keys(choices).length > 0 && { models: choices }) };
  // The longest chat prefix, then the channel: as personas resolve.
  const chatOf = channelResolver(byChat.keys());
  const channelOf = channelResolver(byChannel.keys());
  return {
    bindsIdentities: byIdentity.size > 0,
    resolve(conversationId, identity) {
      const name =
        (identity !== undefined ? byIdentity.get(identity) : undefined) ??
        byChat.get(chatOf(conversationId) ?? '') ??
        byChannel.get(channelOf(conversationId) ?? '');
      return (name !== undefined ? resolved.get(name) : undefined) ?? fallback;
    },
  };
}

/**
 * The profile of a run in `conversationId` that works for the run of another
 * conversation (a subagent's parent, `parentConversationId`): the parent's
 * profile for the same person, its model, `/model` choices, prompt, tool
 * policy and memory included. A chat or channel binding of the run's own
 * conversation (the `subagent` channel's) only narrows it (`narrowProfile`):
 * a child never gets more than the run that started it.
 */
export function profileFor(profiles: Profiles, conversationId: string, parentConversationId: string, identity: string | undefined): AgentProfile {
  const parent = profiles.resolve(parentConversationId, identity);
  const own = profiles.resolve(conversationId);
  return own.name === DEFAULT_PROFILE ? parent : narrowProfile(parent, own);
}

/**
 * `profile` narrowed by `by`: a tool or a skill is offered only when both
 * offer it; everything else is `profile`'s. Named `<profile>+<by>` (a name no
 * configured profile can have).
 */
export function narrowProfile(profile: AgentProfile, by: AgentProfile): AgentProfile {
  const tools = offeredByBoth(profile.tools, by.tools);
  const skills = profile.skills && by.skills ? profile.skills.filter((s) => by.skills!.includes(s)) : (profile.skills ?? by.skills);
  return { ...profile, name: `${profile.name}+${by.name}`, ...(tools && { tools }), ...(skills && { skills }) };
}

/** The tool names two lists both offer (undefined: every tool); a name ending in `*` matches a prefix. */
function offeredByBoth(a: readonly string[] | undefined, b: readonly string[] | undefined): readonly string[] | undefined {
  if (!a || !b) return a ?? b;
  const out = new Set<string>();
  for (const x of a) {
    for (const y of b) {
      if (covers(x, y)) out.add(y);
      else if (covers(y, x)) out.add(x);
    }
  }
  return [...out];
}

/** Whether the name or prefix pattern `x` offers every tool `y` offers. */
const covers = (x: string, y: string) => (x.endsWith('*') ? y.startsWith(x.slice(0, -1)) : x === y);

/**
 * Whether a profile's tool list (`AgentProfile.tools`; undefined: every tool) offers the tool named `tool`: a
 * name ending in `*` matches a prefix. A runner honouring profiles offers the model only these tools.
 */
export function offersTool(tools: readonly string[] | undefined, tool: string): boolean {
  return !tools || tools.some((p) => covers(p, tool));
}

async function resolveProfile(name: string, p: ProfileSettings, base: BaseModelSettings, issues: ConfigIssue[]): Promise<AgentProfile | undefined> {
  const path = `profiles.${name}`;
  if (name === DEFAULT_PROFILE) {
    issues.push({ path, message: `"${DEFAULT_PROFILE}" names the base settings; choose another name` });
    return undefined;
  }
  const model = profileModel(base, p.model, `${path}.model`, issues);
  let systemPrompt = p.systemPrompt;
  if (p.systemPromptFile !== undefined) {
    if (p.systemPrompt !== undefined) issues.push({ path: `${path}.systemPromptFile`, message: 'set either systemPrompt or systemPromptFile, not both' });
    try {
      systemPrompt = (await readFile(resolve(p.systemPromptFile), 'utf8')).trim();
      if (!systemPrompt) issues.push({ path: `${path}.systemPromptFile`, message: `${p.systemPromptFile} is empty` });
    } catch (err) {
      issues.push({
        path: `${path}.systemPromptFile`,
        message: `cannot read ${p.systemPromptFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      });
    }
  }
  if (!model) return undefined;
  return {
    name,
    model,
    ...(systemPrompt && { systemPrompt }),
    ...(p.tools && { tools: p.tools }),
    ...(p.toolPolicy && { toolPolicy: p.toolPolicy }),
    ...(p.inputPolicy && { inputPolicy: p.inputPolicy }),
    ...(p.skills && { skills: p.skills }),
    ...(p.memory === false && { memory: false as const }),
    ...(typeof p.memory === 'object' && p.memory.inGroups === true && { memory: { inGroups: true as const } }),
    ...(p.voice && { voice: p.voice }),
  };
}

/** The `models` a conversation may switch to, resolved on the base model (`model.fallbacks` stay with a model that keeps the base's). */
function namedModels(base: BaseModelSettings, models: Record<string, ProfileModelSettings>, issues: ConfigIssue[]): Record<string, BaseModelSettings> {
  const out: Record<string, BaseModelSettings> = {};
  for (const [name, m] of Object.entries(models)) {
    if (name.toLowerCase() === DEFAULT_PROFILE) {
      issues.push({ path: `models.${name}`, message: '"/model default" goes back to the default model; choose another name' });
      continue;
    }
    const model = profileModel(base, m, `models.${name}`, issues);
    if (model) out[name] = model;
  }
  return out;
}

/** The models of `names` (all of them when absent); an unknown name is an issue. Undefined when none is allowed. */
function allowedModels(
  all: Record<string, BaseModelSettings>,
  names: string[] | undefined,
  path: string,
  issues: ConfigIssue[],
): Record<string, BaseModelSettings> | undefined {
  const picked = names ?? Object.keys(all);
  const out: Record<string, BaseModelSettings> = {};
  picked.forEach((name, i) => {
    const model = all[name];
    if (model) out[name] = model;
    else if (names) issues.push({ path: `${path}.${i}`, message: `no model named "${name}" in models` });
  });
  return Object.keys(out).length > 0 ? out : undefined;
}

/**
 * The base model with the profile's changes (`deriveModel`); `model.fallbacks`
 * stay only while the profile keeps the base model.
 */
function profileModel(base: BaseModelSettings, m: ProfileModelSettings | undefined, path: string, issues: ConfigIssue[]): BaseModelSettings | undefined {
  if (!m) return base;
  const { fallbacks, ...own } = base;
  const model = deriveModel(own, m);
  if (!model) {
    issues.push({ path: `${path}.contextWindow`, message: `unknown model "${m.name ?? base.name}": set its context window in tokens` });
    return undefined;
  }
  const api = apiProblem(model);
  if (api) {
    issues.push({ path: `${path}.api`, message: api });
    return undefined;
  }
  const sameModel = model.provider === base.provider && model.name === base.name;
  return sameModel && fallbacks ? { ...model, fallbacks } : model;
}
