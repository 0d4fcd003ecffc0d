/**
 * The profile fold: a channel's input `policy`, the local agent's `personas`
 * and its per-channel `toolPolicy.channels` become profiles bound to their
 * channel or chat.
 *
 * Before, a conversation's profile (identity, then longest chat, then
 * channel binding) was layered over these: a profile without an input policy
 * took the channel's, one without a prompt took the longest persona, and its
 * tool policy sat above the channel's. A binding now picks one profile, so
 * every channel and chat that any of them names gets a profile with what it
 * had before filled in: the fold keeps the old result for every conversation
 * whose profile comes from a chat or channel binding. Profiles bound to an
 * identity follow a person across chats and cannot take a chat's settings:
 * the warning says so when that drops something.
 */
import { channelResolver } from '../src/channel.js';
import { isObj, type MigrationSink, type Obj, objAt } from './migration-kit.js';

type ToolScope = { default?: string; tools?: Record<string, string> };

/** What a chat or channel had from the old keys. */
interface OldScope {
  inputPolicy?: string;
  persona?: { systemPrompt?: string; systemPromptFile?: string; notes?: boolean };
  toolPolicy?: ToolScope;
}

const CHANNEL_POLICY_SECTIONS = ['telegram', 'discord', 'slack', 'whatsapp', 'web'];

/** A persona key is a channel id (`telegram`, `webhook:crm`) or a conversation id (or a prefix of one). */
const isChannelKey = (k: string) => !k.includes(':') || (k.startsWith('webhook:') && k.split(':').length === 2);

/** Moves channel policies, personas and per-channel tool policies into profiles and bindings. */
export function migrateProfiles(raw: Obj, sink: MigrationSink): void {
  const old = collectOld(raw);
  if (old.size === 0) return;
  const profiles = objAt(raw, 'profiles');
  const bindings: Obj[] = Array.isArray(raw.bindings) ? (raw.bindings as unknown[]).filter(isObj) : [];
  raw.bindings = bindings;
  const bound = (key: 'channel' | 'chat') => new Map(bindings.filter((b) => typeof b[key] === 'string').map((b) => [b[key] as string, b]));
  const byChannel = bound('channel');
  const byChat = bound('chat');
  const channelScopes = [...new Set([...[...old.keys()].filter(isChannelKey), ...byChannel.keys()])];
  const chatScopes = [...new Set([...[...old.keys()].filter((k) => !isChannelKey(k)), ...byChat.keys()])];
  const channelOf = channelResolver(channelScopes);
  const chatOf = channelResolver(byChat.keys());
  const personaOf = channelResolver([...old.entries()].filter(([, s]) => s.persona).map(([k]) => k));
  const profileAt = (b: Obj | undefined): Obj => (b && isObj(profiles[b.profile as string]) ? (profiles[b.profile as string] as Obj) : {});
  // Computed from the file as written, before any profile is rewritten.
  const plans = [...channelScopes, ...chatScopes].map((scope) => {
    const channel = channelOf(scope);
    const binding = isChannelKey(scope) ? byChannel.get(scope) : (byChat.get(chatOf(scope) ?? '') ?? byChannel.get(channel ?? ''));
    const own = isChannelKey(scope) ? byChannel.get(scope) : byChat.get(scope);
    const base = profileAt(binding);
    const persona = old.get(personaOf(scope) ?? '')?.persona;
    const fromChannel = old.get(channel ?? '');
    if (own) checkConflicts(own.profile as string, profileAt(own), old.get(scope), sink);
    const effective = fill(base, persona, fromChannel);
    return { scope, own, effective, changed: !own || !sameJson(base, effective) };
  });
  const uses = new Map<string, number>();
  for (const b of bindings) uses.set(b.profile as string, (uses.get(b.profile as string) ?? 0) + 1);
  const names = new Map<string, string>();
  for (const { scope, own, effective, changed } of plans) {
    if (!changed) {
      if (own) names.set(scope, own.profile as string);
      continue;
    }
    if (Object.keys(effective).length === 0) continue;
    if (own && uses.get(own.profile as string) === 1) {
      profiles[own.profile as string] = effective;
      names.set(scope, own.profile as string);
      continue;
    }
    const name = freeName(profiles, own ? `${own.profile as string}-${slug(scope)}` : slug(scope));
    profiles[name] = effective;
    names.set(scope, name);
    if (own) own.profile = name;
    else bindings.push(isChannelKey(scope) ? { profile: name, channel: scope } : { profile: name, chat: scope });
  }
  note(raw, old, names, bindings, profiles, sink);
}

