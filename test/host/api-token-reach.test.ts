/**
 * Which conversations a token's `conversations` entries reach: an entry
 * covers the chat and its topics and threads by the rule bindings use
 * (`:`, `/`, `;`), never a longer id that only starts the same.
 */
import { describe, expect, it } from 'vitest';
import { type ApiToken, ApiTokens } from '../../host/api-tokens.js';

function tokenFor(conversations: string[]): { tokens: ApiTokens; token: ApiToken } {
  const token: ApiToken = { name: 't', digest: Buffer.alloc(32), scopes: new Set(['send']), conversations, ratePerMinute: 60 };
  // `reaches` reads no Redis.
  return { tokens: new ApiTokens([token], undefined as never, 'p'), token };
}

describe("an API token's conversations", () => {
  it('reach a Telegram topic, a Matrix thread and a Teams channel thread of the chat they name', () => {
    const { tokens, token } = tokenFor(['telegram:-1001', 'matrix:!room:example.org', 'teams:19:abc@thread.tacv2']);
    expect(tokens.reaches(token, 'telegram:-1001:7', 'telegram')).toBe(true);
    expect(tokens.reaches(token, 'matrix:!room:example.org/$root', 'matrix')).toBe(true);
    expect(tokens.reaches(token, 'teams:19:abc@thread.tacv2;messageid=42', 'teams')).toBe(true);
  });

  it('do not reach a chat whose id only starts the same', () => {
    const { tokens, token } = tokenFor(['telegram:-1001', 'matrix:!room:example.org']);
    expect(tokens.reaches(token, 'telegram:-10012', 'telegram')).toBe(false);
    expect(tokens.reaches(token, 'matrix:!room:example.organisation', 'matrix')).toBe(false);
  });
});
