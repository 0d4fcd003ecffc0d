// @ts-check
/**
 * A custom tool for the built-in local agent: rolls dice. The model sees its
 * name, description and input schema; steerbot validates the input against
 * the schema before `execute`, enforces `timeoutMs`, and turns a throw into
 * an error result the model reads (the run goes on).
 *
 * steerbot.json:
 *   { "agents": { "local-agent": { "toolModules": ["./custom-tool/dice.js"] } } }
 */
import { randomInt } from 'node:crypto';
import { z } from 'steerbot/plugin';

/** @type {import('steerbot/runner').AgentTool<{ count: number; sides: number }>} */
const rollDice = {
  name: 'roll_dice',
  description: 'Rolls dice: `count` dice (1-20) with `sides` sides each (2-1000). Returns every roll and their sum.',
  inputSchema: z.object({
    count: z.number().int().min(1).max(20).default(1),
    sides: z.number().int().min(2).max(1000).default(6),
  }),
  async execute({ count, sides }) {
    const rolls = Array.from({ length: count }, () => randomInt(1, sides + 1));
    return { rolls, sum: rolls.reduce((a, b) => a + b, 0) };
  },
  timeoutMs: 1000,
};

export default rollDice;
