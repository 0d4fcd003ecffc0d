/**
 * The OpenAI Responses API wire format of the fake OpenAI server
 * (`POST /v1/responses`): a scripted answer as a response object, or as the
 * stream of events OpenAI sends (`response.created`, output items with their
 * text and argument deltas, `response.completed` with usage). A turn may
 * search the web server-side first (a `web_search_call` item, as OpenAI's
 * `web_search` tool reports it) and cite URLs in its text (`url_citation`
 * annotations).
 */

/** A scripted answer, resolved (the fake's own, shared with chat completions). */
export interface ResponsesAnswer {
  id: string;
  created: number;
  text: string;
  toolCalls: Array<{ id: string; name: string; arguments: string }>;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number; prompt_tokens_details?: { cached_tokens: number } };
  /** A server-side web search before the text: its query, and the sources it reports (`action.sources`, sent only when given). */
  webSearch?: { query: string; sources?: string[] } | undefined;
  /** URLs the text cites, as `url_citation` annotations over the whole text. */
  citations?: Array<{ url: string; title?: string }> | undefined;
}

/** One stream event: its `type` is also the SSE `event:` name. */
export interface ResponsesEvent {
  type: string;
  [field: string]: unknown;
}

const MODEL = 'fake-model';

/** The `url_citation` annotations of `a`'s text. */
function annotations(a: ResponsesAnswer) {
  return (a.citations ?? []).map((c) => ({ type: 'url_citation', start_index: 0, end_index: a.text.length, url: c.url, title: c.title ?? c.url }));
}

/** The `web_search_call` item of `a`'s search, or none. */
function searchItems(a: ResponsesAnswer) {
  if (!a.webSearch) return [];
  const { query, sources } = a.webSearch;
  return [
    {
      type: 'web_search_call',
      id: `ws_${a.id}`,
      status: 'completed',
      action: { type: 'search', query, ...(sources && { sources: sources.map((url) => ({ type: 'url', url })) }) },
    },
  ];
}

/** The output items of `a`: its web search if any, a message when there is text, then one function call per tool call. */
function outputItems(a: ResponsesAnswer) {
  const message =
    a.text === ''
      ? []
      : [
          {
            type: 'message',
            id: `msg_${a.id}`,
            status: 'completed',
            role: 'assistant',
            content: [{ type: 'output_text', text: a.text, annotations: annotations(a) }],
          },
        ];
  const calls = a.toolCalls.map((c, i) => ({
    type: 'function_call',
    id: `fc_${a.id}_${i}`,
    call_id: c.id,
    name: c.name,
    arguments: c.arguments,
    status: 'completed',
  }));
  return [...searchItems(a), ...message, ...calls];
}

/** OpenAI's usage object of the Responses API. */
function usage(a: ResponsesAnswer) {
  return {
    input_tokens: a.usage.prompt_tokens,
    input_tokens_details: { cached_tokens: a.usage.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: a.usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: a.usage.total_tokens,
  };
}

/** The response object (`"status": "completed"`), as a non-streamed request gets it and `response.completed` carries it. */
export function responseObject(a: ResponsesAnswer) {
  return {
    id: `resp_${a.id}`,
    object: 'response',
    created_at: a.created,
    status: 'completed',
    model: MODEL,
    output: outputItems(a),
    incomplete_details: null,
    usage: usage(a),
  };
}

/** The events of a streamed answer, in OpenAI's order; every event carries its `sequence_number`. */
export function responsesEvents(a: ResponsesAnswer, split: { text(s: string): string[]; args(s: string): string[] }): ResponsesEvent[] {
  const full = responseObject(a);
  const started = { ...full, status: 'in_progress', output: [], usage: null };
  const events: ResponsesEvent[] = [
    { type: 'response.created', response: started },
    { type: 'response.in_progress', response: started },
  ];
  full.output.forEach((item, output_index) => {
    if (item.type === 'message') {
      const part = { type: 'output_text', text: '', annotations: [] };
      events.push({ type: 'response.output_item.added', output_index, item: { ...item, status: 'in_progress', content: [] } });
      events.push({ type: 'response.content_part.added', item_id: item.id, output_index, content_index: 0, part });
      for (const delta of split.text(a.text)) {
        events.push({ type: 'response.output_text.delta', item_id: item.id, output_index, content_index: 0, delta, logprobs: [] });
      }
      for (const [annotation_index, annotation] of annotations(a).entries())
        events.push({ type: 'response.output_text.annotation.added', item_id: item.id, output_index, content_index: 0, annotation_index, annotation });
      events.push({ type: 'response.output_text.done', item_id: item.id, output_index, content_index: 0, text: a.text, logprobs: [] });
      events.push({
        type: 'response.content_part.done',
        item_id: item.id,
        output_index,
        content_index: 0,
        part: { ...part, text: a.text, annotations: annotations(a) },
      });
    } else if (item.type === 'web_search_call') {
      events.push({ type: 'response.output_item.added', output_index, item: { type: item.type, id: item.id, status: 'in_progress' } });
      for (const phase of ['in_progress', 'searching', 'completed']) events.push({ type: `response.web_search_call.${phase}`, item_id: item.id, output_index });
    } else {
      const args = (item as { arguments: string }).arguments;
      events.push({ type: 'response.output_item.added', output_index, item: { ...item, arguments: '', status: 'in_progress' } });
      for (const delta of split.args(args)) events.push({ type: 'response.function_call_arguments.delta', item_id: item.id, output_index, delta });
      events.push({ type: 'response.function_call_arguments.done', item_id: item.id, output_index, arguments: args });
    }
    events.push({ type: 'response.output_item.done', output_index, item });
  });
  events.push({ type: 'response.completed', response: full });
  return events.map((e, sequence_number) => ({ ...e, sequence_number }));
}
