/**
 * `search.backend: native`: the provider's own web search tool (OpenAI's
 * `web_search` on the Responses API), end to end through the real provider
 * against the fake OpenAI server: the tool is declared, the model searches
 * server-side, and the delivered (and recorded) answer ends with the URLs it
 * cited, http(s) only. A model without native search is a config error
 * naming what to set.
 */
import { describe, expect, it } from 'vitest';
import { citableUrl, citationsBlock, withCitations } from '../../plugins/local-agent/native-search.js';
import { answerText } from '../../runner/projection.js';
import { ConfigError } from '../../src/errors.js';
import { perTestModel, RunnerHarness } from '../runner/harness.js';
import { agentFrom } from './registry-agent.js';

const t = perTestModel();

/** A harness whose runner is the local agent as the registry builds it, with native search, its model `openai` on `api` at the fake. */
async function nativeRunner(api: 'responses' | 'chat' = 'responses'): Promise<RunnerHarness> {
  const h = await RunnerHarness.start();
  t.h = h;
  h.ctx.config.model = { ...h.ctx.config.model, provider: 'openai', api };
  await h.startRunner(await agentFrom(h, t.fake.url, { search: { backend: 'native' } }));
  return h;
}

async function ask(h: RunnerHarness, text: string) {
  const r = (await h.ingest(text)) as { runId: string };
  return h.runEnded(r.runId);
}

describe('native web search', () => {
  describe('with openai on the Responses API', () => {
    it("declares OpenAI's web_search tool and no function of that name", async () => {
      t.fake.script([{ text: 'Hi.' }]);
      const h = await nativeRunner();

      expect(await ask(h, 'hi')).toMatchObject({ outcome: 'completed' });
      const tools: any[] = t.fake.requests[0]!.body.tools;
      expect(tools).toContainEqual(expect.objectContaining({ type: 'web_search' }));
      expect(tools.filter((x) => x.type === 'function' && x.name === 'web_search')).toEqual([]);
      expect(JSON.stringify(t.fake.requests[0]!.body.instructions ?? t.fake.requests[0]!.body.input)).toContain('run by your provider');
    });

    it('delivers the answer of a server-side search with the URLs it cited (http(s) only), as recorded', async () => {
      t.fake.script([
        {
          webSearch: { query: 'steerbot release' },
          text: 'Version 2 shipped last week.',
          citations: [
            { url: 'https://example.com/news', title: 'News' },
            { url: 'javascript:alert(1)', title: 'bad' },
            { url: 'https://example.com/news', title: 'again' },
            { url: 'http://blog.example.org/post?id=1', title: 'Blog' },
          ],
        },
      ]);
      const h = await nativeRunner();

      expect(await ask(h, 'what is new in steerbot?')).toMatchObject({ outcome: 'completed' });
      const answer = 'Version 2 shipped last week.\n\nSources:\n- https://example.com/news\n- http://blog.example.org/post?id=1';
      expect(h.outbound.texts).toEqual([answer]);
      expect(t.fake.requests).toHaveLength(1);
      // A takeover after a crash delivers the recorded final text: it carries the citations.
      const [step] = await h.entries('model.step');
      expect(answerText(step!.messages as never)).toBe(answer);

      // The next turn replays the search and the cited answer to the provider as they were.
      expect(await ask(h, 'and before that?')).toMatchObject({ outcome: 'completed' });
      const input = JSON.stringify(t.fake.requests[1]!.body.input);
      expect(input).toContain('ws_chatcmpl-fake-0');
      expect(input).toContain('Sources:\\n- https://example.com/news');
    });

    it('adds no Sources block when the text already names the cited URL', async () => {
      t.fake.script([{ webSearch: { query: 'q' }, text: 'See https://example.com/a for details.', citations: [{ url: 'https://example.com/a' }] }]);
      const h = await nativeRunner();

      await ask(h, 'q?');
      expect(h.outbound.texts).toEqual(['See https://example.com/a for details.']);
    });
  });

  describe('the model settings', () => {
    it('refuses openai on chat completions, naming model.api responses', async () => {
      const h = await RunnerHarness.start();
      t.h = h;
      h.ctx.config.model = { ...h.ctx.config.model, provider: 'openai', api: 'chat' };
      const err = await agentFrom(h, t.fake.url, { search: { backend: 'native' } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues).toEqual([
        { path: 'agents.local-agent.search.backend', message: expect.stringMatching(/set model\.api to "responses"/) },
      ]);
    });

    it('refuses openai-compatible, naming the providers that have it and the other backends', async () => {
      const h = await RunnerHarness.start();
      t.h = h;
      h.ctx.config.model = { ...h.ctx.config.model, provider: 'openai-compatible' };
      const err = await agentFrom(h, t.fake.url, { search: { backend: 'native' } }).catch((e: unknown) => e);
      expect((err as ConfigError).issues).toEqual([
        { path: 'agents.local-agent.search.backend', message: expect.stringMatching(/openai .*anthropic.*searxng, brave or tavily/) },
      ]);
    });

    it('takes no baseUrl or apiKey', async () => {
      const h = await RunnerHarness.start();
      t.h = h;
      const err = await agentFrom(h, t.fake.url, { search: { backend: 'native', apiKey: 'k' } }).catch((e: unknown) => e);
      expect(JSON.stringify(err)).toMatch(/native search takes no apiKey/);
    });
  });
});

describe('cited URLs', () => {
  it('keeps http(s) URLs only, without credentials, on one line', () => {
    expect(citableUrl('https://example.com/a b')).toBe('https://example.com/a%20b');
    expect(citableUrl(' http://example.com/\n')).toBe('http://example.com/');
    for (const bad of [
      'javascript:alert(1)',
      'data:text/html,<b>x</b>',
      'file:///etc/passwd',
      'https://user:pw@example.com/',
      'not a url',
      `https://e.com/${'a'.repeat(2100)}`,
    ])
      expect(citableUrl(bad)).toBeUndefined();
  });

  it('lists at most ten, deduplicated, and nothing when none is left', () => {
    const urls = Array.from({ length: 15 }, (_, i) => `https://example.com/${i % 12}`);
    expect(citationsBlock('text', urls).split('\n- ')).toHaveLength(11);
    expect(citationsBlock('text', ['javascript:x'])).toBe('');
    expect(citationsBlock('', ['https://example.com/'])).toBe('Sources:\n- https://example.com/');
  });

  it('appends the block to the last assistant message, or leaves the messages as they are', () => {
    const messages = [{ role: 'assistant' as const, content: [{ type: 'text' as const, text: 'A.' }] }];
    expect(withCitations(messages, 'A.', [])).toEqual({ messages, text: 'A.' });
    const cited = withCitations(messages, 'A.', ['https://example.com/']);
    expect(cited.text).toBe('A.\n\nSources:\n- https://example.com/');
    expect(answerText(cited.messages)).toBe(cited.text);
  });
});
