/**
 * An external agent for steerbot's `http-agent` runner plugin: a small Node
 * HTTP service speaking the `steerbot.agent/1` protocol
 * (docs/external-agents.md). No dependencies; it does not import steerbot.
 *
 * - "research <topic>" runs a tool-like slow step (a tool call, slow work, its
 *   result). At the step's boundary it pulls steering, so a message sent
 *   meanwhile is answered in the same run.
 * - Anything else is answered by an OpenAI-compatible chat-completions model
 *   when `MODEL_BASE_URL` is set, else echoed.
 * - A closed stream or a cancel request stops the run's work (and its model call).
 *
 * Run it:  STEERBOT_AGENT_SECRET=<16+ chars> PORT=8787 node examples/http-agent/agent.js
 * or import `startAgent` (tests do).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';

const MAX_SKEW_SECONDS = 300;
const KEEPALIVE_MS = 10_000;

/** Checks `X-Steerbot-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>`. */
export function verifySignature(secret, headers, raw, nowSeconds = Date.now() / 1000) {
  const ts = headers['x-steerbot-timestamp'];
  const sig = headers['x-steerbot-signature'];
  if (typeof ts !== 'string' || typeof sig !== 'string' || !/^\d{1,12}$/.test(ts)) return false;
  if (Math.abs(nowSeconds - Number(ts)) > MAX_SKEW_SECONDS) return false;
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(`${ts}.`).update(raw).digest('hex')}`);
  const given = Buffer.from(sig);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });

/** Thrown when the runner says the run is over (410 / 409 from a run endpoint). */
class RunOver extends Error {}

/** The text of a model message (text parts joined). */
const textOf = (m) =>
  typeof m.content === 'string'
    ? m.content
    : m.content
        .filter((p) => p.type === 'text')
        .map((p) => p.text)
        .join('');

/** Calls an OpenAI-compatible chat-completions API with the conversation so far. */
async function askModel(model, history, signal) {
  const messages = history.filter((m) => m.role === 'user' || m.role === 'assistant' || m.role === 'system').map((m) => ({ role: m.role, content: textOf(m) }));
  const res = await fetch(`${model.baseURL.replace(/\/$/, '')}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${model.apiKey ?? 'none'}` },
    body: JSON.stringify({ model: model.name ?? 'default', messages }),
    signal,
  });
  if (!res.ok) throw new Error(`model answered HTTP ${res.status}`);
  const body = await res.json();
  return body.choices?.[0]?.message?.content ?? '';
}

/**
 * Answers one run request on `res` (NDJSON). `emit` writes one event and
 * counts it: a steering pull names how many events were written before it.
 */
async function answerRun(run, res, signal, o) {
  let eventsSent = 0;
  const emit = (event) => {
    res.write(`${JSON.stringify(event)}\n`);
    eventsSent++;
  };
  const pull = async (mode = 'all') => {
    if (!run.capability) return [];
    const r = await fetch(`${run.capability.url}/steering`, {
      method: 'POST',
      headers: { authorization: `Bearer ${run.capability.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ mode, eventsSent }),
      signal,
    });
    if (r.status === 409 || r.status === 410) throw new RunOver(`run endpoint answered ${r.status}`);
    if (!r.ok) return []; // steering is best effort: what we do not take now comes back as a new invocation
    return (await r.json()).messages;
  };
  emit({ type: 'typing' });
  const history = [...run.history];
  const text = run.inputs.map((m) => m.text).join('\n');
  const research = /^research\s+(.+)$/is.exec(text.trim());
  let answer;
  if (research) {
    const topic = research[1].trim();
    const callId = `research-${run.run.id}-${run.run.attempt}`;
    emit({ type: 'step', messages: [{ role: 'assistant', content: [{ type: 'tool-call', toolCallId: callId, toolName: 'research', input: { topic } }] }] });
    const keepalive = setInterval(() => res.write('\n'), KEEPALIVE_MS); // a blank line: alive, not an event
    try {
      await o.slowStep({ topic, run: run.run, signal });
    } finally {
      clearInterval(keepalive);
    }
    emit({
      type: 'step',
      messages: [
        { role: 'tool', content: [{ type: 'tool-result', toolCallId: callId, toolName: 'research', output: { type: 'text', value: `notes on ${topic}` } }] },
      ],
    });
    // Turn boundary: the tool is done; take what the user said meanwhile into this answer.
    const steered = await pull('all');
    answer = `Research on "${topic}" is done.`;
    if (steered.length > 0) answer += ` You also said: ${steered.map((m) => `"${m.text}"`).join(', ')}. Noted, and answered here.`;
  } else if (o.model) {
    answer = await askModel(o.model, history, signal);
  } else {
    answer = `You said: ${text}`;
  }
  // Streamed in two pieces (channels that stream show it as it comes), then the whole answer.
  const half = Math.ceil(answer.length / 2);
  emit({ type: 'text-delta', text: answer.slice(0, half) });
  emit({ type: 'text-delta', text: answer.slice(half) });
  emit({ type: 'message', text: answer });
  emit({ type: 'state', key: 'turns', value: (Number(run.state.turns) || 0) + 1 });
  emit({ type: 'result', outcome: 'completed' });
}

