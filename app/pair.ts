/**
 * `steerbot pair <code>`: an operator approves a pairing code from the
 * command line, against the Redis the configuration names. Not rate-limited
 * (whoever can run it can read the configuration). The person is not told:
 * no channel runs in this process. The name printed is the one the person
 * chose, so it is printed with its control characters escaped (`printable`).
 */
import { AccessStore } from '../host/access/store.js';
import { IdentityStore } from '../src/people/identity.js';
import { redisFromConfig } from '../src/redis/connection.js';
import type { SteerbotConfig } from './config.js';
import { printable } from './terminal-text.js';

/** Approves `code`; resolves with the line to print and whether it was approved. */
export async function pairFromCli(config: SteerbotConfig, code: string): Promise<{ ok: boolean; line: string }> {
  const redis = redisFromConfig(config.redis, { connectionName: 'steerbot-cli' });
  try {
    const prefix = config.redis.prefix;
    const store = new AccessStore(redis, prefix, config.access, new IdentityStore({ redis, prefix }));
    const r = await store.approve(code);
    if (r.kind !== 'ok' || r.value.kind !== 'paired') return { ok: false, line: 'No such pairing code, or it expired.' };
    const { record, identity } = r.value;
    return { ok: true, line: printable(`Approved ${record.name ? `${record.name} (${record.account})` : record.account}; identity ${identity}.`) };
  } finally {
    redis.disconnect();
  }
}