/** The old scopes by channel or chat key; removes the old keys from `raw`. */
function collectOld(raw: Obj): Map<string, OldScope> {
  const out = new Map<string, OldScope>();
  const at = (key: string) => out.get(key) ?? (out.set(key, {}).get(key) as OldScope);
  for (const [id, section] of policySections(raw)) {
    if (!('policy' in section)) continue;
    if (typeof section.policy === 'string') at(id).inputPolicy = section.policy;
    delete section.policy;
  }
  const agent = isObj(raw.agents) && isObj(raw.agents['local-agent']) ? raw.agents['local-agent'] : undefined;
  if (!agent) return out;
  if (isObj(agent.personas)) {
    for (const [key, p] of Object.entries(agent.personas)) if (isObj(p)) at(key).persona = p as OldScope['persona'] & Obj;
    delete agent.personas;
  }
  const toolPolicy = isObj(agent.toolPolicy) ? agent.toolPolicy : undefined;
  if (toolPolicy && isObj(toolPolicy.channels)) {
    for (const [ch, scope] of Object.entries(toolPolicy.channels)) if (isObj(scope)) at(ch).toolPolicy = scope as ToolScope;
    delete toolPolicy.channels;
    if (Object.keys(toolPolicy).length === 0) delete agent.toolPolicy;
  }
  return out;
}

/** The built-in channel sections that had an input `policy`, by channel id. */
function policySections(raw: Obj): Array<[string, Obj]> {
  const channels = isObj(raw.channels) ? raw.channels : {};
  const sections: Array<[string, Obj]> = CHANNEL_POLICY_SECTIONS.filter((id) => isObj(channels[id])).map((id) => [id, channels[id] as Obj]);
  if (isObj(channels.webhooks)) for (const [n, s] of Object.entries(channels.webhooks)) if (isObj(s)) sections.push([`webhook:${n}`, s]);
  return sections;
}

/** `base` with what the old keys gave a conversation it did not set itself (what the runtime used to fall back to). */
function fill(base: Obj, persona: OldScope['persona'], channel: OldScope | undefined): Obj {
  const out: Obj = structuredClone(base);
  if (persona && out.systemPrompt === undefined && out.systemPromptFile === undefined) {
    if (persona.systemPromptFile !== undefined) out.systemPromptFile = persona.systemPromptFile;
    else if (persona.systemPrompt !== undefined) out.systemPrompt = persona.systemPrompt;
  }
  if (channel?.inputPolicy !== undefined && out.inputPolicy === undefined) out.inputPolicy = channel.inputPolicy;
  const chan = channel?.toolPolicy;
  if (chan && (chan.default !== undefined || chan.tools !== undefined)) {
    const own = (isObj(out.toolPolicy) ? out.toolPolicy : {}) as ToolScope;
    const tools = { ...(chan.tools ?? {}), ...(own.tools ?? {}) };
    const def = own.default ?? chan.default;
    out.toolPolicy = { ...(def !== undefined && { default: def }), ...(Object.keys(tools).length > 0 && { tools }) };
  }
  return out;
}

