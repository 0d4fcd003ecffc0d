/**
 * A local fake of Anthropic's Messages API (`POST /v1/messages`), for
 * end-to-end tests of the real `@ai-sdk/anthropic` provider: scripted turns
 * (text, tool calls, usage, a server-side web search with cited text),
 * answered as an SSE stream (`stream: true`, what `streamText` asks for) or
 * as one message object, and every request recorded.
 */
import type { ServerResponse } from 'node:http';
import { type ModelRequest, type ScriptedModelServer, sendEvents, sendJson, startScriptedModel, textDeltas } from './scripted-model.js';

/** One scripted answer of the fake Claude. */
export interface AnthropicTurn {
  /** Assistant text (a text block, streamed in word deltas). */
  text?: string;
  /** Tool calls (`tool_use` blocks); `id` defaults to `toolu_<request>_<i>`. */
  toolCalls?: Array<{ id?: string; name: string; args: unknown }>;
  /**
   * The model searched the web server-side first (Anthropic's `web_search`
   * tool): a `server_tool_use` block with the query, then a
   * `web_search_tool_result` block listing `results`.
   */
  webSearch?: { query: string; results: Array<{ url: string; title?: string }> };
  /** The text's citations (`web_search_result_location`), as Anthropic attaches them to the text block. */
  citations?: Array<{ url: string; title?: string; citedText?: string }>;
  /** Reported usage. Default: a rough estimate from the request and the answer. */
  usage?: { input_tokens: number; output_tokens: number };
  /** Answer with this HTTP status and an Anthropic error body instead. */
  error?: { status: number; message: string; type?: string };
}

/** A running fake Anthropic API. `url` ends in `/v1`, like the provider's default base URL. */
export type FakeAnthropicServer = ScriptedModelServer<AnthropicTurn>;

/** Options of `startFakeAnthropic`. */
export interface FakeAnthropicOptions {
  /** The one key accepted in `x-api-key`; any other gets Anthropic's 401 `authentication_error`. Default: any key. */
  apiKey?: string;
}

const MODEL = 'claude-fake';

/** Starts a fake Anthropic API on 127.0.0.1 with a free port. */
export function startFakeAnthropic(opts: FakeAnthropicOptions = {}): Promise<FakeAnthropicServer> {
  return startScriptedModel<AnthropicTurn>({
    basePath: '/v1',
    fallback: { text: 'ok' },
    route: (path) => path === '/v1/messages',
    refuse: (req) =>
      opts.apiKey !== undefined && req.headers['x-api-key'] !== opts.apiKey
        ? { status: 401, body: errorBody('authentication_error', 'invalid x-api-key') }
        : undefined,
    answer,
  });
}

function answer(res: ServerResponse, req: ModelRequest, turn: AnthropicTurn, index: number): void {
  if (turn.error) return sendJson(res, turn.error.status, errorBody(turn.error.type ?? 'api_error', turn.error.message));
  const blocks = contentBlocks(turn, index);
  const stop = blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn';
  const usage = turn.usage ?? {
    input_tokens: Math.ceil(JSON.stringify(req.body?.messages ?? []).length / 4),
    output_tokens: Math.ceil(JSON.stringify(blocks).length / 4),
  };
  const id = `msg_fake_${index}`;
  if (req.body?.stream !== true) {
    sendJson(res, 200, { id, type: 'message', role: 'assistant', model: MODEL, content: blocks, stop_reason: stop, stop_sequence: null, usage });
    return;
  }
  const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  const events = [
    event('message_start', {
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model: MODEL,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usage, output_tokens: 1 },
      },
    }),
  ];
  for (const [i, b] of blocks.entries()) events.push(...blockEvents(b, i, event));
  events.push(event('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: usage.output_tokens } }));
  events.push(event('message_stop', {}));
  sendEvents(res, events);
}

/** A content block of a message, as the API sends it whole (non-streaming). */
type Block = Record<string, unknown> & { type: string };

/** The turn's content blocks, in Anthropic's order: search, its results, the text, the tool calls. */
function contentBlocks(turn: AnthropicTurn, index: number): Block[] {
  const blocks: Block[] = [];
  if (turn.webSearch) {
    const id = `srvtoolu_fake_${index}`;
    blocks.push({ type: 'server_tool_use', id, name: 'web_search', input: { query: turn.webSearch.query } });
    blocks.push({
      type: 'web_search_tool_result',
      tool_use_id: id,
      content: turn.webSearch.results.map((r, i) => ({
        type: 'web_search_result',
        url: r.url,
        title: r.title ?? null,
        encrypted_content: Buffer.from(`result ${index}.${i}`).toString('base64'),
        page_age: null,
      })),
    });
  }
  if (turn.text) {
    const citations = (turn.citations ?? []).map((c, i) => ({
      type: 'web_search_result_location',
      cited_text: c.citedText ?? turn.text,
      url: c.url,
      title: c.title ?? null,
      encrypted_index: Buffer.from(`index ${index}.${i}`).toString('base64'),
    }));
    blocks.push({ type: 'text', text: turn.text, ...(citations.length > 0 && { citations }) });
  }
  for (const [i, c] of (turn.toolCalls ?? []).entries())
    blocks.push({ type: 'tool_use', id: c.id ?? `toolu_${index}_${i}`, name: c.name, input: typeof c.args === 'string' ? JSON.parse(c.args) : (c.args ?? {}) });
  return blocks;
}

/** The stream events of one block: its start (without what the deltas carry), its deltas, its stop. */
function blockEvents(b: Block, index: number, event: (type: string, data: Record<string, unknown>) => string): string[] {
  const out: string[] = [];
  const delta = (d: Record<string, unknown>) => out.push(event('content_block_delta', { index, delta: d }));
  if (b.type === 'text') {
    out.push(event('content_block_start', { index, content_block: { type: 'text', text: '' } }));
    for (const citation of (b.citations as unknown[] | undefined) ?? []) delta({ type: 'citations_delta', citation });
    for (const piece of textDeltas(b.text as string)) delta({ type: 'text_delta', text: piece });
  } else if (b.type === 'tool_use' || b.type === 'server_tool_use') {
    out.push(event('content_block_start', { index, content_block: { ...b, input: {} } }));
    const json = JSON.stringify(b.input);
    const third = Math.max(1, Math.ceil(json.length / 3));
    for (let i = 0; i < json.length; i += third) delta({ type: 'input_json_delta', partial_json: json.slice(i, i + third) });
  } else out.push(event('content_block_start', { index, content_block: b }));
  out.push(event('content_block_stop', { index }));
  return out;
}

function errorBody(type: string, message: string) {
  return { type: 'error', error: { type, message } };
}
