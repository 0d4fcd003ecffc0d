/** `examples/feishu/` asks for exactly the scopes the Feishu / Lark channel uses, and its config section is valid. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { feishuConfigSchema } from '../../plugins/feishu/config.js';

const read = (name: string) => JSON.parse(readFileSync(new URL(`../../examples/feishu/${name}`, import.meta.url), 'utf8'));
const docs = readFileSync(new URL('../../docs/channels.md', import.meta.url), 'utf8');

describe('the Feishu / Lark app example', () => {
  it('lists exactly the scopes the setup names, as a batch import', () => {
    const { scopes } = read('scopes.json');
    expect(scopes.user).toEqual([]);
    expect([...scopes.tenant].sort()).toEqual([
      'im:message',
      'im:message.group_at_msg:readonly',
      'im:message.p2p_msg:readonly',
      'im:message.reactions:write_only',
      'im:message:send_as_bot',
      'im:resource',
    ]);
    for (const scope of scopes.tenant) expect(docs).toContain(`\`${scope}\``);
  });

  it('has a channel section the schema accepts, on the long connection', () => {
    const parsed = feishuConfigSchema.safeParse(read('steerbot.json').channels.feishu);
    expect(parsed.success).toBe(true);
    expect(parsed.data).toMatchObject({ mode: 'ws', domain: 'feishu' });
  });

  it('refuses http mode without the Encrypt Key and Verification Token', () => {
    const parsed = feishuConfigSchema.safeParse({ ...read('steerbot.json').channels.feishu, mode: 'http' });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((i) => i.path.join('.')).sort()).toEqual(['encryptKey', 'verificationToken']);
  });
});