/** An old key and the profile bound at the same scope saying different things is an error. */
function checkConflicts(name: string, profile: Obj, scope: OldScope | undefined, sink: MigrationSink): void {
  if (!scope) return;
  const path = `profiles.${name}`;
  if (scope.inputPolicy !== undefined && profile.inputPolicy !== undefined && profile.inputPolicy !== scope.inputPolicy) {
    sink.issues.push({
      path: `${path}.inputPolicy`,
      message: `is ${String(profile.inputPolicy)}, but the deprecated channel policy of its channel is ${scope.inputPolicy}: keep one of the two`,
    });
  }
  const p = scope.persona;
  const hasPrompt = profile.systemPrompt !== undefined || profile.systemPromptFile !== undefined;
  if (p && hasPrompt && (profile.systemPrompt !== p.systemPrompt || profile.systemPromptFile !== p.systemPromptFile)) {
    sink.issues.push({
      path: `${path}.systemPrompt`,
      message: 'differs from the deprecated persona of the same chat or channel (agents.local-agent.personas): keep one of the two',
    });
  }
  const t = scope.toolPolicy;
  const own = isObj(profile.toolPolicy) ? (profile.toolPolicy as ToolScope) : undefined;
  if (t && own) {
    const clash = Object.entries(t.tools ?? {}).some(([tool, mode]) => own.tools?.[tool] !== undefined && own.tools[tool] !== mode);
    if (clash || (t.default !== undefined && own.default !== undefined && t.default !== own.default)) {
      sink.issues.push({
        path: `${path}.toolPolicy`,
        message: 'differs from the deprecated agents.local-agent.toolPolicy.channels entry of its channel: keep one of the two',
      });
    }
  }
}

/** The deprecation entries, with what changes for profiles bound to identities. */
function note(raw: Obj, old: Map<string, OldScope>, names: Map<string, string>, bindings: Obj[], profiles: Obj, sink: MigrationSink): void {
  const identityProfiles = [...new Set(bindings.filter((b) => typeof b.identity === 'string').map((b) => b.profile as string))];
  const lost = (field: 'inputPolicy' | 'systemPrompt' | 'toolPolicy') => {
    const missing = identityProfiles.filter((n) => {
      const p = isObj(profiles[n]) ? (profiles[n] as Obj) : {};
      return p[field] === undefined && (field !== 'systemPrompt' || p.systemPromptFile === undefined);
    });
    return missing.length > 0 ? `profiles bound to an identity (${missing.join(', ')}) no longer take it: set ${field} in them` : undefined;
  };
  const agent = isObj(raw.agents) && isObj(raw.agents['local-agent']) ? raw.agents['local-agent'] : {};
  const notesFiles = Array.isArray(agent.notesFiles) && agent.notesFiles.length > 0;
  for (const [key, s] of old) {
    const target = names.get(key) ?? '<name>';
    const push = (oldKey: string, newKey: string, n: string | undefined) => sink.deprecations.push({ oldKey, newKey, ...(n && { note: n }) });
    if (s.inputPolicy !== undefined) {
      const section = key.startsWith('webhook:') ? `channels.webhooks.${key.slice('webhook:'.length)}` : `channels.${key}`;
      push(`${section}.policy`, `profiles.${target}.inputPolicy`, lost('inputPolicy'));
    }
    if (s.persona) {
      const notes =
        notesFiles && s.persona.notes !== false ? 'the notes files (notesFiles) are not appended to a profile prompt: add their text to it' : undefined;
      push(`agents.local-agent.personas.${key}`, `profiles.${target}.systemPrompt`, [notes, lost('systemPrompt')].filter(Boolean).join('; ') || undefined);
    }
    if (s.toolPolicy) push(`agents.local-agent.toolPolicy.channels.${key}`, `profiles.${target}.toolPolicy`, lost('toolPolicy'));
  }
}

const slug = (key: string) => key.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 56);

function freeName(profiles: Obj, wanted: string): string {
  let name = wanted;
  for (let i = 2; name in profiles; i++) name = `${wanted}-${i}`;
  return name;
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
