/**
 * The console's people API: one person (`GET /console/api/people/person?id=`,
 * an identity or any of its accounts) with their accounts, approval, how each
 * account's channel admits it, and their usage against the identity budgets;
 * and the approved people's usage (`GET /console/api/people/usage`). Reads
 * only; a bad id gets 400.
 *
 * The usage list covers the approved identities (the `paired` set, at most
 * `USAGE_LIST_MAX`): the people an operator let in are the ones whose
 * spending they watch, and the set is an index that already exists. Anyone
 * else is looked up by id: listing every identity with counters would take a
 * SCAN of the keyspace.
 */

import type { AccessConfig } from '../../src/config/schema.js';
import { json, type RouteRequest } from '../../src/http/routes.js';
import type { BudgetLimits, Budgets, BudgetUsage } from '../../src/people/budget.js';
import type { AccessStore } from '../access/store.js';
import type { ApiRoute } from '../feature.js';
import { guarded } from './access-api.js';

/** Most identities the usage list reads. */
const USAGE_LIST_MAX = 200;

/** What the people API reads. */
export interface PeopleApiDeps {
  store: AccessStore;
  /** The `access` section's channel settings (policy, listed users). Default: every channel open. */
  channels?: AccessConfig['channels'] | undefined;
  /** The spending budgets; identity usage is counted only when `budgets.identity` sets a limit. Default: none. */
  budgets?: Budgets | undefined;
}

/** How one account's channel admits it. */
interface AccountView {
  account: string;
  /** The channel's access policy (`open` when the `access` section does not name it). */
  policy: 'open' | 'allowlist' | 'pairing';
  /** The user id is in the channel's `users` list. */
  listed: boolean;
}

/** Registers the people routes under the console's API. */
export function registerPeopleApi(api: ApiRoute, d: PeopleApiDeps): void {
  api('GET', '/people/person', async (req) => {
    const id = queryId(req);
    if (id === undefined) return json(400, { error: 'id: expected an identity or account id (`<channel id>:<user id>`)' });
    return guarded(async () => json(200, await person(d, id)));
  });
  api('GET', '/people/usage', async () => {
    const ids = (await d.store.pairedIdentities(USAGE_LIST_MAX)).sort();
    const limits = d.budgets?.identityLimits;
    const budgets = limits ? d.budgets : undefined;
    const usage = budgets ? await Promise.all(ids.map((i) => budgets.usage(i))) : [];
    const people = ids
      .map((identity, i) => ({ identity, usage: usage[i] ?? null }))
      .sort((a, b) => (b.usage?.tokensThisMonth ?? 0) - (a.usage?.tokensThisMonth ?? 0));
    return json(200, { counted: budgets !== undefined, limits: limits ?? null, resets: resets(d.budgets), people, max: USAGE_LIST_MAX });
  });
}

/** The `id` query parameter, trimmed; undefined when missing or empty. */
function queryId(req: RouteRequest): string | undefined {
  const id = req.query.id?.trim();
  return id ? id : undefined;
}

/** One person as the console shows them. Throws InvalidInputError for a bad id. */
async function person(d: PeopleApiDeps, id: string) {
  const identity = await d.store.identities.resolveAccount(id);
  const limits = d.budgets?.identityLimits;
  const [accounts, paired, usage] = await Promise.all([
    d.store.identities.accounts(identity),
    d.store.isPaired(identity),
    limits && d.budgets ? d.budgets.usage(identity) : Promise.resolve<BudgetUsage | null>(null),
  ]);
  return {
    query: id,
    identity,
    linked: accounts.length > 1,
    accounts: accounts.map((a) => accountView(d.channels ?? {}, a)),
    paired,
    usage,
    limits: (limits ?? null) satisfies BudgetLimits | null,
    resets: resets(d.budgets),
  };
}

/** When the hour, day and month windows end (ms), or null without budgets. */
function resets(budgets: Budgets | undefined) {
  if (!budgets) return null;
  const w = budgets.windows();
  return { hour: w.hourEnds, day: w.dayEnds, month: w.monthEnds };
}

/** The account's channel settings: the longest channel id in the `access` section the account starts with (channel ids may hold `:`). */
function accountView(channels: AccessConfig['channels'], account: string): AccountView {
  let best: string | undefined;
  for (const channel of Object.keys(channels)) {
    if (account.startsWith(`${channel}:`) && (best === undefined || channel.length > best.length)) best = channel;
  }
  const settings = best === undefined ? undefined : channels[best];
  if (!settings || best === undefined) return { account, policy: 'open', listed: false };
  return { account, policy: settings.policy, listed: settings.users.includes(account.slice(best.length + 1)) };
}
