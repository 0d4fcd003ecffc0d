/**
 * `search.backend: native` on Anthropic and Google, end to end: the local
 * agent as the registry builds it, its model made by `createModel` (the real
 * `@ai-sdk/anthropic` and `@ai-sdk/google` providers) against the fake
 * Messages API and the fake Gemini API. The request offers the provider's
 * own search tool, and the answer reaches the person with the URLs the
 * provider searched, http(s) only. A Gemini model before 3 is a start error.
 * The fakes also carry plain turns, tool calls and non-streaming calls.
 */
import { generateText } from 'ai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { nativeSearchProblem } from '../../plugins/local-agent/native-search.js';
import { createModel } from '../../runner/model.js';
import { ConfigError } from '../../src/errors.js';
import { type FakeAnthropicServer, startFakeAnthropic } from '../../testing/fakes/anthropic-server.js';
import { type FakeGoogleServer, startFakeGoogle } from '../../testing/fakes/google-server.js';
import { onStreamingChannel, RunnerHarness } from '../runner/harness.js';
import { agentFrom } from './registry-agent.js';

const KEY = 'provider-test-key';
let h: RunnerHarness | undefined;
let claude: FakeAnthropicServer;
let gemini: FakeGoogleServer;

beforeEach(async () => {
  [claude, gemini] = await Promise.all([startFakeAnthropic({ apiKey: KEY }), startFakeGoogle({ apiKey: KEY })]);
});
afterEach(async () => {
  await h?.close();
  h = undefined;
  await Promise.all([claude.close(), gemini.close()]);
});

/**
 * A harness whose runner is the local agent with `settings`, its model
 * `provider`/`name` at `url`. `streamed`: the conversation's channel streams
 * (the agent streams its calls); else it does not (whole answers).
 */
async function runner(provider: 'anthropic' | 'google', name: string, url: string, settings = {}, streamed = true): Promise<RunnerHarness> {
  h = await RunnerHarness.start();
  h.ctx.config.model = { ...h.ctx.config.model, provider, name, apiKey: KEY };
  delete h.ctx.config.model.api;
  const agent = await agentFrom(h, url, settings);
  await h.startRunner(streamed ? onStreamingChannel(agent) : agent);
  return h;
}

/** The calls a test is run with: streamed to a channel that shows deltas, and asked whole for one that does not. */
const CALLS = [true, false] as const;

async function ask(h: RunnerHarness, text: string) {
  const r = (await h.ingest(text)) as { runId: string };
  return h.runEnded(r.runId);
}

const NATIVE = { search: { backend: 'native' } } as const;

