/**
 * What a long conversation costs in input tokens: a scripted 200-turn
 * conversation (each turn: a question, a tool call, its result, an answer)
 * through the real runtime and the real OpenAI provider, against the fake
 * OpenAI server reporting cached prompt tokens the way OpenAI does (the
 * longest prefix identical to an earlier request, from 1024 tokens, in steps
 * of 128). Compaction runs as configured (small window, so it happens).
 *
 * Prints, from one run: total input tokens against sending the full history
 * every time; the cached share of input tokens between compactions (target
 * ≥ 90 %) and overall; the number of summarizer calls and compactions;
 * then what skills, subagents and `ask_user` add per request (cost-added.ts).
 */
import { z } from 'zod';
import { type AgentTool, createLocalAgentPlugin } from '../plugins/local-agent/index.js';
import { SUMMARY_HEADER } from '../runner/compaction/checkpoint.js';
import { type FakeRequest, startFakeOpenAI } from '../testing/fakes/openai-server.js';
import { RunnerHarness } from '../testing/runner-harness.js';
import { addedPerTurn } from './cost-added.js';
import { privateRedis } from './private-redis.js';

const TURNS = Number(process.env.BENCH_TURNS ?? 200);
const CONTEXT_WINDOW = Number(process.env.BENCH_CONTEXT_WINDOW ?? 16_000);
const OUTPUT_RESERVE = 4_000;

const QUESTION = 'The nightly import was slow again; could you look up the job statistics for run';
const RESULT = 'rows=184220 dedupe_ms=1843120 batch=1 redis_used_memory=236M maxmemory=256M evictions=0 slowlog_top=HGET,SISMEMBER '.repeat(3);
const ANSWER =
  'The dedupe step dominates: every row is checked with its own round trip. Batching the checks in pipelines of 500 should cut it to a few minutes, and old dedupe keys without a TTL explain the memory; give new ones a 24 h TTL. ';

const SUMMARIZER_MARK = 'You maintain the running summary';
const isSummarizer = (r: FakeRequest): boolean => String(r.body?.messages?.[0]?.content ?? '').startsWith(SUMMARIZER_MARK);

const lookup: AgentTool = {
  name: 'job_stats',
  description: 'Statistics of one nightly import run.',
  inputSchema: z.object({ run: z.number() }),
  execute: async () => ({ stats: RESULT }),
};

/** Chars the fake counts for a request: tools, then each message, as JSON (its prompt tokens are chars / 4). */
const segments = (body: any): string[] => [JSON.stringify(body?.tools ?? []), ...(body?.messages ?? []).map((m: unknown) => JSON.stringify(m))];

const isSummaryMessage = (m: any) => m?.role === 'user' && typeof m.content === 'string' && m.content.startsWith(SUMMARY_HEADER);

export async function main(): Promise<void> {
  const redis = await privateRedis();
  const fake = await startFakeOpenAI({ promptCache: true });
  const h = await RunnerHarness.start({ redisUrl: redis.url });
  try {
    Object.assign(h.ctx.config.model, { baseURL: fake.url, contextWindow: CONTEXT_WINDOW, outputReserve: OUTPUT_RESERVE });
    let turn = 0;
    fake.script((body) => {
      if (isSummarizer({ body } as FakeRequest))
        return {
          text: `The user keeps asking about slow nightly imports (${turn} runs so far); the assistant found the per-row dedupe round trips and untimed keys, and advised pipelines of 500 and a 24 h TTL.`,
        };
      const last = body.messages.at(-1);
      if (last?.role === 'tool') return { text: `${ANSWER}(run ${turn})` };
      return { toolCalls: [{ name: 'job_stats', args: { run: turn } }] };
    });
    // The agent and the summarizer come from the runner's model factory (provider openai, as deployed).
    await h.startRunner(createLocalAgentPlugin({ tools: [lookup], builtins: { currentTime: false } }));

    const started = performance.now();
    for (turn = 1; turn <= TURNS; turn++) {
      const r = (await h.ingest(`${QUESTION} ${turn}?`)) as { runId: string };
      const ended = await h.runEnded(r.runId, 30_000);
      if (ended.outcome !== 'completed') throw new Error(`turn ${turn} ended ${ended.outcome}: ${ended.reason}`);
    }
    const seconds = (performance.now() - started) / 1000;

    const agent = fake.requests.filter((q) => !isSummarizer(q));
    const summaries = fake.requests.filter(isSummarizer);
    const compactions = await h.entries('compaction');

    // Baseline: each agent request carrying the whole conversation so far (every message ever sent, no summary).
    const full: number[] = [];
    const seen = new Set<string>();
    let baseline = 0;
    let input = 0;
    let cached = 0;
    let betweenInput = 0;
    let betweenCached = 0;
    let previousSummary: string | undefined;
    for (const q of agent) {
      const [tools, ...messages] = segments(q.body);
      for (const [i, m] of messages.entries()) {
        if (isSummaryMessage(q.body.messages[i]) || seen.has(m)) continue;
        seen.add(m);
        full.push(m.length);
      }
      baseline += Math.ceil((tools!.length + full.reduce((a, b) => a + b, 0)) / 4);
      const prompt = q.usage?.prompt_tokens ?? 0;
      const hit = q.usage?.prompt_tokens_details?.cached_tokens ?? 0;
      input += prompt;
      cached += hit;
      // The first request after a compaction (a new summary) starts a new prefix: not "between compactions".
      const summary = q.body.messages.find(isSummaryMessage)?.content as string | undefined;
      const fresh = q === agent[0] || summary !== previousSummary;
      previousSummary = summary;
      if (!fresh) {
        betweenInput += prompt;
        betweenCached += hit;
      }
    }
    const summaryInput = summaries.reduce((n, q) => n + (q.usage?.prompt_tokens ?? 0), 0);
    const pct = (a: number, b: number) => `${((100 * a) / Math.max(1, b)).toFixed(1)} %`;

    console.log(
      `cost: ${TURNS} turns (question → tool call → result → answer), window ${CONTEXT_WINDOW} tokens, reserve ${OUTPUT_RESERVE}, provider openai against the fake (${seconds.toFixed(1)} s)`,
    );
    console.log(`  agent requests                         ${agent.length}`);
    console.log(`  input tokens, agent requests           ${input}`);
    console.log(`  input tokens, summarizer requests      ${summaryInput}`);
    console.log(`  input tokens, full history every time  ${baseline}`);
    console.log(`  total / full history                   ${pct(input + summaryInput, baseline)}`);
    console.log(`  cached share between compactions       ${pct(betweenCached, betweenInput)}  (target ≥ 90 %)`);
    console.log(`  cached share overall                   ${pct(cached, input)}`);
    console.log(`  uncached input tokens / full history   ${pct(input - cached + summaryInput, baseline)}`);
    console.log(`  summarizer calls                       ${summaries.length}`);
    console.log(`  compactions                            ${compactions.length} (${compactions.filter((c) => c.summarizer === 'llm').length} by the model)`);
    console.log(`  summary requests with a cache key      ${summaries.filter((q) => q.body.prompt_cache_key !== undefined).length}`);
    await addedPerTurn(redis.url);
  } finally {
    await h.close();
    await fake.close();
    await redis.stop();
  }
}
