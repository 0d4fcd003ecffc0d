/**
 * The allow-list fold: a channel section's `allowedUsers` (`allowedSenders`
 * for webhooks), `allowedChats` and `admins` become `access.channels.<id>`
 * `users`, `groups` and `admins`, with policy `allowlist` when a list was not
 * empty. Nobody the old lists refused is let in, with one exception the
 * notes name (a listed user's own direct chat, see below).
 *
 * Old meaning: a message passed when its sender was in `allowedUsers` (empty:
 * anyone) and its chat in `allowedChats` (empty: any), in direct and group
 * chats alike, checked before commands; a refused message got no answer.
 * New meaning (the access gate): a direct chat passes when the sender is in
 * `users`; a group chat when it is in `groups` (with `members`, the sender
 * must be in `users` too); a refused sender is told once per notice window.
 */
import { type Deprecation, isObj, type MigrationSink, type Obj, objAt } from './migration-kit.js';

/** How one built-in channel named its allow-list keys, and what its chat ids are. */
interface ChannelShape {
  users?: string;
  chats?: boolean;
  /** What an `allowedChats` entry names: a direct chat whose id is the user's id, a group, or a direct chat the new model cannot list. */
  chatKind?(id: string): 'user' | 'group' | 'unlisted-dm';
}

const SHAPES: Record<string, ChannelShape> = {
  // A private chat's id is the user's id; group and channel ids are negative.
  telegram: { users: 'allowedUsers', chats: true, chatKind: (id) => (id.startsWith('-') ? 'group' : 'user') },
  // Guild channels (and thread parents, guilds); a DM channel id is not the user's id.
  discord: { users: 'allowedUsers', chats: true, chatKind: () => 'group' },
  // C… and G… are channels, D… a direct message channel (not the user's id).
  slack: { users: 'allowedUsers', chats: true, chatKind: (id) => (id.startsWith('D') ? 'unlisted-dm' : 'group') },
  whatsapp: { users: 'allowedUsers' },
  web: {},
};

const ids = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : []);
const sameSet = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x) => b.includes(x)) && b.every((x) => a.includes(x));

/** The channel sections the fold looks at: `[channel id, section path, section, shape]`. */
function channelSections(raw: Obj): Array<[string, string, Obj, ChannelShape]> {
  const channels = raw.channels;
  if (!isObj(channels)) return [];
  const out: Array<[string, string, Obj, ChannelShape]> = [];
  for (const [id, shape] of Object.entries(SHAPES)) {
    const section = channels[id];
    if (isObj(section)) out.push([id, `channels.${id}`, section, shape]);
  }
  const webhooks = channels.webhooks;
  if (isObj(webhooks)) {
    for (const [name, section] of Object.entries(webhooks)) {
      if (isObj(section)) out.push([`webhook:${name}`, `channels.webhooks.${name}`, section, { users: 'allowedSenders' }]);
    }
  }
  return out;
}

/** The old lists of one section (removed from it), or undefined when it has none. */
function takeOld(section: Obj, shape: ChannelShape) {
  const usersKey = shape.users;
  const has = {
    users: usersKey !== undefined && usersKey in section,
    chats: shape.chats === true && 'allowedChats' in section,
    admins: 'admins' in section,
  };
  if (!has.users && !has.chats && !has.admins) return undefined;
  const lists = { users: usersKey ? ids(section[usersKey]) : [], chats: has.chats ? ids(section.allowedChats) : [], admins: ids(section.admins) };
  if (usersKey) delete section[usersKey];
  delete section.allowedChats;
  delete section.admins;
  return { has, lists, usersKey: usersKey ?? 'allowedUsers' };
}