describe('native web search on anthropic', () => {
  for (const streamed of CALLS)
    it(
      streamed
        ? "offers Anthropic's web_search server tool and delivers the searched answer with its http(s) sources"
        : "offers Anthropic's web_search server tool and delivers the searched answer with its http(s) sources, asked whole",
      async () => {
        claude.script([
          {
            webSearch: {
              query: 'wendle seal count',
              results: [
                { url: 'https://ledger.example/news/seals', title: 'Seals back' },
                { url: 'javascript:alert(1)', title: 'bad' },
                { url: 'http://wildlife.example.org/wendle?year=2026', title: 'Survey' },
              ],
            },
            text: '212 seals were counted this spring.',
            citations: [
              { url: 'https://ledger.example/news/seals', title: 'Seals back', citedText: '212 seals counted' },
              { url: 'javascript:alert(1)', title: 'bad' },
            ],
          },
        ]);
        const h = await runner('anthropic', 'claude-sonnet-4-5', claude.url, { currentTime: true, ...NATIVE }, streamed);

        expect(await ask(h, 'how many seals are in the Wendle now?')).toMatchObject({ outcome: 'completed' });
        expect(h.outbound.texts).toEqual([
          '212 seals were counted this spring.\n\nSources:\n- https://ledger.example/news/seals\n- http://wildlife.example.org/wendle?year=2026',
        ]);
        expect(claude.requests).toHaveLength(1);
        const body = claude.requests[0]!.body;
        expect(claude.requests[0]!.path).toBe('/v1/messages');
        expect(body.stream === true).toBe(streamed);
        expect(body.tools).toContainEqual(expect.objectContaining({ type: 'web_search_20250305', name: 'web_search' }));
        expect(body.tools).toContainEqual(expect.objectContaining({ name: 'current_time', input_schema: expect.any(Object) }));
        expect(JSON.stringify(body.system)).toContain('run by your provider');

        // The next turn replays the search and its results to Anthropic as they were.
        expect(await ask(h, 'and last year?')).toMatchObject({ outcome: 'completed' });
        const replayed = claude.requests[1]!.body.messages.find((m: { role: string }) => m.role === 'assistant').content;
        expect(replayed).toContainEqual(expect.objectContaining({ type: 'server_tool_use', name: 'web_search', input: { query: 'wendle seal count' } }));
        expect(replayed).toContainEqual(expect.objectContaining({ type: 'web_search_tool_result', tool_use_id: 'srvtoolu_fake_0' }));
      },
    );

  it('answers a plain chat turn and a tool call through the fake Messages API', async () => {
    claude.script([{ text: 'Hello there.' }, { toolCalls: [{ name: 'current_time', args: {} }] }, { text: 'It is late.' }]);
    const h = await runner('anthropic', 'claude-sonnet-4-5', claude.url, { currentTime: true });

    expect(await ask(h, 'hi')).toMatchObject({ outcome: 'completed' });
    expect(h.outbound.texts).toEqual(['Hello there.']);
    expect(claude.requests[0]!.headers['x-api-key']).toBe(KEY);
    const offered = claude.requests[0]!.body.tools.map((t: { name: string }) => t.name);
    expect(offered).toContain('current_time');
    expect(offered).not.toContain('web_search');

    expect(await ask(h, 'what time is it?')).toMatchObject({ outcome: 'completed' });
    expect(h.outbound.texts).toEqual(['Hello there.', 'It is late.']);
    const last = claude.requests[2]!.body.messages.at(-1);
    expect(last.role).toBe('user');
    expect(last.content).toContainEqual(expect.objectContaining({ type: 'tool_result', tool_use_id: 'toolu_1_0' }));
  });
});

