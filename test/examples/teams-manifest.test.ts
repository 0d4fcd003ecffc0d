/** `examples/teams/manifest.json` installs the bot in every scope the Teams channel answers in, names only commands steerbot has, and ships the icons Teams asks for. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url));
const manifest = JSON.parse(read('examples/teams/manifest.json').toString('utf8'));
const commandsDoc = read('docs/channels.md').toString('utf8').split('## Commands')[1]!.split(/^### /m)[0]!;

/** Width and height of a PNG, from its IHDR chunk. */
const pngSize = (bytes: Buffer) => {
  expect(bytes.subarray(1, 4).toString('latin1')).toBe('PNG');
  return [bytes.readUInt32BE(16), bytes.readUInt32BE(20)];
};

describe('the Teams app manifest', () => {
  it('is the bot of the app, in personal chats, teams and group chats', () => {
    const [bot] = manifest.bots;
    expect(manifest.bots).toHaveLength(1);
    expect(bot.botId).toBe(manifest.id);
    expect([...bot.scopes].sort()).toEqual(['groupChat', 'personal', 'team']);
    expect(bot.isNotificationOnly).toBe(false);
  });

  it('lists only commands steerbot answers', () => {
    const titles: string[] = manifest.bots[0].commandLists.flatMap((l: { commands: Array<{ title: string }> }) => l.commands.map((c) => c.title));
    expect(titles.length).toBeGreaterThan(0);
    for (const title of titles) expect(commandsDoc).toContain(`| \`/${title}`);
  });

  it('ships a 192 × 192 color icon and a 32 × 32 outline icon', () => {
    expect(pngSize(read(`examples/teams/${manifest.icons.color}`))).toEqual([192, 192]);
    expect(pngSize(read(`examples/teams/${manifest.icons.outline}`))).toEqual([32, 32]);
  });
});
