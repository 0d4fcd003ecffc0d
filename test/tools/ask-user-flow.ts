/**
 * The conversation every channel's `ask_user` end-to-end test holds (the
 * `ask-user-*.test.ts` files): the model asks which plan, the asker picks
 * option 2 (a click where the channel has buttons), the model answers; then
 * the model asks when to start, the asker writes an answer of their own
 * instead of choosing, and the model answers once more. What differs per
 * channel (how the question looks, how a click travels) stays in the tests.
 */
import { afterEach, beforeEach, expect } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';

/** The first question: the asker picks option 2. */
export const PLAN = { question: 'Which plan?', options: ['Basic', 'Pro', 'Team'] };
/** The second question: the asker writes `TYPED` instead of choosing. */
export const START = { question: 'When should it start?', options: ['Today', 'Next month'] };
/** What the asker writes instead of choosing. */
export const TYPED = 'on my birthday, the 3rd';
/** The model's answer after the first question. */
export const BOOKED = 'Pro plan booked.';
/** The model's answer after the second question. */
export const STARTS = 'It starts on the 3rd.';

/** The question as every channel shows it in text: numbered, with the hint that a written answer counts. */
export const questionText = (q: { question: string; options: string[] }): string =>
  `${q.question}\n${q.options.map((o, i) => `${i + 1}. ${o}`).join('\n')}\nChoose one, or reply in your own words.`;

/** Scripts the model for the conversation: request 0 asks PLAN, 1 answers BOOKED, 2 asks START, 3 answers STARTS. */
export function scriptTwoQuestions(ai: FakeOpenAIServer): void {
  ai.script([
    { toolCalls: [{ id: 'call_plan', name: 'ask_user', args: PLAN }] },
    { text: BOOKED },
    { toolCalls: [{ id: 'call_start', name: 'ask_user', args: START }] },
    { text: STARTS },
  ]);
}

/**
 * Checks `texts`, what a channel sent after the click on option 2 where the
 * choice is confirmed by a message of its own: the confirmation and the
 * model's answer, in either order (the host sends one, the runner the other).
 */
export function expectChosenAndBooked(texts: string[]): void {
  expect([...texts].sort()).toEqual(['Chosen: Pro', BOOKED].sort());
}

/** The question id in a `/choose <id> <n>` command (or in any text carrying one). */
export const questionIdIn = (command: string): string => /\/choose (qu_[0-9a-f]{24}) [1-5]/.exec(command)?.[1] ?? '';

/** The `/choose` commands of question `id`, in option order. */
export const chooseCommands = (id: string, q: { options: string[] }): string[] => q.options.map((_, i) => `/choose ${id} ${i + 1}`);

/** The tool result model request `i` carries (the last one in its messages). */
export function toolResultOf(ai: FakeOpenAIServer, i: number): Record<string, unknown> {
  const tools = ai.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'tool');
  return JSON.parse(tools.at(-1).content);
}

/** Checks model request `i`: the tool result says the person wrote instead of choosing, and `text` follows it as their message. */
export function expectTypedAnswer(ai: FakeOpenAIServer, i: number, text: string): void {
  expect(toolResultOf(ai, i)).toMatchObject({ answer: null });
  const last = ai.requests[i]!.body.messages.at(-1);
  expect(last.role).toBe('user');
  expect(JSON.stringify(last.content)).toContain(text);
}

/** What each test of a file starts: the scripted model, a runner harness (unless the file starts its own), and what the test adds. */
export interface AskUserWorld {
  ai: FakeOpenAIServer;
  h: RunnerHarness;
  /** What the test started beside them, closed after it in reverse order. */
  closers: Array<() => Promise<unknown>>;
  /** The local agent on the fake model, with `ask_user`. */
  agent(): RunnerPlugin;
}

/** Registers the file's hooks: before each test the model (scripted for the conversation) and, with `harness`, a runner harness; after it, everything closed. */
export function askUserWorld(opts: { harness: boolean }): AskUserWorld {
  const w = {
    closers: [],
    agent: () => createLocalAgentPlugin({ model: fakeModel(w.ai.url), builtins: { currentTime: false, askUser: true } }),
  } as unknown as AskUserWorld;
  beforeEach(async () => {
    w.ai = await startFakeOpenAI();
    if (opts.harness) w.h = await RunnerHarness.start();
    w.closers = [];
    scriptTwoQuestions(w.ai);
  });
  afterEach(async () => {
    for (const close of w.closers.reverse()) await close();
    if (opts.harness) await w.h.close();
    await w.ai.close();
  });
  return w;
}