describe('native web search on google', () => {
  for (const streamed of CALLS)
    it(
      streamed
        ? 'offers Google Search to Gemini 3 beside the function tools and delivers the grounded answer with its http(s) sources'
        : 'offers Google Search to Gemini 3 beside the function tools and delivers the grounded answer with its http(s) sources, asked whole',
      async () => {
        gemini.script([
          {
            text: 'The Wendle count is 212 seals.',
            grounding: {
              queries: ['wendle seal count'],
              sources: [
                { url: 'https://ledger.example/news/seals', title: 'ledger.example' },
                { url: 'javascript:alert(1)', title: 'bad' },
                { url: 'https://ledger.example/news/seals', title: 'again' },
              ],
            },
          },
        ]);
        const h = await runner('google', 'gemini-3-flash-preview', gemini.url, { currentTime: true, ...NATIVE }, streamed);

        expect(await ask(h, 'how many seals are in the Wendle now?')).toMatchObject({ outcome: 'completed' });
        expect(h.outbound.texts).toEqual(['The Wendle count is 212 seals.\n\nSources:\n- https://ledger.example/news/seals']);
        expect(gemini.requests).toHaveLength(1);
        const { path, body, headers } = gemini.requests[0]!;
        expect(path).toBe(
          streamed ? '/v1beta/models/gemini-3-flash-preview:streamGenerateContent?alt=sse' : '/v1beta/models/gemini-3-flash-preview:generateContent',
        );
        expect(headers['x-goog-api-key']).toBe(KEY);
        expect(body.tools).toContainEqual({ googleSearch: {} });
        const declared = body.tools.flatMap((t: { functionDeclarations?: Array<{ name: string }> }) => t.functionDeclarations ?? []);
        expect(declared.map((f: { name: string }) => f.name)).toContain('current_time');
        expect(JSON.stringify(body.systemInstruction)).toContain('run by your provider');
      },
    );

  it('answers a plain chat turn and a function call through the fake Gemini API', async () => {
    gemini.script([{ text: 'Hello there.' }, { toolCalls: [{ name: 'current_time', args: {} }] }, { text: 'It is late.' }]);
    const h = await runner('google', 'gemini-2.5-flash', gemini.url, { currentTime: true });

    expect(await ask(h, 'hi')).toMatchObject({ outcome: 'completed' });
    expect(await ask(h, 'what time is it?')).toMatchObject({ outcome: 'completed' });
    expect(h.outbound.texts).toEqual(['Hello there.', 'It is late.']);
    expect(gemini.requests[0]!.body.tools).not.toContainEqual({ googleSearch: {} });
    const last = gemini.requests[2]!.body.contents.at(-1);
    expect(last.parts).toContainEqual({ functionResponse: expect.objectContaining({ id: 'fc_1_0', name: 'current_time' }) });
  });

  it('refuses a Gemini 2 model at start, naming the model setting and the other backends', async () => {
    h = await RunnerHarness.start();
    h.ctx.config.model = { ...h.ctx.config.model, provider: 'google', name: 'gemini-2.5-flash', apiKey: KEY };
    const err = await agentFrom(h, gemini.url, NATIVE).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues).toEqual([
      {
        path: 'agents.local-agent.search.backend',
        message: expect.stringMatching(/Gemini 3 or later.*gemini-2\.5-flash.*STEERBOT_MODEL.*searxng, brave or tavily/),
      },
    ]);
    expect(gemini.requests).toEqual([]);
  });

  it('reads the Gemini version from the model name; an alias without one counts as older', () => {
    const problem = (name: string) => nativeSearchProblem({ provider: 'google', name });
    for (const name of ['gemini-3-pro-preview', 'models/gemini-3.1-flash-lite-preview', 'gemini-4-carbon']) expect(problem(name)).toBeUndefined();
    for (const name of ['gemini-2.5-pro', 'gemini-2.0-flash', 'gemini-flash-latest', 'gemini-1.5-pro', 'gemma-3-27b-it'])
      expect(problem(name)).toMatch(/Gemini 3/);
  });
});

describe('the provider fakes without streaming', () => {
  const settings = { apiKey: KEY, contextWindow: 100_000, outputReserve: 1000 };

  it('answer generateText (what the compaction summarizer calls) with text and sources', async () => {
    claude.script([{ webSearch: { query: 'q', results: [{ url: 'https://a.example/' }] }, text: 'From Claude.' }]);
    gemini.script([{ text: 'From Gemini.', grounding: { queries: ['q'], sources: [{ url: 'https://b.example/' }] } }]);
    const [a, g] = await Promise.all([
      generateText({ model: createModel({ ...settings, provider: 'anthropic', name: 'claude-sonnet-4-5', baseURL: claude.url }), prompt: 'hi' }),
      generateText({ model: createModel({ ...settings, provider: 'google', name: 'gemini-3-flash-preview', baseURL: gemini.url }), prompt: 'hi' }),
    ]);
    expect([a.text, g.text]).toEqual(['From Claude.', 'From Gemini.']);
    expect([a.sources.map((s) => (s as { url: string }).url), g.sources.map((s) => (s as { url: string }).url)]).toEqual([
      ['https://a.example/'],
      ['https://b.example/'],
    ]);
    expect(claude.requests[0]!.body.stream).toBeUndefined();
    expect(gemini.requests[0]!.path).toBe('/v1beta/models/gemini-3-flash-preview:generateContent');
  });

  it('refuse a wrong key the way the providers do', async () => {
    const model = (provider: 'anthropic' | 'google', baseURL: string) =>
      createModel({ ...settings, apiKey: 'wrong', provider, name: provider === 'google' ? 'gemini-3-flash-preview' : 'claude-sonnet-4-5', baseURL });
    const errors = await Promise.all(
      [model('anthropic', claude.url), model('google', gemini.url)].map((m) =>
        generateText({ model: m, prompt: 'hi', maxRetries: 0 }).catch((e: unknown) => e),
      ),
    );
    expect(errors.map((e) => (e as { statusCode?: number }).statusCode)).toEqual([401, 400]);
  });
});
