/**
 * Whether a user administers the guild a Discord channel belongs to: the
 * guild's owner, or a member whose roles (with `@everyone`) grant
 * Administrator, Manage Guild or Manage Messages. Three REST calls (channel,
 * guild, member); the host caches the answer. Channel permission overwrites
 * are not applied: moderating the bot is a guild-level right here.
 */
import { type REST, Routes } from 'discord.js';

const ADMINISTRATOR = 1n << 3n;
const MANAGE_GUILD = 1n << 5n;
const MANAGE_MESSAGES = 1n << 13n;
const ADMIN_BITS = ADMINISTRATOR | MANAGE_GUILD | MANAGE_MESSAGES;

interface ChannelInfo {
  guild_id?: string | null;
}
interface GuildInfo {
  owner_id: string;
  roles: Array<{ id: string; permissions: string }>;
}
interface MemberInfo {
  roles: string[];
}

/** `call` wraps each REST call (error mapping). A DM (no guild) is the user's own chat: true. A user not in the guild: false. */
export async function isGuildAdmin(
  rest: REST,
  channel: string,
  userId: string,
  call: <T>(what: string, fn: () => Promise<unknown>) => Promise<T>,
): Promise<boolean> {
  const info = await call<ChannelInfo>('isAdmin', () => rest.get(Routes.channel(channel)));
  const guildId = info.guild_id;
  if (!guildId) return true;
  const guild = await call<GuildInfo>('isAdmin', () => rest.get(Routes.guild(guildId)));
  if (guild.owner_id === userId) return true;
  let member: MemberInfo;
  try {
    member = await call<MemberInfo>('isAdmin', () => rest.get(Routes.guildMember(guildId, userId)));
  } catch (err) {
    if ((err as { status?: number }).status === 404) return false;
    throw err;
  }
  const granted = new Set([guildId, ...member.roles]);
  let bits = 0n;
  for (const role of guild.roles) if (granted.has(role.id)) bits |= BigInt(role.permissions);
  return (bits & ADMIN_BITS) !== 0n;
}