/**
 * Starts the agent on `host`:`port` (port 0: any free one).
 * Options: `secret` (required), `model` ({ baseURL, apiKey, name }), `slowStepMs` (default 3000),
 * `slowStep({ topic, run, signal })` (replaces the default wait), `port`, `host`.
 * Returns `{ url, requests, close() }`; `requests` lists every verified request body (runs and cancels).
 */
export async function startAgent(options) {
  const o = { slowStepMs: 3000, ...options };
  if (typeof o.secret !== 'string' || o.secret.length < 16) throw new Error('startAgent: secret must have at least 16 characters');
  o.slowStep ??= ({ signal }) => sleep(o.slowStepMs, signal);
  const requests = [];
  const active = new Map(); // `<run id>:<attempt>` → AbortController
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const raw = Buffer.concat(chunks);
      if (req.method !== 'POST' || !verifySignature(o.secret, req.headers, raw)) {
        res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'bad or missing signature' }));
        return;
      }
      const body = JSON.parse(raw.toString('utf8'));
      requests.push(body);
      const key = `${body.run?.id}:${body.run?.attempt}`;
      if (body.type === 'cancel') {
        active.get(key)?.abort('cancelled');
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
        return;
      }
      if (body.type !== 'run') {
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: `unknown request type ${body.type}` }));
        return;
      }
      const ac = new AbortController();
      active.set(key, ac);
      // The runner closed the stream (a stop, or it died): stop working on this run.
      res.on('close', () => ac.abort('stream closed'));
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      try {
        await answerRun(body, res, ac.signal, o);
      } catch (err) {
        if (!ac.signal.aborted && !(err instanceof RunOver)) {
          res.write(
            `${JSON.stringify({ type: 'result', outcome: 'failed', reason: `agent error: ${err instanceof Error ? err.message : String(err)}`.slice(0, 200) })}\n`,
          );
        }
      } finally {
        active.delete(key);
        res.end();
      }
    });
  });
  await new Promise((resolve) => server.listen(o.port ?? 0, o.host ?? '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://${o.host ?? '127.0.0.1'}:${port}/`,
    requests,
    close: () => {
      for (const ac of active.values()) ac.abort('agent closing');
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

// Run directly: configuration from the environment.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const env = process.env;
  const agent = await startAgent({
    secret: env.STEERBOT_AGENT_SECRET,
    port: Number(env.PORT ?? 8787),
    host: env.HOST ?? '127.0.0.1',
    slowStepMs: Number(env.SLOW_STEP_MS ?? 3000),
    ...(env.MODEL_BASE_URL && { model: { baseURL: env.MODEL_BASE_URL, apiKey: env.MODEL_API_KEY, name: env.MODEL_NAME } }),
  });
  process.stdout.write(`agent listening at ${agent.url}\n`);
}
