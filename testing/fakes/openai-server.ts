/**
 * A local fake of the OpenAI chat-completions API, for end-to-end tests of the
 * real `@ai-sdk/openai-compatible` and `@ai-sdk/openai` providers. It answers
 * `POST /v1/chat/completions` and `POST /v1/responses` (the Responses API,
 * openai-responses.ts) with scripted turns, as JSON or as an SSE stream,
 * `POST /v1/embeddings` with vectors (`embed`), and records every request it received.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readText } from './http-io.js';
import { responseObject, responsesEvents } from './openai-responses.js';

/** One scripted answer of the fake model. */
export interface FakeTurn {
  /** Assistant text. Streamed in several deltas. */
  text?: string;
  /** Tool calls; `args` is sent as JSON (a string is sent verbatim). `id` defaults to `call_<request>_<i>`. */
  toolCalls?: Array<{ id?: string; name: string; args: unknown }>;
  /** Wait this long before answering (headers included); the wait ends early when the client aborts. */
  delayMs?: number;
  /** Wait this long between stream chunks (streaming only). Default 0. */
  chunkDelayMs?: number;
  /** Streaming only: send this many stream events (the first is the role chunk), then fall silent until the client goes away. */
  stallAfterChunks?: number;
  /** Answer with this HTTP status and an OpenAI error body instead of a completion. */
  error?: { status: number; message: string; type?: string; code?: string };
  /** Reported usage. Default: a rough estimate from the request and the answer. */
  usage?: { prompt_tokens: number; completion_tokens: number };
  /** Responses API only: the model searched the web server-side first (OpenAI's `web_search` tool: a `web_search_call` item); `sources` are sent as its `action.sources`. */
  webSearch?: { query: string; sources?: string[] };
  /** Responses API only: URLs the text cites (`url_citation` annotations). */
  citations?: Array<{ url: string; title?: string }>;
}

/** One request the fake received. */
export interface FakeRequest {
  /** The API it called: chat completions, or the Responses API. */
  api: 'chat' | 'responses';
  /** The parsed JSON body. */
  body: any;
  /** The request headers, as node:http reports them (lower-case names). */
  headers: Record<string, string | string[] | undefined>;
  /** True when the client went away before the answer was complete. */
  aborted?: boolean;
  /** When the request arrived, ms since the epoch. */
  receivedAt: number;
  /** When the answer ended (sent in full, or the client went away), ms since the epoch; absent while it is in progress. */
  endedAt?: number;
  /** The usage the answer reported (absent for errors and requests dropped before answering). */
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number; prompt_tokens_details?: { cached_tokens: number } };
}

/** A running fake server. */
export interface FakeOpenAIServer {
  /** Base URL to give the provider, including `/v1`. */
  url: string;
  /** Every model request received (chat completions and Responses), in arrival order. */
  requests: FakeRequest[];
  /** Every transcription request's multipart body, in arrival order. */
  transcriptions: Buffer[];
  /** The inputs of every embeddings request, in arrival order. */
  embeddings: string[][];
  /** The body of every speech request (`POST /v1/audio/speech`), in arrival order. */
  speeches: Array<{ model: string; input: string; voice?: string; response_format?: string }>;
  /** The body of every image generation request (`POST /v1/images/generations`), in arrival order. */
  images: Array<{ model: string; prompt: string; n?: number; size?: string }>;
  /**
   * Sets what the model answers. A list is consumed one turn per request from
   * the time it is set; a function is called with the request body and the
   * request's index in `requests`. When the list runs out the answer is text `ok`.
   */
  script(turns: FakeTurn[] | ((req: any, index: number) => FakeTurn)): void;
  /** Resolves once at least `n` requests have arrived; rejects after `timeoutMs` (default 5000). */
  waitForRequests(n: number, timeoutMs?: number): Promise<void>;
  /** Drops open connections and stops listening. */
  close(): Promise<void>;
}

const MODEL = 'fake-model';

/** Options of `startFakeOpenAI`. */
export interface FakeOpenAIOptions {
  /**
   * The one API key accepted (`Authorization: Bearer <key>`); any other gets
   * OpenAI's 401 `invalid_api_key`, whose message echoes the key it was given.
   * Default: any key.
   */
  apiKey?: string;
  /**
   * Report cached prompt tokens the way OpenAI does
   * (`usage.prompt_tokens_details.cached_tokens`): the longest prefix of the
   * request (tools, then messages, whole messages at a time) identical to a
   * prefix of an earlier request, counted only from 1024 tokens and in steps
   * of 128. Prompt tokens are then counted over tools and messages
   * (characters / 4). Default false.
   */
  promptCache?: boolean;
  /** What `POST /v1/audio/transcriptions` answers for the uploaded request body (multipart, as received). Default: text `transcribed audio`. */
  transcribe?(body: Buffer): string;
  /** The audio `POST /v1/audio/speech` answers for a text in a format (its `response_format`). Default: `fakeSpeech`. */
  speak?(text: string, format: string): Buffer;
  /** The image `POST /v1/images/generations` answers for a prompt (PNG bytes). Default: a small PNG. */
  image?(prompt: string): Buffer;
  /** The vector `POST /v1/embeddings` answers for one input. Default: 16 dimensions counting the input's words by a hash (texts sharing words point alike). */
  embed?(text: string): number[];
}

