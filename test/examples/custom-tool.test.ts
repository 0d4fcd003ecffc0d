/**
 * examples/custom-tool, used as its README says: the local agent's settings
 * list the module, the model (the real OpenAI-compatible provider against
 * the fake server) asks for the tool, the tool runs, and its result goes back
 * to the model, whose answer reaches the Telegram user.
 */
import { resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { ALICE, type FakeTelegram, messageUpdate } from '../../testing/fakes/telegram-server.js';
import { type ExampleWorld, exampleWorld } from './world.js';

const MODULE = resolve('examples/custom-tool/dice.js');

describe('examples/custom-tool', () => {
  let world: ExampleWorld;
  let tg: FakeTelegram;
  let ai: FakeOpenAIServer;
  beforeEach(async () => {
    world = await exampleWorld();
    tg = world.tg;
    ai = await startFakeOpenAI();
  });
  afterEach(async () => {
    await world.stop();
    await ai.close();
  });

  it('offers the tool to the model, runs it when asked and answers with its result', async () => {
    const config = await world.load({
      model: { provider: 'openai-compatible', baseURL: ai.url, name: 'fake-model', contextWindow: 128_000 },
      agents: { 'local-agent': { toolModules: [MODULE] } },
    });
    // The model asks for three six-sided dice, then answers with what the tool returned.
    ai.script((req, i) => {
      if (i === 0) return { toolCalls: [{ id: 'call_dice', name: 'roll_dice', args: { count: 3, sides: 6 } }] };
      const result = req.messages.find((m: { role: string }) => m.role === 'tool');
      return { text: `The dice say: ${result?.content ?? 'nothing'}` };
    });
    await world.start(config);

    tg.pushUpdate(messageUpdate({ text: 'roll three dice for me', from: ALICE }));
    const [reply] = await tg.waitUntil(() => tg.sent.length >= 1 && tg.sent, 10_000, 'the reply');

    const offered = ai.requests[0]!.body.tools.map((t: { function: { name: string } }) => t.function.name);
    expect(offered).toContain('roll_dice');
    expect(ai.requests).toHaveLength(2);
    const toolMessage = ai.requests[1]!.body.messages.find((m: { role: string }) => m.role === 'tool');
    expect(toolMessage.tool_call_id).toBe('call_dice');
    const { rolls, sum } = JSON.parse(toolMessage.content) as { rolls: number[]; sum: number };
    expect(rolls).toHaveLength(3);
    for (const r of rolls) expect(r >= 1 && r <= 6 && Number.isInteger(r)).toBe(true);
    expect(sum).toBe(rolls.reduce((a, b) => a + b, 0));
    expect(reply!.text).toBe(`The dice say: ${toolMessage.content}`);
    expect(tg.sent).toHaveLength(1);
  });
});
