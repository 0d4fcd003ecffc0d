/**
 * Who may create or cancel a schedule from inside a run (the agent's schedule
 * tools). A schedule's fires are charged to the run's accountable identity,
 * so only that person may have one made: a run that also answers someone
 * else (a message steered into it, or joined to it) creates none, and a
 * member cannot spend another's budget by asking in their run. Cancelling
 * follows the rule of `/unschedule`, which group chats reserve to admins,
 * with the creator's exception: a schedule another identity owns (or the
 * operator's: no owner) is cancelled only when every person whose message
 * the run answers is its owner or an admin of the chat. A run no person's
 * message started (a fire) cancels only its own accountable identity's
 * schedules.
 */
import type { Schedule } from './spec.js';

/** What the rules need to know about the run. */
export interface RunRuleDeps {
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

/** Undefined when the run may create a schedule (owned by its accountable identity); else why not, in words the model can pass on. */
export async function createRefusal(d: Pick<RunRuleDeps, 'runIdentity' | 'requesters' | 'identityOf' | 'current'>): Promise<string | undefined> {
  if (!(await answersSomeoneElse(d))) return undefined;
  const who = d.runIdentity === undefined ? "the bot's operator" : 'the person who started it';
  return (
    `schedules made in this run are charged to ${who}, and this run also answers someone else: nothing was scheduled. ` +
    `Only ${who} can create schedules in this run; anyone else asks again in a message of their own once this answer is sent (the schedule is then theirs)`
  );
}

/**
 * Whether the run answers a person who is not its accountable identity (links followed): what it does on that
 * identity's account (schedules, notes) is then not theirs alone to have asked for. A run of the operator's (no
 * identity) answers someone else whenever it answers anyone.
 */
export async function answersSomeoneElse(d: Pick<RunRuleDeps, 'runIdentity' | 'requesters' | 'identityOf' | 'current'>): Promise<boolean> {
  const owner = d.runIdentity === undefined ? undefined : await d.current(d.runIdentity);
  for (const userId of d.requesters()) if (owner === undefined || (await d.identityOf(userId)) !== owner) return true;
  return false;
}

/** Undefined when the run may cancel `s`; else why not, in words the model can pass on. */
export async function cancelRefusal(s: Pick<Schedule, 'id' | 'owner'>, d: RunRuleDeps): Promise<string | undefined> {
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