/** What the image endpoint answers by default: a PNG signature and a few bytes (enough for a type check). */
const FAKE_PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(64, 7)]);

/**
 * One ADTS frame header (AAC-LC, 24 kHz, mono, no CRC) for a frame of `bytes`
 * bytes in all: 1024 samples, so 1/23.4375 s a frame.
 */
function adtsHeader(bytes: number): Buffer {
  return Buffer.from([0xff, 0xf1, (1 << 6) | (6 << 2), (1 << 6) | (bytes >> 11), (bytes >> 3) & 0xff, ((bytes & 7) << 5) | 0x1f, 0xfc]);
}

/** The samples of one AAC frame and the fake's rate: a frame lasts 1024 / 24 000 s. */
export const FAKE_AAC_FRAME_MS = (1024 / 24_000) * 1000;

/**
 * What the speech endpoint answers by default for `text` in `format`
 * (`response_format`): for `aac`, ADTS frames (AAC-LC, 24 kHz, mono), one per
 * character of the text, each carrying that character's code in its body;
 * otherwise `OggS` and the text's bytes.
 */
export function fakeSpeech(text: string, format = 'opus'): Buffer {
  if (format !== 'aac') return Buffer.concat([Buffer.from('OggS'), Buffer.from(text)]);
  return Buffer.concat([...text].map((c) => Buffer.concat([adtsHeader(7 + 32), Buffer.alloc(32, c.codePointAt(0)! & 0x7f)])));
}

/** The default embedding: a bag of words hashed into 16 dimensions. */
function wordVector(text: string): number[] {
  const v = new Array<number>(16).fill(0);
  for (const w of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) v[createHash('sha256').update(w).digest()[0]! % 16]! += 1;
  return v;
}

