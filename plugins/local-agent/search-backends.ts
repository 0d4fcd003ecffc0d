/**
 * The search backends of `web_search`, each a small adapter: the request it
 * sends (through the guarded fetch) and how its JSON answer becomes results.
 * The answer is validated (zod) before it is read: it comes from the network.
 *
 * - SearXNG: `GET <baseUrl>/search?q=…&format=json` (the instance must allow
 *   the JSON format: `search.formats` in its settings.yml). No key.
 * - Brave Search API: `GET <baseUrl>/web/search?q=…&count=…` with the key in
 *   `X-Subscription-Token`. Default base `https://api.search.brave.com/res/v1`.
 * - Tavily: `POST <baseUrl>/search` with a JSON body `{ query, max_results }`
 *   and the key as `Authorization: Bearer`. Default base `https://api.tavily.com`.
 */
import { z } from 'zod';

/** The configured backends. */
export const SEARCH_BACKENDS = ['searxng', 'brave', 'tavily'] as const;
/** A configured backend. */
export type SearchBackend = (typeof SEARCH_BACKENDS)[number];

/** One search result. */
export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
}

/** What a backend request is. */
export interface BackendRequest {
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

/** One backend: its default base URL, whether it needs a key, its request and the parsing of its answer. */
interface Adapter {
  /** Default base URL; none when the operator must give one (a self-hosted SearXNG). */
  defaultBaseUrl: string | undefined;
  needsKey: boolean;
  request(base: string, query: string, count: number, apiKey: string | undefined): BackendRequest;
  results(body: unknown): SearchResult[];
}

/** `path` under `base` (whose own path is kept). */
const under = (base: string, path: string): URL => new URL(path, base.endsWith('/') ? base : `${base}/`);

const JSON_HEADERS = { accept: 'application/json', 'user-agent': 'steerbot-web-search' };

const text = z.string().catch('');
const searxngAnswer = z.object({ results: z.array(z.object({ url: z.string(), title: text, content: text }).loose()).catch([]) }).loose();
const braveAnswer = z
  .object({
    web: z
      .object({ results: z.array(z.object({ url: z.string(), title: text, description: text }).loose()).catch([]) })
      .loose()
      .optional(),
  })
  .loose();
const tavilyAnswer = z.object({ results: z.array(z.object({ url: z.string(), title: text, content: text }).loose()).catch([]) }).loose();

export const ADAPTERS: Record<SearchBackend, Adapter> = {
  searxng: {
    defaultBaseUrl: undefined,
    needsKey: false,
    request(base, query) {
      const url = under(base, 'search');
      url.search = new URLSearchParams({ q: query, format: 'json' }).toString();
      return { url: url.href, method: 'GET', headers: JSON_HEADERS };
    },
    results: (body) => searxngAnswer.parse(body).results.map((r) => ({ title: r.title, url: r.url, snippet: r.content })),
  },
  brave: {
    defaultBaseUrl: 'https://api.search.brave.com/res/v1',
    needsKey: true,
    request(base, query, count, apiKey) {
      const url = under(base, 'web/search');
      url.search = new URLSearchParams({ q: query, count: String(count) }).toString();
      return { url: url.href, method: 'GET', headers: { ...JSON_HEADERS, 'x-subscription-token': apiKey ?? '' } };
    },
    results: (body) => (braveAnswer.parse(body).web?.results ?? []).map((r) => ({ title: r.title, url: r.url, snippet: stripTags(r.description) })),
  },
  tavily: {
    defaultBaseUrl: 'https://api.tavily.com',
    needsKey: true,
    request(base, query, count, apiKey) {
      return {
        url: under(base, 'search').href,
        method: 'POST',
        headers: { ...JSON_HEADERS, 'content-type': 'application/json', authorization: `Bearer ${apiKey ?? ''}` },
        body: JSON.stringify({ query, max_results: count }),
      };
    },
    results: (body) => tavilyAnswer.parse(body).results.map((r) => ({ title: r.title, url: r.url, snippet: r.content })),
  },
};

/** Brave marks matches with `<strong>`: plain text for the model. */
const stripTags = (s: string): string => s.replace(/<\/?(strong|b|em)>/gi, '');
