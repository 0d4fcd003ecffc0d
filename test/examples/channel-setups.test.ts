/** `examples/line/`, `examples/matrix/` and `examples/email/`: each config section is one the channel's schema accepts, with the settings its README names. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { emailConfigSchema } from '../../plugins/email/config.js';
import { lineConfigSchema } from '../../plugins/line/config.js';
import { matrixConfigSchema } from '../../plugins/matrix/config.js';

const read = (dir: string, name: string) => readFileSync(new URL(`../../examples/${dir}/${name}`, import.meta.url), 'utf8');
const section = (dir: string) => JSON.parse(read(dir, 'steerbot.json')).channels[dir];

describe('the channel setup examples', () => {
  it('LINE: a section the schema accepts, whose webhook path and files URL the README gives the console', () => {
    const parsed = lineConfigSchema.safeParse(section('line'));
    expect(parsed.error).toBeUndefined();
    const readme = read('line', 'README.md');
    expect(readme).toContain(`${parsed.data!.filesUrl}${parsed.data!.webhookPath}`);
  });

  it('Matrix: a section the schema accepts, and a login script for the token it needs', () => {
    const parsed = matrixConfigSchema.safeParse(section('matrix'));
    expect(parsed.error).toBeUndefined();
    expect(parsed.data).toMatchObject({ userId: '@steerbot:example.org', autoJoin: ['@you:example.org'] });
    expect(read('matrix', 'login.sh')).toContain('/_matrix/client/v3/login');
  });

  it('email: a section the schema accepts, whose authServId the README shows how to find', () => {
    const parsed = emailConfigSchema.safeParse(section('email'));
    expect(parsed.error).toBeUndefined();
    expect(parsed.data).toMatchObject({ requireAuthenticated: true });
    expect(read('email', 'README.md')).toContain(`Authentication-Results: ${parsed.data!.authServId};`);
  });
});
