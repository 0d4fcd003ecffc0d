import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { APICallError, generateText, stepCountIs, streamText, tool } from 'ai';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';

let server: FakeOpenAIServer;
beforeEach(async () => {
  server = await startFakeOpenAI();
});
afterEach(async () => {
  await server.close();
});

const model = () => createOpenAICompatible({ name: 'fake', baseURL: server.url, apiKey: 'test-key', includeUsage: true })('fake-model');

const weather = tool({
  description: 'current weather of a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => ({ city, tempC: 21 }),
});

describe('fake OpenAI server', () => {
  describe('streaming', () => {
    it('streams text in several deltas that concatenate to the scripted text', async () => {
      server.script([{ text: 'Hello there, streaming world' }]);
      const result = streamText({ model: model(), prompt: 'hi' });
      const deltas: string[] = [];
      for await (const d of result.textStream) deltas.push(d);
      expect(deltas.length).toBeGreaterThan(1);
      expect(deltas.join('')).toBe('Hello there, streaming world');
      expect(await result.finishReason).toBe('stop');
      expect(server.requests[0]!.body).toMatchObject({ model: 'fake-model', stream: true, stream_options: { include_usage: true } });
      expect(server.requests[0]!.body.messages).toEqual([{ role: 'user', content: 'hi' }]);
      expect(server.requests[0]!.headers.authorization).toBe('Bearer test-key');
    });

    it('reports the scripted usage', async () => {
      server.script([{ text: 'counted', usage: { prompt_tokens: 42, completion_tokens: 7 } }]);
      const result = streamText({ model: model(), prompt: 'count' });
      await result.consumeStream();
      expect(await result.usage).toMatchObject({ inputTokens: 42, outputTokens: 7, totalTokens: 49 });
    });

    it('runs a tool round: the second request carries the tool result', async () => {
      server.script([{ text: 'Let me check.', toolCalls: [{ id: 'call_w1', name: 'weather', args: { city: 'Paris' } }] }, { text: 'It is 21 °C in Paris.' }]);
      const result = streamText({ model: model(), prompt: 'weather in Paris?', tools: { weather }, stopWhen: stepCountIs(3) });
      expect(await result.text).toBe('It is 21 °C in Paris.');

      expect(server.requests).toHaveLength(2);
      const second = server.requests[1]!.body.messages;
      expect(second.slice(1)).toEqual([
        {
          role: 'assistant',
          content: 'Let me check.',
          tool_calls: [{ id: 'call_w1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_w1', content: '{"city":"Paris","tempC":21}' },
      ]);
      expect(server.requests[0]!.body.tools[0]).toMatchObject({ type: 'function', function: { name: 'weather' } });

      const messages = await result.responseMessages;
      expect(messages[1]).toEqual({
        role: 'tool',
        content: [{ type: 'tool-result', toolCallId: 'call_w1', toolName: 'weather', output: { type: 'json', value: { city: 'Paris', tempC: 21 } } }],
      });
    });

    it('surfaces an error status as an error part carrying an APICallError', async () => {
      server.script([{ error: { status: 400, message: 'context too long', code: 'context_length_exceeded' } }]);
      // onError is set so the SDK does not log the expected error.
      const result = streamText({ model: model(), prompt: 'x', maxRetries: 0, onError: () => {} });
      const errors: unknown[] = [];
      for await (const part of result.fullStream) if (part.type === 'error') errors.push(part.error);
      expect(errors).toHaveLength(1);
      expect(APICallError.isInstance(errors[0])).toBe(true);
      expect(errors[0]).toMatchObject({ statusCode: 400, message: 'context too long' });
    });

    it('marks the request aborted when the client aborts mid-stream', async () => {
      server.script([{ text: 'one two three four five six seven eight', chunkDelayMs: 50 }]);
      const abort = new AbortController();
      const result = streamText({ model: model(), prompt: 'long', abortSignal: abort.signal });
      let text = '';
      for await (const part of result.fullStream) {
        if (part.type === 'text-delta') {
          text += part.text;
          abort.abort();
        }
      }
      expect(text).toBe('one ');
      await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
    });
  });

  describe('non-streaming', () => {
    it('answers text with usage', async () => {
      server.script([{ text: 'plain answer', usage: { prompt_tokens: 5, completion_tokens: 2 } }]);
      const result = await generateText({ model: model(), prompt: 'hi' });
      expect(result.text).toBe('plain answer');
      expect(result.usage).toMatchObject({ inputTokens: 5, outputTokens: 2, totalTokens: 7 });
      expect(server.requests[0]!.body.stream).toBeUndefined();
    });

    it('runs a tool round with a zod input schema and execute', async () => {
      const execute = vi.fn(async ({ city }: { city: string }) => ({ city, tempC: 18 }));
      server.script([{ toolCalls: [{ name: 'weather', args: { city: 'Oslo' } }] }, { text: 'Chilly.' }]);
      const result = await generateText({
        model: model(),
        prompt: 'weather in Oslo?',
        tools: { weather: tool({ inputSchema: z.object({ city: z.string() }), execute }) },
        stopWhen: stepCountIs(3),
      });
      expect(execute).toHaveBeenCalledOnce();
      expect(execute.mock.calls[0]![0]).toEqual({ city: 'Oslo' });
      expect(result.text).toBe('Chilly.');
      expect(result.steps).toHaveLength(2);
      const [assistant, toolMessage] = server.requests[1]!.body.messages.slice(1);
      expect(assistant).toMatchObject({ role: 'assistant', content: null, tool_calls: [{ id: 'call_0_0', function: { name: 'weather' } }] });
      expect(toolMessage).toEqual({ role: 'tool', tool_call_id: 'call_0_0', content: '{"city":"Oslo","tempC":18}' });
    });

    it('rejects with an APICallError carrying the status', async () => {
      server.script([{ error: { status: 401, message: 'bad key', type: 'authentication_error' } }]);
      const err = await generateText({ model: model(), prompt: 'x', maxRetries: 0 }).catch((e: unknown) => e);
      expect(APICallError.isInstance(err)).toBe(true);
      expect(err).toMatchObject({ statusCode: 401, message: 'bad key', isRetryable: false });
    });

    it('lets the SDK retry a 500 and succeed on the next turn', async () => {
      server.script([{ error: { status: 500, message: 'overloaded', type: 'server_error' } }, { text: 'recovered' }]);
      const result = await generateText({ model: model(), prompt: 'x', maxRetries: 1 });
      expect(result.text).toBe('recovered');
      expect(server.requests).toHaveLength(2);
    });

    it('marks the request aborted when the client aborts during the delay', async () => {
      server.script([{ text: 'too late', delayMs: 10_000 }]);
      const abort = new AbortController();
      const pending = generateText({ model: model(), prompt: 'x', abortSignal: abort.signal, maxRetries: 0 }).catch((e: unknown) => e);
      await server.waitForRequests(1);
      abort.abort();
      const err = await pending;
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).name).toBe('AbortError');
      await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
    });
  });

  describe('request times', () => {
    it('records when a request arrived and, once its answer is sent, when it ended', async () => {
      server.script([{ text: 'done' }]);
      await generateText({ model: model(), prompt: 'x' });
      await vi.waitFor(() => expect(server.requests[0]!.endedAt).toBeDefined());
      const [r] = server.requests;
      expect(r!.endedAt!).toBeGreaterThanOrEqual(r!.receivedAt);
    });

    it('has no end while the answer is in progress, and ends when the client goes away', async () => {
      server.script([{ text: 'too late', delayMs: 10_000 }]);
      const abort = new AbortController();
      const pending = generateText({ model: model(), prompt: 'x', abortSignal: abort.signal, maxRetries: 0 }).catch(() => undefined);
      await server.waitForRequests(1);
      expect(server.requests[0]!.receivedAt).toBeGreaterThan(0);
      expect(server.requests[0]!.endedAt).toBeUndefined();
      abort.abort();
      await pending;
      await vi.waitFor(() => expect(server.requests[0]!.endedAt).toBeDefined());
    });
  });

  describe('script', () => {
    it('answers ok when the script runs out', async () => {
      server.script([{ text: 'first' }]);
      expect((await generateText({ model: model(), prompt: 'a' })).text).toBe('first');
      expect((await generateText({ model: model(), prompt: 'b' })).text).toBe('ok');
    });

    it('calls a script function with the request body and index', async () => {
      server.script((req, index) => ({ text: `#${index}: ${req.messages.at(-1).content}` }));
      expect((await generateText({ model: model(), prompt: 'a' })).text).toBe('#0: a');
      expect((await generateText({ model: model(), prompt: 'b' })).text).toBe('#1: b');
    });
  });

  describe('waitForRequests', () => {
    it('resolves when the n-th request arrives', async () => {
      const waiting = server.waitForRequests(2);
      await generateText({ model: model(), prompt: 'a' });
      await generateText({ model: model(), prompt: 'b' });
      await expect(waiting).resolves.toBeUndefined();
    });

    it('rejects after the timeout', async () => {
      await expect(server.waitForRequests(1, 30)).rejects.toThrow(/expected 1 requests/);
    });
  });
});
