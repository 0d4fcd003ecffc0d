/**
 * Prompt files and personas of the local agent, built by its definition from
 * `agents.local-agent` settings, through the real provider against the fake
 * OpenAI server: a prompt file, notes files as bounded fragments in a stable
 * order, per-channel and per-conversation personas, errors at start that name
 * the field, and a persona change that keeps the compaction checkpoint.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalAgentSettings } from '../../plugins/local-agent/index.js';
import { CHECKPOINT_KEY, SUMMARY_HEADER } from '../../runner/compaction/checkpoint.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import { DEFAULT_SYSTEM_PROMPT } from '../../src/config/defaults.js';
import { ConfigError } from '../../src/errors.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { CID, perTestModel, RunnerHarness } from '../runner/harness.js';
import { agentFrom as registryAgent } from './registry-agent.js';

const t = perTestModel();
let dir: string;
const file = (name: string) => join(dir, name);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'steerbot-prompts-'));
  await writeFile(file('prompt.md'), '  You are Quill, a careful editor.\n');
  await writeFile(file('AGENTS.md'), 'Always answer in British English.');
  await writeFile(file('STYLE.md'), 'S'.repeat(500));
  await writeFile(file('LATE.md'), 'L'.repeat(250));
  await writeFile(file('support.md'), 'You are the support desk of Acme.');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The plugin as the registry builds it from `settings` (model: the fake). */
const agentFrom = (h: RunnerHarness, settings: LocalAgentSettings): Promise<RunnerPlugin> => registryAgent(h, t.fake.url, settings);

async function startWith(settings: LocalAgentSettings): Promise<RunnerHarness> {
  const h = await RunnerHarness.start();
  t.h = h;
  await h.startRunner(await agentFrom(h, settings));
  return h;
}

/** Sends `text` in `conversationId` and waits for its run to end. */
async function say(h: RunnerHarness, text: string, conversationId = CID): Promise<void> {
  const r = (await h.ingest(text, { conversationId })) as { runId: string };
  await h.runEnded(r.runId, 10_000, conversationId);
  await h.idle(10_000, conversationId);
}

const systemOf = (i: number): string => t.fake.requests[i]!.body.messages.find((m: { role: string }) => m.role === 'system')?.content;

describe('the system prompt from files', () => {
  it('reads the prompt file and appends each notes file as a bounded fragment, in order, within the budget', async () => {
    const h = await startWith({
      systemPromptFile: file('prompt.md'),
      notesFiles: [file('AGENTS.md'), file('STYLE.md'), file('LATE.md')],
      notesFileMaxChars: 300,
      notesBudgetChars: 400,
    });
    await say(h, 'hello');
    await say(h, 'again');

    expect(systemOf(0)).toBe(
      [
        'You are Quill, a careful editor.',
        '<notes file="AGENTS.md">\nAlways answer in British English.\n</notes>',
        `<notes file="STYLE.md">\n${'S'.repeat(300)}\n[… cut: 200 more characters]\n</notes>`,
        '(Notes left out for lack of room: LATE.md.)',
      ].join('\n\n'),
    );
    // Read once at start: the next run's prompt is byte-identical.
    expect(systemOf(1)).toBe(systemOf(0));
  });

  it('refuses to start naming each bad field: a missing notes file, a prompt set twice, a persona without a prompt', async () => {
    const h = await RunnerHarness.start();
    t.h = h;
    const err = await agentFrom(h, {
      systemPrompt: 'inline',
      systemPromptFile: file('prompt.md'),
      notesFiles: [file('AGENTS.md'), file('missing.md')],
      personas: { discord: { notes: false } },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues.map((i) => i.path).sort()).toEqual([
      'agents.local-agent.notesFiles.1',
      'agents.local-agent.personas.discord',
      'agents.local-agent.systemPromptFile',
    ]);
    expect((err as ConfigError).issues.find((i) => i.path.endsWith('notesFiles.1'))!.message).toContain('missing.md');
  });
});

describe('personas', () => {
  it('use the conversation’s own persona first, then its channel’s, else the default prompt', async () => {
    const h = await startWith({
      notesFiles: [file('AGENTS.md')],
      personas: { telegram: { systemPromptFile: file('support.md') }, 'telegram:7': { systemPrompt: 'You are Tess, for chat 7.', notes: false } },
    });
    await say(h, 'hi from 42');
    await say(h, 'hi from 7', 'telegram:7');
    await say(h, 'hi from discord', 'discord:9');

    const notes = '<notes file="AGENTS.md">\nAlways answer in British English.\n</notes>';
    expect(systemOf(0)).toBe(`You are the support desk of Acme.\n\n${notes}`);
    expect(systemOf(1)).toBe('You are Tess, for chat 7.');
    expect(systemOf(2)).toBe(`${DEFAULT_SYSTEM_PROMPT}\n\n${notes}`);
  });

  it('can change without invalidating the compaction checkpoint: the next run starts from the same summary, with no new compaction', async () => {
    const h = await startWith({ personas: { telegram: { systemPrompt: 'You are Persona A.' } } });
    for (let i = 1; i <= 5; i++) await say(h, `message ${i} about the nightly import`);
    const r = await h.dispatch.requestCompaction(h.source());
    if (r.kind !== 'new-run') throw new Error(`expected a compaction run, got ${r.kind}`);
    await h.queue.enqueue(CID, r.runId);
    await h.runEnded(r.runId);
    const stateKey = conversationKeys(h.prefix, CID).state;
    const before = await h.ctx.redis.hget(stateKey, CHECKPOINT_KEY);
    expect(before).not.toBeNull();
    const requestsBefore = t.fake.requests.length;

    // A restart with another persona for the channel.
    await h.runners.splice(0)[0]!.close(1000);
    await h.startRunner(await agentFrom(h, { personas: { telegram: { systemPrompt: 'You are Persona B.' } } }));
    await say(h, 'message 6');

    const after = t.fake.requests.slice(requestsBefore);
    expect(after).toHaveLength(1); // the answer only: no summarizer call
    const messages = after[0]!.body.messages as Array<{ role: string; content: string }>;
    expect(messages[0]).toEqual({ role: 'system', content: 'You are Persona B.' });
    expect(messages[1]!.content.startsWith(SUMMARY_HEADER)).toBe(true);
    expect(await h.ctx.redis.hget(stateKey, CHECKPOINT_KEY)).toBe(before);
    expect(await h.entries('compaction')).toHaveLength(1);
  });
});
