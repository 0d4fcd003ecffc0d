/** `examples/slack/manifest.yaml` asks for exactly the bot scopes and events the Slack channel uses, with Socket Mode and interactivity on. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const manifest = readFileSync(new URL('../../examples/slack/manifest.yaml', import.meta.url), 'utf8');

/** The `- item` lines right under the line `<key>:` (comments dropped). */
function listUnder(key: string): string[] {
  const lines = manifest.split('\n');
  const start = lines.findIndex((l) => l.trim() === `${key}:`);
  expect(start).toBeGreaterThanOrEqual(0);
  const items: string[] = [];
  for (const l of lines.slice(start + 1)) {
    const m = /^\s*-\s+([^\s#]+)/.exec(l);
    if (!m) break;
    items.push(m[1]!);
  }
  return items;
}

describe('the Slack app manifest', () => {
  it('lists exactly the scopes and events the channel needs', () => {
    expect(listUnder('bot').sort()).toEqual(
      [
        'app_mentions:read',
        'channels:history',
        'chat:write',
        'files:read',
        'groups:history',
        'im:history',
        'mpim:history',
        'reactions:write',
        'users:read',
      ].sort(),
    );
    expect(listUnder('bot_events').sort()).toEqual(['app_mention', 'message.channels', 'message.groups', 'message.im', 'message.mpim']);
  });

  it('turns Socket Mode, interactivity and the messages tab on', () => {
    expect(manifest).toMatch(/^\s+socket_mode_enabled: true$/m);
    expect(manifest).toMatch(/interactivity:\n\s+is_enabled: true/);
    expect(manifest).toMatch(/^\s+messages_tab_enabled: true$/m);
  });
});
