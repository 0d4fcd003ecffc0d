/**
 * The Events API routes (used when there is no Socket Mode): Slack POSTs
 * events as JSON and button clicks as a form with a `payload` field. The v0
 * signature is checked on the raw body before anything is parsed (401), a
 * malformed body is 400, and the answer comes after the update was handed
 * to the host; a RedisUnavailableError becomes 503 in the server's error
 * handler, so Slack retries (`X-Slack-Retry-Num`), and the retry is deduped
 * by the message's channel and ts.
 */
import { InvalidInputError, json, parseJson, type RouteRegistry, type RouteRequest, type RouteResponse, readJsonBody } from 'steerbot/plugin';
import { slackEnvelopeSchema, slackInteractionTypeSchema } from './event-schema.js';
import { signatureProblem } from './signature.js';
import type { SocketHandlers } from './socket.js';

/** Options of `registerSlackRoutes`. */
export interface SlackRoutesOptions {
  eventsPath: string;
  interactivityPath: string;
  signingSecret: string;
  maxSkewSeconds: number;
  handlers: SocketHandlers;
}

/** Events API bodies are small; Slack caps them well below this. */
const BODY_LIMIT_BYTES = 1_048_576;

/** Registers the two routes with the host's routes (before it listens). */
export function registerSlackRoutes(routes: RouteRegistry, o: SlackRoutesOptions): void {
  const signed = (handle: (req: RouteRequest) => Promise<RouteResponse>) => async (req: RouteRequest) => {
    const problem = signatureProblem(req.headers, req.body, { secret: o.signingSecret, maxSkewSeconds: o.maxSkewSeconds });
    return problem ? json(401, { error: problem }) : handle(req);
  };
  routes.add({
    method: 'POST',
    path: o.eventsPath,
    bodyLimitBytes: BODY_LIMIT_BYTES,
    handle: signed(async (req) => {
      const body = readJsonBody(req, slackEnvelopeSchema, 'event body');
      if (!body.ok) return body.response;
      if (body.value.type === 'url_verification') return json(200, { challenge: body.value.challenge });
      return json(200, await o.handlers.event(body.value.event));
    }),
  });
  routes.add({
    method: 'POST',
    path: o.interactivityPath,
    bodyLimitBytes: BODY_LIMIT_BYTES,
    handle: signed(async (req) => {
      const payload = new URLSearchParams(req.body.toString('utf8')).get('payload');
      if (payload === null) return json(400, { error: 'bad interactivity body: no payload field' });
      const value = parseJson(payload);
      if (!value.ok) throw new InvalidInputError(`bad interactivity body: payload is ${value.message}`);
      const typed = slackInteractionTypeSchema.safeParse(value.value);
      if (!typed.success) return json(400, { error: 'bad interactivity body: payload has no type' });
      return json(200, await o.handlers.interaction(typed.data));
    }),
  });
}
