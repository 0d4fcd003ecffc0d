/**
 * Who a person is across channels: the identity a platform user maps to.
 * Budgets and memory key by it, so a person's linked accounts share them.
 */

/** Maps a channel's user to their identity id. Must not throw for a well-formed user id. */
export type IdentityResolver = (channelId: string, userId: string) => Promise<string>;

/** The identity of an account nobody linked: `<channel id>:<user id>`. */
export const defaultIdentity: IdentityResolver = async (channelId, userId) => `${channelId}:${userId}`;
