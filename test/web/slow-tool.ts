/**
 * A tool for the browser tests: `slow_tool` runs until the test releases it
 * (or the run is stopped), so messages can be sent while a run is busy.
 * State lives on `globalThis`: the app imports this module by path, the test
 * by its own import, and both must see the same gate.
 */
import { z } from 'zod';
import type { AgentTool } from '../../plugins/local-agent/index.js';

interface Gate {
  started: number;
  release: () => void;
  wait: Promise<void>;
}

const g = globalThis as { __slowToolGate?: Gate };

/** Opens a new gate: later calls of the tool wait until `releaseSlowTool()`. */
export function resetSlowTool(): void {
  let release!: () => void;
  const wait = new Promise<void>((r) => (release = r));
  g.__slowToolGate = { started: 0, release, wait };
}

/** Lets every waiting and later call of the tool finish. */
export function releaseSlowTool(): void {
  g.__slowToolGate?.release();
}

/** How many calls started since the last reset. */
export function slowToolStarted(): number {
  return g.__slowToolGate?.started ?? 0;
}

resetSlowTool();

const slowTool: AgentTool<Record<string, never>> = {
  name: 'slow_tool',
  description: 'Does slow work.',
  inputSchema: z.object({}),
  timeoutMs: 60_000,
  async execute(_input, { signal }) {
    const gate = g.__slowToolGate!;
    gate.started++;
    await new Promise<void>((resolve, reject) => {
      void gate.wait.then(resolve);
      signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true });
    });
    return { done: true };
  },
};

/** @public Loaded by path (`agents.local-agent.toolModules`), not imported. */
export default slowTool;
