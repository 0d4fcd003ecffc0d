/**
 * A local fake of Google's Generative Language API (Gemini), for end-to-end
 * tests of the real `@ai-sdk/google` provider: `POST
 * /v1beta/models/<model>:streamGenerateContent?alt=sse` (what `streamText`
 * calls) and `:generateContent`, answering scripted turns (text, function
 * calls, usage, an answer grounded by Google Search with its
 * `groundingMetadata`), every request recorded.
 */
import type { ServerResponse } from 'node:http';
import { type ModelRequest, type ScriptedModelServer, sendEvents, sendJson, startScriptedModel, textDeltas } from './scripted-model.js';

/** One scripted answer of the fake Gemini. */
export interface GoogleTurn {
  /** Model text (streamed in word-sized chunks). */
  text?: string;
  /** Function calls (`functionCall` parts); `id` defaults to `fc_<request>_<i>`. */
  toolCalls?: Array<{ id?: string; name: string; args: unknown }>;
  /**
   * The answer is grounded by Google Search: its `groundingMetadata` lists the
   * `queries` searched and the web `sources` (groundingChunks with uri and title).
   */
  grounding?: { queries: string[]; sources: Array<{ url: string; title?: string }> };
  /** Reported usage. Default: a rough estimate from the request and the answer. */
  usage?: { promptTokenCount: number; candidatesTokenCount: number };
  /** Answer with this HTTP status and a Google error body instead. */
  error?: { status: number; message: string; reason?: string };
}

/** A running fake Gemini API. `url` ends in `/v1beta`, like the provider's default base URL. */
export type FakeGoogleServer = ScriptedModelServer<GoogleTurn>;

/** Options of `startFakeGoogle`. */
export interface FakeGoogleOptions {
  /** The one key accepted in `x-goog-api-key`; any other gets a 400 `API_KEY_INVALID`, as Google answers. Default: any key. */
  apiKey?: string;
}

const MODEL_CALL = /^\/v1beta\/models\/[^/:]+:(streamGenerateContent|generateContent)$/;

/** Starts a fake Gemini API on 127.0.0.1 with a free port. */
export function startFakeGoogle(opts: FakeGoogleOptions = {}): Promise<FakeGoogleServer> {
  return startScriptedModel<GoogleTurn>({
    basePath: '/v1beta',
    fallback: { text: 'ok' },
    route: (path) => MODEL_CALL.test(path),
    refuse: (req) =>
      opts.apiKey !== undefined && req.headers['x-goog-api-key'] !== opts.apiKey
        ? { status: 400, body: errorBody(400, 'API key not valid. Please pass a valid API key.', 'INVALID_ARGUMENT') }
        : undefined,
    answer,
  });
}

function answer(res: ServerResponse, req: ModelRequest, turn: GoogleTurn, index: number): void {
  if (turn.error) return sendJson(res, turn.error.status, errorBody(turn.error.status, turn.error.message, turn.error.reason ?? 'INTERNAL'));
  const calls = (turn.toolCalls ?? []).map((c, i) => ({ functionCall: { id: c.id ?? `fc_${index}_${i}`, name: c.name, args: c.args ?? {} } }));
  const promptTokenCount = turn.usage?.promptTokenCount ?? Math.ceil(JSON.stringify(req.body?.contents ?? []).length / 4);
  const candidatesTokenCount = turn.usage?.candidatesTokenCount ?? Math.ceil(((turn.text ?? '').length + JSON.stringify(calls).length) / 4);
  const usageMetadata = { promptTokenCount, candidatesTokenCount, totalTokenCount: promptTokenCount + candidatesTokenCount };
  const groundingMetadata = turn.grounding && {
    webSearchQueries: turn.grounding.queries,
    searchEntryPoint: { renderedContent: '<div>search suggestions</div>' },
    groundingChunks: turn.grounding.sources.map((s) => ({ web: { uri: s.url, title: s.title ?? s.url } })),
    groundingSupports: turn.text
      ? [{ segment: { startIndex: 0, endIndex: turn.text.length, text: turn.text }, groundingChunkIndices: turn.grounding.sources.map((_, i) => i) }]
      : [],
  };
  const responseId = `resp_fake_${index}`;
  const last = { finishReason: 'STOP', index: 0, ...(groundingMetadata && { groundingMetadata }) };
  if (req.path.split('?')[0]!.endsWith(':generateContent')) {
    const parts = [...(turn.text ? [{ text: turn.text }] : []), ...calls];
    sendJson(res, 200, { candidates: [{ content: { role: 'model', parts }, ...last }], usageMetadata, modelVersion: 'gemini-fake', responseId });
    return;
  }
  // Gemini streams the text in chunks, the function calls whole, and the grounding with the finishing chunk.
  const chunks: unknown[] = textDeltas(turn.text ?? '').map((text) => ({ candidates: [{ content: { role: 'model', parts: [{ text }] }, index: 0 }] }));
  if (calls.length > 0) chunks.push({ candidates: [{ content: { role: 'model', parts: calls }, index: 0 }] });
  chunks.push({ candidates: [{ content: { role: 'model', parts: [{ text: '' }] }, ...last }], usageMetadata });
  sendEvents(
    res,
    chunks.map((c) => `data: ${JSON.stringify({ ...(c as object), modelVersion: 'gemini-fake', responseId })}\n\n`),
  );
}

function errorBody(code: number, message: string, status: string) {
  return { error: { code, message, status } };
}
