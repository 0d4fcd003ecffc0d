/**
 * The conversation every channel's `ask_user` end-to-end test holds (the
 * `ask-user-*.test.ts` files): the model asks which plan, the asker picks
 * option 2 (a click where the channel has buttons), the model answers; then
 * the model asks when to start, the asker writes an answer of their own
 * instead of choosing, and the model answers once more. What differs per
 * channel (how the question looks, how a click travels) stays in the tests.
 */
import { expect } from 'vitest';
import type { FakeOpenAIServer } from '../../testing/fakes/openai-server.js';

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
