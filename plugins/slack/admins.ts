/**
 * Whether a Slack user administers the bot's own workspace. `users.info`
 * answers `is_admin`, `is_owner` and `is_primary_owner` for anyone the bot
 * can see, and a Slack Connect channel holds members of other organizations
 * whose user objects carry their own workspace's `team_id` (and
 * `is_stranger`): their flags say what they are at home. Taken as they
 * come, the owner of any workspace connected to a shared channel would be
 * an admin of the bot's conversations there. So the flags count only for a
 * user of the bot's workspace: `team_id` equal to `auth.test`'s and, on
 * Enterprise Grid, the same org. A stranger, a missing id or another org
 * answers false. One `users.info` per ask (the host caches answers);
 * `auth.test` is asked once per process.
 */
import type { WebClient } from '@slack/web-api';
import { call } from './api.js';
import type { SlackSelf } from './sent-lookup.js';

/** What `users.info` tells about a user, as far as this reads it. */
interface UserInfo {
  team_id?: string;
  enterprise_id?: string;
  enterprise_user?: { enterprise_id?: string };
  is_stranger?: boolean;
  is_admin?: boolean;
  is_owner?: boolean;
  is_primary_owner?: boolean;
}

/** Slack user ids: `U…` or `W…` (Enterprise Grid), upper-case letters and digits. */
const USER_ID = /^[A-Z0-9]{1,32}$/;

// Slack gives an empty string for an absent id in some answers.
const id = (v: string | undefined) => (v === undefined || v === '' ? undefined : v);

/** Whether `user` belongs to the bot's workspace (and org): anything unsure is no. */
function ofBotsWorkspace(user: UserInfo, self: SlackSelf): boolean {
  const team = id(self.teamId);
  if (user.is_stranger === true || team === undefined || id(user.team_id) !== team) return false;
  const orgs = [id(user.enterprise_id), id(user.enterprise_user?.enterprise_id)].filter((e) => e !== undefined);
  const org = id(self.enterpriseId);
  return org === undefined ? orgs.length === 0 : orgs.length > 0 && orgs.every((e) => e === org);
}

/** True when `userId` is an admin or owner of the bot's own workspace. Throws ChannelApiError when Slack cannot be asked. */
export async function isWorkspaceAdmin(web: WebClient, token: string, self: () => Promise<SlackSelf>, userId: string): Promise<boolean> {
  if (!USER_ID.test(userId)) return false;
  const me = await self();
  if (id(me.teamId) === undefined) return false;
  const res = await call('users.info', () => web.users.info({ user: userId }), token);
  const user: UserInfo | undefined = res.user;
  if (!user || !ofBotsWorkspace(user, me)) return false;
  return user.is_admin === true || user.is_owner === true || user.is_primary_owner === true;
}
