/**
 * The console's access API: waiting pairing codes, refusals and approved
 * identities (`GET /console/api/access`); approving a code, linking and
 * unlinking accounts, purging an identity (POST). Bad bodies get 400 and
 * change nothing.
 */
import { z } from 'zod';
import type { ChannelPlugin } from '../../src/channel.js';
import { InvalidInputError } from '../../src/errors.js';
import { json, type RouteResponse, readJsonBody } from '../../src/http/routes.js';
import { APPROVED_NOTICE } from '../access/commands.js';
import type { AccessStore } from '../access/store.js';
import type { ApiRoute } from '../feature.js';

const account = z.string().min(3).max(257);

/** Registers the access routes under the console's API. */
export function registerAccessApi(api: ApiRoute, store: AccessStore, channels: readonly ChannelPlugin[]): void {
  api('GET', '/access', async () => {
    const [codes, refusals, paired] = await Promise.all([store.waitingCodes(), store.refusals(), store.pairedIdentities()]);
    // Only hashes of the codes are kept: the console shows who waits, and approves by the code the person passes on.
    return json(200, { waiting: codes, refusals, paired });
  });
  api('POST', '/access/pair', async (req) => {
    const body = readJsonBody(req, z.strictObject({ code: z.string().min(1).max(32) }));
    if (!body.ok) return body.response;
    const r = await store.approve(body.value.code);
    if (r.kind !== 'ok' || r.value.kind !== 'paired') return json(404, { error: 'no such pairing code, or it expired' });
    const { record, identity } = r.value;
    const out = channels.find((c) => c.id === record.channel)?.outbound;
    await out?.send(record.conversationId, APPROVED_NOTICE, {}).catch(() => undefined);
    return json(200, { approved: record.account, identity });
  });
  // An account to link is `<channel id>:<user id>` on a channel this host runs: a typo would link an account that can never talk.
  const prefixes = channels.map((c) => `${c.id}:`);
  const channelAccount = account.refine(
    (a) => prefixes.some((p) => a.length > p.length && a.startsWith(p)),
    'an account is `<channel id>:<user id>` on a channel this host runs',
  );
  api('POST', '/access/link', async (req) => {
    const body = readJsonBody(req, z.strictObject({ account: channelAccount, to: account }));
    if (!body.ok) return body.response;
    return guarded(async () => json(200, await store.identities.link(body.value.account, body.value.to)));
  });
  api('POST', '/access/unlink', async (req) => {
    const body = readJsonBody(req, z.strictObject({ account }));
    if (!body.ok) return body.response;
    return guarded(async () => json(200, { left: (await store.identities.unlink(body.value.account)) ?? null }));
  });
  api('POST', '/access/purge', async (req) => {
    const body = readJsonBody(req, z.strictObject({ identity: account }));
    if (!body.ok) return body.response;
    return guarded(async () => json(200, { unlinked: await store.identities.purge(body.value.identity) }));
  });
}

/** A bad id is the caller's mistake: 400, nothing written. */
export async function guarded(run: () => Promise<RouteResponse>): Promise<RouteResponse> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof InvalidInputError) return json(400, { error: err.message });
    throw err;
  }
}