/** Moves the allow-lists and admins of every channel section into `access.channels`. */
export function migrateAccess(raw: Obj, sink: MigrationSink): void {
  for (const [id, path, section, shape] of channelSections(raw)) {
    const old = takeOld(section, shape);
    if (!old) continue;
    const { users, chats, admins } = old.lists;
    const target = `access.channels.${id}`;
    const access = objAt(objAt(raw, 'access'), 'channels');
    const existing = isObj(access[id]) ? (access[id] as Obj) : undefined;
    const out: Obj = existing ?? {};
    const notes = allowList(id, shape, users, chats, out, target, sink);
    // An admin outside a non-empty allowedUsers was refused before any command: keeping them out keeps that.
    const kept = users.length > 0 ? admins.filter((a) => users.includes(a)) : admins;
    if (kept.length < admins.length)
      notes.admins = `${admins.filter((a) => !kept.includes(a)).join(', ')} left out: not in ${old.usersKey}, so they could not talk to the bot`;
    if (kept.length > 0) setList(out, 'admins', kept, `${target}.admins`, `${path}.admins`, sink);
    if (Object.keys(out).length > 0 && !existing) access[id] = out;
    const push = (oldKey: string, newKey: string, note: string | undefined) =>
      sink.deprecations.push({ oldKey: `${path}.${oldKey}`, newKey, ...(note && { note }) } satisfies Deprecation);
    if (old.has.users) push(old.usersKey, `${target}.users`, notes.users);
    if (old.has.chats) push('allowedChats', `${target}.groups`, notes.chats);
    if (old.has.admins) push('admins', `${target}.admins`, notes.admins);
  }
}

/** Sets `out.policy`, `users`, `groups`, `members` from the old lists; returns notes on what differs. */
function allowList(
  id: string,
  shape: ChannelShape,
  users: string[],
  chats: string[],
  out: Obj,
  target: string,
  sink: MigrationSink,
): { users?: string; chats?: string; admins?: string } {
  const notes: { users?: string; chats?: string; admins?: string } = {};
  if (users.length === 0 && chats.length === 0) return notes;
  const dmUsers = chats.filter((c) => shape.chatKind?.(c) === 'user');
  const groups = chats.filter((c) => shape.chatKind?.(c) === 'group');
  const unlisted = chats.filter((c) => shape.chatKind?.(c) === 'unlisted-dm');
  // With allowedUsers, every sender had to be listed, in groups too: `members` keeps that.
  const newUsers = users.length > 0 ? users : dmUsers;
  const policy = out.policy;
  if (policy !== undefined && policy !== 'allowlist') {
    sink.issues.push({
      path: `${target}.policy`,
      message: `is ${String(policy)}, but the deprecated allow-lists of channel ${id} restrict it to listed people: set policy allowlist (or pairing) in ${target} and remove the old lists`,
    });
    return notes;
  }
  out.policy = 'allowlist';
  setList(out, 'users', newUsers, `${target}.users`, `the old allow-lists of ${id}`, sink);
  if (groups.length > 0) setList(out, 'groups', groups, `${target}.groups`, `the old allowedChats of ${id}`, sink);
  if (users.length > 0 && groups.length > 0) {
    if (out.members !== undefined && out.members !== true)
      sink.issues.push({ path: `${target}.members`, message: `must be true: the old allowedUsers of ${id} applied in groups too` });
    out.members = true;
  }
  if (users.length > 0 && chats.length === 0 && id !== 'whatsapp') {
    notes.users = `listed users were answered in any group chat; now only in groups listed in ${target}.groups`;
  }
  if (users.length > 0 && chats.length > 0) {
    const dmRefused = users.filter((u) => !dmUsers.includes(u));
    if (dmRefused.length > 0) notes.chats = `${dmRefused.join(', ')} may now also write to the bot in a direct chat (allowedChats did not list it)`;
  }
  if (id === 'discord' && chats.length > 0) {
    notes.chats = `Discord guild ids, thread parents and DM channel ids no longer match: list each guild channel id in ${target}.groups and people in ${target}.users`;
  }
  if (unlisted.length > 0) notes.chats = `direct message channels ${unlisted.join(', ')} cannot be listed: put the people in ${target}.users`;
  return notes;
}

/** Sets a list, or reports a conflict with one already there. */
function setList(out: Obj, key: string, value: string[], path: string, from: string, sink: MigrationSink): void {
  const current = out[key];
  if (current !== undefined && !sameSet(ids(current), value)) {
    sink.issues.push({ path, message: `is [${ids(current).join(', ')}], but ${from} say [${value.join(', ')}]: keep one of the two` });
    return;
  }
  out[key] = value;
}
