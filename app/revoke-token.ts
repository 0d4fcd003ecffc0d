/**
 * `steerbot revoke-token <name>`: an operator revokes the API token the
 * configuration names `name` (`host.api.tokens`, or `default` for
 * `host.api.token`). Every host refuses it (401) from its next request, no
 * restart needed; a new token under the same name is not revoked.
 */
import { revokeApiToken } from '../host/api-tokens.js';
import { redisFromConfig } from '../src/redis/connection.js';
import type { SteerbotConfig } from './config.js';

/** Revokes the token named `name`; resolves with the line to print and whether a token was revoked. */
export async function revokeTokenFromCli(config: SteerbotConfig, name: string): Promise<{ ok: boolean; line: string }> {
  const redis = redisFromConfig(config.redis, { connectionName: 'steerbot-cli' });
  try {
    const ok = await revokeApiToken(redis, config.redis.prefix, config.host.api, name);
    return ok ? { ok, line: `Revoked API token ${name}.` } : { ok, line: `No API token is named ${name} in this configuration.` };
  } finally {
    redis.disconnect();
  }
}