/** Starts a fake on 127.0.0.1 with a free port. */
export async function startFakeOpenAI(opts: FakeOpenAIOptions = {}): Promise<FakeOpenAIServer> {
  const requests: FakeRequest[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  let turns: FakeTurn[] | ((req: any, index: number) => FakeTurn) = [];
  let cursor = 0;
  const prefixes = new PrefixCache();
  const transcriptions: Buffer[] = [];
  const embeddings: string[][] = [];
  const images: FakeOpenAIServer['images'] = [];
  const speeches: FakeOpenAIServer['speeches'] = [];

  const nextTurn = (body: any, index: number): FakeTurn => {
    if (typeof turns === 'function') return turns(body, index);
    return turns[cursor++] ?? { text: 'ok' };
  };

  const notify = () => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      const w = waiters[i]!;
      if (requests.length >= w.n) {
        waiters.splice(i, 1);
        w.resolve();
      }
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendError(res, 500, { message: `fake server failure: ${String(err)}`, type: 'server_error' });
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'POST' && path === '/v1/audio/transcriptions') {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const raw = Buffer.concat(chunks);
      transcriptions.push(raw);
      sendJson(res, 200, { text: opts.transcribe?.(raw) ?? 'transcribed audio' });
      return;
    }
    if (req.method === 'POST' && path === '/v1/audio/speech') {
      const body = JSON.parse(await readText(req)) as FakeOpenAIServer['speeches'][number];
      speeches.push(body);
      const format = body.response_format ?? 'mp3'; // OpenAI's default; the fake answers anything but aac with its Ogg stand-in
      const audio = opts.speak?.(body.input, format) ?? fakeSpeech(body.input, format);
      res.writeHead(200, { 'content-type': format === 'aac' ? 'audio/aac' : 'audio/ogg', 'content-length': audio.byteLength }).end(audio);
      return;
    }
    if (req.method === 'POST' && path === '/v1/images/generations') {
      const body = JSON.parse(await readText(req)) as FakeOpenAIServer['images'][number];
      images.push(body);
      const png = opts.image?.(body.prompt) ?? FAKE_PNG;
      sendJson(res, 200, { created: Math.floor(Date.now() / 1000), data: [{ b64_json: png.toString('base64') }] });
      return;
    }
    if (req.method === 'POST' && path === '/v1/embeddings') {
      const body = JSON.parse(await readText(req)) as { input: string | string[]; model: string };
      const inputs = Array.isArray(body.input) ? body.input : [body.input];
      embeddings.push(inputs);
      const data = inputs.map((text, index) => ({ object: 'embedding', index, embedding: (opts.embed ?? wordVector)(text) }));
      const tokens = inputs.reduce((n, t) => n + Math.ceil(t.length / 4), 0);
      sendJson(res, 200, { object: 'list', data, model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
      return;
    }
    const api = path === '/v1/responses' ? 'responses' : 'chat';
    if (req.method !== 'POST' || (path !== '/v1/chat/completions' && path !== '/v1/responses')) {
      sendError(res, 404, { message: `no route ${req.method} ${path}`, type: 'invalid_request_error' });
      return;
    }
    let body: any;
    try {
      body = JSON.parse(await readText(req));
    } catch {
      sendError(res, 400, { message: 'body is not JSON', type: 'invalid_request_error' });
      return;
    }
    const record: FakeRequest = { api, body, headers: { ...req.headers }, receivedAt: Date.now() };
    const index = requests.push(record) - 1;
    notify();
    const given = /^Bearer (.*)$/.exec(String(req.headers.authorization ?? ''))?.[1] ?? '';
    if (opts.apiKey !== undefined && given !== opts.apiKey) {
      sendError(res, 401, {
        message: `Incorrect API key provided: ${given}. You can find your API key at https://platform.openai.com/account/api-keys.`,
        type: 'invalid_request_error',
        code: 'invalid_api_key',
      });
      return;
    }

    // `close` on the response fires when the socket goes away; unfinished means the client aborted.
    let gone = false;
    res.on('close', () => {
      record.endedAt = Date.now();
      if (!res.writableFinished) {
        gone = true;
        record.aborted = true;
      }
    });
    const wait = (ms: number) =>
      new Promise<void>((resolve) => {
        if (ms <= 0 || gone) return resolve();
        const onClose = () => {
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          res.off('close', onClose);
          resolve();
        }, ms);
        res.once('close', onClose);
      });

    const turn = nextTurn(body, index);
    await wait(turn.delayMs ?? 0);
    if (gone) return;
    if (turn.error) {
      sendError(res, turn.error.status, turn.error);
      return;
    }
    const answer = toAnswer(turn, body, index, opts.promptCache ? prefixes : undefined);
    record.usage = answer.usage;
    const pace = { gone: () => gone, wait, chunkDelayMs: turn.chunkDelayMs ?? 0, stallAfterChunks: turn.stallAfterChunks };
    if (api === 'responses') {
      if (body?.stream !== true) sendJson(res, 200, responseObject(answer));
      else
        await writeEvents(
          res,
          pace,
          responsesEvents(answer, { text: splitText, args: splitArgs }).map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`),
        );
    } else if (body?.stream === true) await stream(res, answer, body, pace);
    else sendJson(res, 200, completion(answer));
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    transcriptions,
    embeddings,
    images,
    speeches,
    script(next) {
      turns = next;
      cursor = 0;
    },
    waitForRequests(n, timeoutMs = 5000) {
      if (requests.length >= n) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const waiter = {
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          reject(new Error(`fake OpenAI: expected ${n} requests within ${timeoutMs} ms, got ${requests.length}`));
        }, timeoutMs);
        waiters.push(waiter);
      });
    },
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}

/** A turn resolved into what goes on the wire. */
interface Answer {
  id: string;
  created: number;
  text: string;
  toolCalls: Array<{ id: string; name: string; arguments: string }>;
  finishReason: 'stop' | 'tool_calls';
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number; prompt_tokens_details?: { cached_tokens: number } };
  webSearch?: FakeTurn['webSearch'];
  citations?: FakeTurn['citations'];
}

/** Remembers every request prefix (tools, then whole messages) by a chained hash, to find the longest one seen before. */
class PrefixCache {
  private readonly seen = new Set<string>();

  /** Characters of the prompt and of its longest prefix seen in an earlier request; remembers this request's prefixes. */
  observe(body: any): { chars: number; cachedChars: number } {
    const segments = [JSON.stringify(body?.tools ?? []), ...(body?.messages ?? body?.input ?? []).map((m: unknown) => JSON.stringify(m))];
    let hash = '';
    let chars = 0;
    let cachedChars = 0;
    let matching = true;
    const hashes: string[] = [];
    for (const segment of segments) {
      hash = createHash('sha1').update(hash).update('\0').update(segment).digest('hex');
      chars += segment.length;
      matching &&= this.seen.has(hash);
      if (matching) cachedChars = chars;
      hashes.push(hash);
    }
    for (const h of hashes) this.seen.add(h);
    return { chars, cachedChars };
  }
}

function toAnswer(turn: FakeTurn, body: any, index: number, prefixes?: PrefixCache): Answer {
  const toolCalls = (turn.toolCalls ?? []).map((c, i) => ({
    id: c.id ?? `call_${index}_${i}`,
    name: c.name,
    arguments: typeof c.args === 'string' ? c.args : JSON.stringify(c.args ?? {}),
  }));
  const text = turn.text ?? '';
  const seen = prefixes?.observe(body);
  const promptTokens =
    turn.usage?.prompt_tokens ?? (seen ? Math.ceil(seen.chars / 4) : Math.ceil(JSON.stringify(body?.messages ?? body?.input ?? []).length / 4));
  // OpenAI: no caching below 1024 tokens; cache hits grow in steps of 128 tokens.
  const prefixTokens = seen ? Math.min(promptTokens, Math.floor(seen.cachedChars / 4)) : 0;
  const cachedTokens = prefixTokens >= 1024 ? Math.floor(prefixTokens / 128) * 128 : 0;
  const completionTokens = turn.usage?.completion_tokens ?? Math.ceil((text.length + toolCalls.reduce((n, c) => n + c.arguments.length, 0)) / 4);
  return {
    id: `chatcmpl-fake-${index}`,
    created: Math.floor(Date.now() / 1000),
    text,
    toolCalls,
    finishReason: toolCalls.length > 0 ? 'tool_calls' : 'stop',
    webSearch: turn.webSearch,
    citations: turn.citations,
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
      ...(prefixes && { prompt_tokens_details: { cached_tokens: cachedTokens } }),
    },
  };
}

function completion(a: Answer) {
  return {
    id: a.id,
    object: 'chat.completion',
    created: a.created,
    model: MODEL,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: a.toolCalls.length > 0 && a.text === '' ? null : a.text,
          refusal: null,
          ...(a.toolCalls.length > 0
            ? { tool_calls: a.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) }
            : {}),
        },
        finish_reason: a.finishReason,
      },
    ],
    usage: a.usage,
  };
}

/** How a stream is written: paced by the turn, stopped when the client goes away. */
interface Pace {
  gone(): boolean;
  wait(ms: number): Promise<void>;
  chunkDelayMs: number;
  /** Fall silent after this many events. */
  stallAfterChunks?: number | undefined;
}

/** Writes SSE `events` (each a whole `data:` block), then `end`, as the turn paces them. */
async function writeEvents(res: ServerResponse, pace: Pace, events: string[], end = ''): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  for (const [i, event] of events.entries()) {
    if (pace.gone()) return;
    if (i === pace.stallAfterChunks) {
      // A provider that stopped talking mid-answer: hold the connection open, say nothing.
      await new Promise<void>((resolve) => res.once('close', () => resolve()));
      return;
    }
    res.write(event);
    await pace.wait(pace.chunkDelayMs);
  }
  if (pace.gone()) return;
  res.end(end);
}

/** Streams like OpenAI: role chunk, text deltas, tool-call deltas, finish chunk, optional usage chunk, `[DONE]`. */
async function stream(res: ServerResponse, a: Answer, body: any, pace: Pace): Promise<void> {
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    id: a.id,
    object: 'chat.completion.chunk',
    created: a.created,
    model: MODEL,
    choices,
    ...extra,
  });
  const delta = (d: Record<string, unknown>, finish: string | null = null) => chunk([{ index: 0, delta: d, finish_reason: finish }]);

  const events: unknown[] = [delta({ role: 'assistant', content: '' })];
  for (const piece of splitText(a.text)) events.push(delta({ content: piece }));
  a.toolCalls.forEach((c, index) => {
    events.push(delta({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] }));
    for (const piece of splitArgs(c.arguments)) events.push(delta({ tool_calls: [{ index, function: { arguments: piece } }] }));
  });
  events.push(delta({}, a.finishReason));
  // Real OpenAI sends usage in an extra chunk with empty `choices` when asked to.
  if (body?.stream_options?.include_usage === true) events.push(chunk([], { usage: a.usage }));
  await writeEvents(
    res,
    pace,
    events.map((e) => `data: ${JSON.stringify(e)}\n\n`),
    'data: [DONE]\n\n',
  );
}

/** Splits text into word-sized deltas (at least two when the text has two characters). */
function splitText(text: string): string[] {
  if (text === '') return [];
  const words = text.match(/\s*\S+\s*|\s+/g) ?? [text];
  if (words.length > 1 || text.length < 2) return words;
  const mid = Math.ceil(text.length / 2);
  return [text.slice(0, mid), text.slice(mid)];
}

/** Splits tool arguments into three fragments, as providers send them. */
function splitArgs(args: string): string[] {
  const size = Math.max(1, Math.ceil(args.length / 3));
  const out: string[] = [];
  for (let i = 0; i < args.length; i += size) out.push(args.slice(i, i + size));
  return out;
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, status: number, e: { message: string; type?: string; code?: string }): void {
  sendJson(res, status, { error: { message: e.message, type: e.type ?? 'invalid_request_error', param: null, code: e.code ?? null } });
}
