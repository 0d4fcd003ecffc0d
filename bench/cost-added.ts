/**
 * What skills, subagents and `ask_user` add to every agent request while they
 * are on but not used: one turn per variant (a question answered at once)
 * through the real runtime and provider against the fake OpenAI server, and
 * the request's size in tokens (characters / 4 of its tool definitions and
 * messages, as the cost bench counts them) against the same turn with none of them.
 * A skill adds one prompt line and the `read_skill` tool; subagents add their
 * three tools; a turn that delegates also pays for its children's own runs.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runnerFeatures } from '../app/features/index.js';
import { createLocalAgentPlugin, type LocalAgentConfig } from '../plugins/local-agent/index.js';
import { loadSkills } from '../plugins/local-agent/skills.js';
import { startRunner } from '../runner/main.js';
import { createModel } from '../runner/model.js';
import { startFakeOpenAI } from '../testing/fakes/openai-server.js';
import { RunnerHarness } from '../testing/runner-harness.js';

const SKILLS = 10;

/** Prompt tokens of one answered turn with `agent` (and subagents on when `subagents`). */
async function promptTokens(redisUrl: string, agent: Omit<LocalAgentConfig, 'model'>, subagents = false): Promise<number> {
  const fake = await startFakeOpenAI();
  fake.script(() => ({ text: 'Done.' }));
  const h = await RunnerHarness.start({ redisUrl });
  try {
    const config = { ...h.ctx.config, subagents: { ...h.ctx.config.subagents, enabled: subagents } };
    const model = createModel({ provider: 'openai-compatible', name: 'm', baseURL: fake.url, apiKey: 'k', contextWindow: 128_000, outputReserve: 4000 });
    h.runners.push(
      await startRunner(
        { ...h.ctx, config },
        { plugin: createLocalAgentPlugin({ ...agent, model }), resolveOutbound: () => h.outbound, features: runnerFeatures() },
      ),
    );
    const r = (await h.ingest('Which of the open tickets should I look at first?')) as { runId: string };
    await h.runEnded(r.runId, 30_000);
    const body = fake.requests[0]?.body;
    return Math.ceil((JSON.stringify(body?.tools ?? []).length + JSON.stringify(body?.messages ?? []).length) / 4);
  } finally {
    await h.close();
    await fake.close();
  }
}

/** Writes `n` skills in the Agent Skills format and loads them. */
async function skills(n: number) {
  const dir = await mkdtemp(join(tmpdir(), 'steerbot-bench-skills-'));
  for (let i = 1; i <= n; i++) {
    await mkdir(join(dir, `skill-${i}`));
    const description = `Handles requests of kind ${i}, when and how to look up, summarise and answer them for the support team.`;
    await writeFile(join(dir, `skill-${i}`, 'SKILL.md'), `---\nname: skill-${i}\ndescription: ${description}\n---\n\n${'Step by step. '.repeat(200)}\n`);
  }
  return { dir, loaded: await loadSkills([dir]) };
}

/** Prints what each feature adds per request, from one run each. */
export async function addedPerTurn(redisUrl: string): Promise<void> {
  const base = { builtins: { currentTime: false } };
  const { dir, loaded } = await skills(SKILLS);
  try {
    const baseline = await promptTokens(redisUrl, base);
    const rows: Array<[string, number]> = [
      [`${SKILLS} skills (read_skill + a line each)`, await promptTokens(redisUrl, { ...base, skills: loaded })],
      ['subagents (delegate, steer_subagent, subagent_results)', await promptTokens(redisUrl, base, true)],
      ['ask_user', await promptTokens(redisUrl, { builtins: { currentTime: false, askUser: true } })],
    ];
    console.log(`added per agent request while on and unused (tokens: characters / 4 of tools and messages; baseline ${baseline}):`);
    for (const [what, tokens] of rows) console.log(`  ${what.padEnd(56)} +${tokens - baseline}  (×${(tokens / Math.max(1, baseline)).toFixed(2)})`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
