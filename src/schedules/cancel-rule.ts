/**
 * Who may cancel a schedule from inside a run (the agent's schedule tools):
 * the rule of `/unschedule`, which group chats reserve to admins, with the
 * creator's exception. A schedule another identity owns (or the operator's:
 * no owner) is cancelled only when every person whose message the run
 * answers is its owner or an admin of the chat, so a member cannot steer the
 * agent into removing someone else's schedule. A run no person's message
 * started (a fire) cancels only its own accountable identity's schedules.
 */
import type { Schedule } from './spec.js';

/** What the rule needs to know about the run. */
export interface CancelRuleDeps {
  /** The run's accountable identity; undefined: the operator. */
  runIdentity: string | undefined;
  /** Platform user ids of the people whose messages the run answers so far. */
  requesters(): readonly string[];
  /** The identity of a user of the conversation (links followed); undefined when none can be made. */
  identityOf(userId: string): Promise<string | undefined>;
  /** An identity as it is now (a link may have merged it since the schedule was made). */
  current(identity: string): Promise<string>;
  /** Whether a user administers the chat (configured admins, else the platform). Throws when the platform cannot tell. */
  isAdmin(userId: string): Promise<boolean>;
}

/** Undefined when the run may cancel `s`; else why not, in words the model can pass on. */
export async function cancelRefusal(s: Pick<Schedule, 'id' | 'owner'>, d: CancelRuleDeps): Promise<string | undefined> {
  const owner = s.owner === undefined ? undefined : await d.current(s.owner);
  const requesters = d.requesters();
  const notYours = `schedule ${s.id} was set up by someone else: only the person who set it up or an admin of this chat can cancel it (an admin can also use /unschedule ${s.id})`;
  if (requesters.length === 0) return owner !== undefined && owner === d.runIdentity ? undefined : notYours;
  for (const userId of requesters) {
    if (owner !== undefined && (await d.identityOf(userId)) === owner) continue;
    let admin: boolean;
    try {
      admin = await d.isAdmin(userId);
    } catch {
      return `could not check whether the person asking is an admin of this chat; schedule ${s.id} was not cancelled (try again later)`;
    }
    if (!admin) return notYours;
  }
  return undefined;
}
